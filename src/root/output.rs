//! Files a user names for output (`--raw`, `--plot`, `--svg`, `doc --out`):
//! opened as the state files are, so that a path is never a way to write
//! somewhere else or to hang. A symbolic link is refused (never followed),
//! a FIFO or socket is refused without blocking (`O_NONBLOCK` at open), a
//! regular file with another hard link is refused before it is truncated
//! (it would change the other name too); a character device such as
//! `/dev/null` is written as it is.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for writing from its start, made when missing (mode 0644).
pub fn create_output(path: &Path) -> io::Result<File> {
    let refused = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refused(
                "is a symbolic link: output is never written through a link; name the file itself"
                    .into(),
            ),
            Some(libc::ENXIO) => refused("is a FIFO (named pipe): name a regular file".into()),
            _ => e,
        })?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if kind.is_char_device() {
        return Ok(file);
    }
    if kind.is_fifo() || kind.is_socket() || !kind.is_file() {
        return Err(refused(
            "is not a regular file (a FIFO, socket or directory): name a regular file".into(),
        ));
    }
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(refused(format!(
            "has {} hard links: writing it would change the other names too; name a new file",
            std::os::unix::fs::MetadataExt::nlink(&meta)
        )));
    }
    file.set_len(0)?;
    // Blocking again for the writes themselves.
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .map_err(io::Error::from)?;
    Ok(file)
}

/// Writes `bytes` to `path` as `create_output` opens it.
pub fn write_output(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use io::Write as _;
    create_output(path)?.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_shared_inodes_are_refused_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_output(&link, b"x").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let hard = dir.path().join("hard");
        std::fs::hard_link(&target, &hard).unwrap();
        let e = write_output(&hard, b"x").unwrap_err().to_string();
        assert!(e.contains("2 hard links"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No reader: refused at once rather than blocking forever.
        let e = write_output(&fifo, b"x").unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
        let plain = dir.path().join("new.csv");
        std::fs::write(&plain, "old longer text").unwrap();
        write_output(&plain, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "new");
        write_output(Path::new("/dev/null"), b"x").unwrap();
    }
}
