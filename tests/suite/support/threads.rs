//! A process of this machine with a name of its own, for the
//! thread-affinity tests (suite and live): a copy of sleep(1) under that
//! name, killed when dropped, a panic included.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

pub struct Sleeper {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Sleeper {
    pub fn start(name: &str) -> Sleeper {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join(name);
        let sleep = ["/usr/bin/sleep", "/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("sleep(1)");
        std::fs::copy(sleep, &exe).unwrap();
        // ETXTBSY: a process another test thread forked while the copy was
        // open for writing still holds it until it execs; the copy is
        // executable once that has happened.
        let mut tries = 0;
        let child = loop {
            match Command::new(&exe).arg("300").spawn() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 200 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => break r.unwrap(),
            }
        };
        let me = Sleeper { child, _dir: dir };
        // Its name is the file's once it has exec'd.
        for _ in 0..200 {
            if me.comm().as_deref() == Some(name) {
                return me;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("{name} did not start");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn comm(&self) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{}/comm", self.pid()))
            .ok()
            .map(|c| c.trim().to_string())
    }

    /// Its thread files as they are now, copied into the tree.
    pub fn capture_into(&self, root: &Path) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        let task = PathBuf::from(format!("/proc/{}/task", self.pid()));
        for e in std::fs::read_dir(&task).unwrap() {
            let tid = e.unwrap().file_name();
            let dst = root.join(format!("proc/{}/task", self.pid())).join(&tid);
            std::fs::create_dir_all(&dst).unwrap();
            for f in ["stat", "status"] {
                std::fs::write(dst.join(f), std::fs::read(task.join(&tid).join(f)).unwrap())
                    .unwrap();
            }
            dirs.push(dst);
        }
        dirs
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Cpus_allowed_list` of a `status` file.
pub fn allowed_in(status: &Path) -> String {
    std::fs::read_to_string(status)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}
