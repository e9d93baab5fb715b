//! The one place where apply, its rollback and revert change a file: put a
//! value in place, then read it back. The write is a request, the read-back
//! is the fact.

use std::io::{self, Write as _};

use crate::journal;
use crate::knob::WriteMode;
use crate::msr::write as msr;
use crate::root::{Root, is_absent};
use crate::task;

/// What to put in place at a path.
#[derive(Clone, Copy, Debug)]
pub enum Put<'a> {
    /// Text written into an existing file: a kernel attribute, or the plain
    /// file standing for one in a captured tree.
    Attribute(&'a str),
    /// A whole file, created or replaced atomically.
    File(&'a str),
    /// No file: remove it, and the directories created for it when empty.
    Absent { created_dirs: &'a [String] },
    /// An MSR field (`crate::msr::write`) set to the hex value given, on
    /// the CPUs of its scope domain.
    Msr { bits: &'a str, cpus: &'a [u32] },
    /// A thread's allowed CPUs (a CPU list) or policy (`crate::task::Sched`).
    Thread(&'a str),
}

/// A write or read-back that did not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub path: String,
    /// Whether the file may have changed (the write began): then it must be restored.
    pub touched: bool,
    pub why: String,
    /// The error number of a write the kernel refused (EIO from a managed
    /// IRQ), for a kind that leaves such a target out instead of failing.
    pub errno: Option<i32>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Why writing `path` failed, in an operator's words.
pub fn describe_write_error(path: &str, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) if unsafe { libc::geteuid() } != 0 => {
            format!("needs root to write {path}")
        }
        Some(libc::EROFS) => format!("{path} is on a read-only file system"),
        Some(libc::EISDIR) => format!("{path} is a directory, not a file"),
        // kernel/irq/proc.c, write_irq_affinity: a managed IRQ (or one whose chip cannot move).
        Some(libc::EIO) if path.starts_with("/proc/irq/") => format!(
            "{path}: the kernel refused the write (EIO): a managed IRQ, whose affinity it sets \
             itself; keep such IRQs off isolated CPUs with `isolcpus=managed_irq,CPUS`"
        ),
        // x86 vector allocation (arch/x86/kernel/apic/vector.c): no free vector
        // on the CPUs of the mask, not a full disk.
        Some(libc::ENOSPC) if path.starts_with("/proc/irq/") => format!(
            "{path}: the kernel has no free interrupt vector left on those CPUs (ENOSPC): too \
             many IRQs for too few CPUs; widen the CPU list, or keep managed IRQs off isolated \
             CPUs with `isolcpus=managed_irq,CPUS` instead of moving them"
        ),
        _ => format!("cannot write {path}: {e}"),
    }
}

/// Puts `what` in place at `path`, then runs `read_back`, which says whether
/// the file now holds what was meant (`Err` says what it holds instead).
pub fn put(
    root: &Root,
    path: &str,
    what: Put,
    read_back: impl FnOnce() -> Result<(), String>,
) -> Result<(), Failure> {
    let fail = |touched: bool, why: String| Failure {
        path: path.to_string(),
        touched,
        why,
        errno: None,
    };
    // The kernel refused before anything changed: a kind may leave it out.
    let refused = |e: io::Error, why: String| Failure {
        errno: e.raw_os_error(),
        ..fail(false, why)
    };
    crate::sched_tunables::mount_for(root, path);
    match what {
        Put::Attribute(text) => {
            super::hooks::log_write(path, text);
            if let Some(e) = super::hooks::injected_error(path) {
                let why = describe_write_error(path, &e);
                return Err(refused(e, why));
            }
            // An ethtool value: the ioctl, or a capture's state file, replaced whole.
            if crate::ethtool::Field::parse(path).is_some() {
                if let Err(e) = crate::ethtool::set(root, path, text) {
                    let why = describe_write_error(path, &e.error);
                    // The state file changed before the queues failed: rolled back.
                    return Err(match e.changed {
                        true => fail(true, why),
                        false => refused(e.error, why),
                    });
                }
                return read_back().map_err(|why| fail(true, format!("{path}: {why}")));
            }
            let mut f = root
                .open_write(path)
                .map_err(|e| fail(false, describe_write_error(path, &e)))?;
            // From here on a plain file is truncated: it counts as changed,
            // unless the kernel refused the write (a kernel file is never
            // truncated; the attribute keeps its value).
            if let Err(e) = f.write_all(text.as_bytes()).and_then(|_| f.flush()) {
                let why = describe_write_error(path, &e);
                return Err(match root.is_kernel_file(path) {
                    Ok(true) => refused(e, why),
                    _ => fail(true, why),
                });
            }
        }
        Put::File(new) => root.replace_file(path, new.as_bytes()).map_err(|e| {
            // A failed replace leaves nothing behind, unless it failed after the rename.
            let replaced = content(root, path).is_ok_and(|now| now.as_deref() == Some(new));
            fail(replaced, describe_write_error(path, &e))
        })?,
        Put::Msr { bits, cpus } => {
            put_msr(root, path, bits, cpus).map_err(|e| fail(e.touched, e.why))?;
        }
        Put::Thread(list) => {
            super::hooks::log_write(path, list);
            let written = match super::hooks::injected_error(path) {
                Some(e) => Err(e),
                None => task::write(root, path, list),
            };
            let sched = task::parse_path(path).is_some_and(|t| t.attr == task::Attr::Sched);
            match written {
                // Exited since the plan: nothing to move, nothing to read back.
                Ok(task::Written::Gone) => return Ok(()),
                Ok(task::Written::Done) => {}
                Err(e) => {
                    let why = match e.raw_os_error() {
                        Some(libc::EPERM | libc::EINVAL) if sched => format!(
                            "{path}: the kernel refused the policy {list} ({}): {}",
                            if e.raw_os_error() == Some(libc::EPERM) {
                                "EPERM"
                            } else {
                                "EINVAL"
                            },
                            crate::task::refused_policy_why(e.raw_os_error())
                        ),
                        Some(libc::EINVAL) => format!(
                            "{path}: the kernel refused the CPUs {list} (EINVAL): none of them is in the thread's cpuset, or the kernel pins it"
                        ),
                        // kernel/sched/syscalls.c, dl_task_check_affinity.
                        Some(libc::EBUSY) => format!(
                            "{path}: the kernel refused the CPUs {list} (EBUSY): a SCHED_DEADLINE thread must keep every CPU of its root domain"
                        ),
                        _ => describe_write_error(path, &e),
                    };
                    return Err(refused(e, why));
                }
            }
        }
        Put::Absent { created_dirs } => {
            match root.remove_file(path) {
                Err(e) if !is_absent(&e) => {
                    return Err(fail(true, format!("cannot remove {path}: {e}")));
                }
                _ => {}
            }
            for dir in created_dirs.iter().rev() {
                root.remove_empty_dir(dir)
                    .map_err(|e| fail(true, format!("cannot remove {dir}: {e}")))?;
            }
        }
    }
    read_back().map_err(|why| fail(true, format!("{path}: {why}")))
}

fn put_msr(root: &Root, path: &str, bits: &str, cpus: &[u32]) -> Result<(), msr::WriteError> {
    let refuse = |why: String| msr::WriteError {
        touched: false,
        why,
    };
    let (cpu, field) =
        msr::parse_path(path).ok_or_else(|| refuse(format!("{path} is not an MSR field")))?;
    let value = msr::parse_hex(bits).ok_or_else(|| refuse(format!("{bits:?} is not hex")))?;
    let domain = if cpus.is_empty() { &[cpu][..] } else { cpus };
    let msrs = crate::msr::Msrs::open(root, cpu).map_err(refuse)?;
    // The test log names each CPU's device as it is written.
    let mut log = |c: u32| super::hooks::log_write(&msr::path(c, field), bits);
    msrs.write_field(domain, field, value, &mut log).map(drop)
}

/// The file's exact content now; `None` when it does not exist. An MSR
/// field's content is its bits in hex (`0x1`), read on its path's CPU.
pub fn content(root: &Root, path: &str) -> io::Result<Option<String>> {
    crate::sched_tunables::mount_for(root, path);
    if task::parse_path(path).is_some() {
        return task::content(root, path);
    }
    if crate::ethtool::Field::parse(path).is_some() {
        return crate::ethtool::content(root, path);
    }
    if msr::parse_path(path).is_some() {
        return msr::read_field(root, path)
            .map(|bits| Some(msr::field_text(bits)))
            .map_err(io::Error::other);
    }
    match root.read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text")),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks that `path` holds `want` (exactly, or trimmed when `trim`).
pub(super) fn holds(root: &Root, path: &str, want: Option<&str>, trim: bool) -> Result<(), String> {
    let now = content(root, path).map_err(|e| format!("cannot read it back: {e}"))?;
    let same = match (&now, want) {
        (Some(n), Some(w)) if trim => n.trim() == w.trim(),
        (n, w) => n.as_deref() == w,
    };
    if same {
        return Ok(());
    }
    let show = |v: Option<&str>| match v {
        Some(v) => format!("{:?}", v.trim()),
        None => "no file".to_string(),
    };
    Err(format!(
        "read back {}, expected {}",
        show(now.as_deref()),
        show(want)
    ))
}

/// Puts back what a journal entry recorded and reads it back. A kernel
/// attribute is written the recorded value in the words it accepts and must
/// then read as it did when recorded; a plain file (a drop-in, or any file
/// of a captured tree) gets its exact bytes back.
pub fn restore(root: &Root, entry: &journal::Entry) -> Result<(), Failure> {
    let path = entry.path.as_str();
    let fail = |why: String| Failure {
        path: path.to_string(),
        touched: false,
        why,
        errno: None,
    };
    match entry.mode {
        WriteMode::File => match entry.before.as_deref() {
            None => put(
                root,
                path,
                Put::Absent {
                    created_dirs: &entry.created_dirs,
                },
                || holds(root, path, None, false),
            ),
            Some(c) => put(root, path, Put::File(c), || {
                holds(root, path, Some(c), false)
            }),
        },
        WriteMode::Attribute => {
            let (Some(before), Some(found)) = (entry.before.as_deref(), entry.found.as_deref())
            else {
                return Err(fail(format!(
                    "{path}: the journal holds no value to restore"
                )));
            };
            let kernel = crate::ethtool::Field::parse(path).is_some()
                || root
                    .is_kernel_file(path)
                    .map_err(|e| fail(format!("cannot open {path}: {e}")))?;
            if kernel {
                let queues = queues_found(root, entry);
                queues()?;
                put(root, path, Put::Attribute(before), || {
                    holds(root, path, Some(found), true)
                })?;
                // Again: the counts' sync removes queues a driver keeps beyond them.
                queues()
            } else {
                put(root, path, Put::Attribute(found), || {
                    holds(root, path, Some(found), false)
                })
            }
        }
        WriteMode::Msr => {
            let bits = entry
                .before
                .as_deref()
                .and_then(msr::parse_hex)
                .zip(msr::parse_path(path))
                .map(|(before, (_, field))| msr::field_text(field.get(before)))
                .ok_or_else(|| {
                    fail(format!(
                        "{path}: the journal holds no register value to restore"
                    ))
                })?;
            let cpus = entry
                .cpus
                .as_ref()
                .map(|c| c.as_slice().to_vec())
                .unwrap_or_default();
            put(
                root,
                path,
                Put::Msr {
                    bits: &bits,
                    cpus: &cpus,
                },
                || holds(root, path, Some(&bits), true),
            )
        }
        WriteMode::Affinity | WriteMode::Sched => {
            let Some(before) = entry.before.as_deref() else {
                return Err(fail(format!(
                    "{path}: the journal holds no value to restore"
                )));
            };
            put(root, path, Put::Thread(before), || {
                match task::content(root, path) {
                    Ok(Some(now)) if task::same_value(path, &now, before) => Ok(()),
                    Ok(Some(now)) => Err(format!("read back {now:?}, expected {before:?}")),
                    Ok(None) => Ok(()),
                    Err(e) => Err(format!("cannot read it back: {e}")),
                }
            })
        }
        WriteMode::Hold => Err(fail(format!(
            "{path}: a held request ends with its process; nothing to restore"
        ))),
    }
}

/// In a tree, what puts back the queue directories a channel entry
/// journaled, byte for byte (a removed queue's values are nowhere else):
/// run before the channels are written back and after.
fn queues_found<'a>(
    root: &'a Root,
    entry: &'a journal::Entry,
) -> impl Fn() -> Result<(), Failure> + 'a {
    move || {
        let (Some(want), Some(f)) = (&entry.queues, crate::ethtool::Field::parse(&entry.path))
        else {
            return Ok(());
        };
        if root.is_live() {
            return Ok(());
        }
        crate::ethtool::queues::restore(root, &f.ifname, want).map_err(|e| Failure {
            path: entry.path.clone(),
            touched: true,
            why: format!(
                "{}: cannot put back the queue directories of {}: {e}",
                entry.path, f.ifname
            ),
            errno: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::describe_write_error;

    #[test]
    fn irq_write_errors_name_the_kernels_reason() {
        let enospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let m = describe_write_error("/proc/irq/40/smp_affinity_list", &enospc);
        assert!(
            m.contains("no free interrupt vector") && !m.contains("No space left on device"),
            "{m}"
        );
        let m = describe_write_error("/sys/x", &enospc);
        assert!(m.contains("No space left on device"), "{m}");
    }
}
