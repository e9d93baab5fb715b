//! Paths a root deliberately does not show: what the audit DaemonSet's chart
//! (deploy/helm/hostknob) does not mount into its pod. In the pod they are
//! absent whatever the host holds, so a fact read from one is unknown, never
//! "absent": [`Root::with_unseen`] makes each such open fail as absent and
//! remembers the entry, and audit turns what depended on it into `unknown`.
//!
//! This is the one list of them. `tests/suite/fleet_pod.rs` runs the audit
//! under a recording of every path it asks for and checks each one is mounted
//! by the chart or covered here; docs/fleet.md lists the same entries.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;

use super::Root;

/// What a fact from an unseen path can change in a knob's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concern {
    /// Boot-time sysctl configuration: knobs with a `/proc/sys` file.
    Sysctl,
    /// Running processes: knobs whose managing services may run, and the
    /// kinds that look at processes.
    Processes,
    /// The boot loader's command line: `kernel-cmdline` (persistence and
    /// pending-reboot).
    BootLoader,
    /// saptune's notes, which may set any sysctl or sysfs file.
    Saptune,
    /// irqbalance's banned CPUs on RPM-based hosts.
    Irqbalance,
    /// NetworkManager's connections and udev's control socket (NIC knobs'
    /// persistence).
    NetworkManager,
    /// Device nodes (MSRs, `/dev/cpu_dma_latency`).
    Devices,
    /// A NIC's ethtool state (channels, rings, coalescing, features).
    Ethtool,
    /// The kernel's build configuration (what it boots with).
    KernelConfig,
}

/// One path (a glob on whole components; everything beneath it too) the pod
/// does not see, and why it is not mounted.
#[derive(Debug)]
pub struct Unseen {
    pub path: &'static str,
    pub why: &'static str,
    pub concern: Concern,
}

/// What the audit DaemonSet does not mount, though audit may read it.
pub const POD_UNSEEN: &[Unseen] = &[
    Unseen {
        path: "/proc/[0-9]*",
        why: "process environments and command lines are the host's secrets",
        concern: Concern::Processes,
    },
    Unseen {
        path: "/etc/sysctl.conf",
        why: "a file that may be absent cannot be mounted without creating it",
        concern: Concern::Sysctl,
    },
    Unseen {
        path: "/etc/kernel/cmdline",
        why: "creating it when absent would change what kernel-install writes; /etc/kernel may hold signing keys",
        concern: Concern::BootLoader,
    },
    Unseen {
        path: "/efi",
        why: "creating /efi would make systemd mount the ESP there",
        concern: Concern::BootLoader,
    },
    Unseen {
        path: "/etc/sysconfig/irqbalance",
        why: "/etc/sysconfig holds network and service credentials on RPM-based hosts, and the file alone may be absent",
        concern: Concern::Irqbalance,
    },
    Unseen {
        path: "/etc/sysconfig/saptune",
        why: "/etc/sysconfig holds network and service credentials on RPM-based hosts, and the file alone may be absent",
        concern: Concern::Saptune,
    },
    Unseen {
        path: "/etc/saptune",
        why: "absent on most hosts; saptune's package files under /usr are mounted",
        concern: Concern::Saptune,
    },
    Unseen {
        path: "/run/saptune",
        why: "absent on most hosts; /run as a whole holds sockets",
        concern: Concern::Saptune,
    },
    Unseen {
        path: "/var/lib/saptune",
        why: "absent on most hosts",
        concern: Concern::Saptune,
    },
    Unseen {
        path: "/etc/NetworkManager",
        why: "connection files hold Wi-Fi and VPN secrets",
        concern: Concern::NetworkManager,
    },
    Unseen {
        path: "/run/udev/control",
        why: "udevd's control socket: /run as a whole holds sockets, and a read-only pod has no business with udevd",
        concern: Concern::NetworkManager,
    },
    Unseen {
        path: "/proc/config.gz",
        why: "present only on kernels built with CONFIG_IKCONFIG_PROC; /boot's copy is mounted and read first",
        concern: Concern::KernelConfig,
    },
    Unseen {
        path: "/hostknob-capture",
        why: "a capture's record of ethtool state; the pod cannot ask the host's NICs (the ioctl needs the host's network namespace)",
        concern: Concern::Ethtool,
    },
    Unseen {
        path: "/dev",
        why: "device nodes: MSRs need CAP_SYS_RAWIO, and opening cpu_dma_latency adds a request",
        concern: Concern::Devices,
    },
];

/// The entry of `list` covering `logical` (it, or one of its parents).
pub fn entry_of(list: &'static [Unseen], logical: &str) -> Option<&'static Unseen> {
    Hidden::new(list).entry(logical).map(|i| &list[i])
}

/// The unseen entries of a root, and those asked for so far.
pub(super) struct Hidden {
    list: &'static [Unseen],
    patterns: Vec<glob::Pattern>,
    /// Each entry's literal head (up to its first `[`): most paths (`/sys`)
    /// start with none, and skip the glob matching.
    heads: Vec<&'static str>,
    hits: Mutex<BTreeSet<usize>>,
}

impl Hidden {
    fn new(list: &'static [Unseen]) -> Hidden {
        let patterns = list
            .iter()
            .map(|u| glob::Pattern::new(u.path).expect("POD_UNSEEN holds valid globs"))
            .collect();
        let heads = list
            .iter()
            .map(|u| u.path.split('[').next().unwrap_or(u.path))
            .collect();
        Hidden {
            list,
            patterns,
            heads,
            hits: Mutex::new(BTreeSet::new()),
        }
    }

    /// The entry covering `logical` (it, or one of its parents).
    fn entry(&self, logical: &str) -> Option<usize> {
        if !self.heads.iter().any(|h| logical.starts_with(h)) {
            return None;
        }
        let opts = glob::MatchOptions {
            require_literal_separator: true,
            ..Default::default()
        };
        let mut path = logical.trim_end_matches('/');
        loop {
            if let Some(i) = self
                .patterns
                .iter()
                .position(|p| p.matches_with(path, opts))
            {
                return Some(i);
            }
            match path.rfind('/') {
                Some(0) | None => return None,
                Some(i) => path = &path[..i],
            }
        }
    }
}

impl Root {
    /// This root without `list`'s paths: each open under one fails as absent
    /// (ENOENT) and is remembered ([`Root::unseen_asked`]).
    pub fn with_unseen(mut self, list: &'static [Unseen]) -> Root {
        self.hidden = Some(Hidden::new(list));
        self
    }

    /// Whether `logical` is one this root does not show; the entry is
    /// remembered as asked for when it is.
    pub fn unseen(&self, logical: &str) -> bool {
        let Some(h) = &self.hidden else {
            return false;
        };
        match h.entry(logical) {
            Some(i) => {
                h.hits.lock().unwrap().insert(i);
                true
            }
            None => false,
        }
    }

    /// Whether `logical` is shown, without remembering anything.
    pub fn shows(&self, logical: &str) -> bool {
        self.hidden
            .as_ref()
            .is_none_or(|h| h.entry(logical).is_none())
    }

    /// The unseen entries something asked for so far, in the list's order.
    pub fn unseen_asked(&self) -> Vec<&'static Unseen> {
        match &self.hidden {
            Some(h) => h.hits.lock().unwrap().iter().map(|&i| &h.list[i]).collect(),
            None => Vec::new(),
        }
    }

    /// Every host path is asked for through here before it is opened: the
    /// test suite's recording of them, and the unseen paths refused as absent.
    #[inline]
    pub(super) fn ask(&self, logical: &str) -> io::Result<()> {
        #[cfg(feature = "test-hooks")]
        if let Some(log) = &self.open_log {
            log.note(logical);
        }
        if self.unseen(logical) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        Ok(())
    }

    /// Whether [`Root::ask`] has anything to do (saves spelling a path).
    #[inline]
    pub(super) fn asks(&self) -> bool {
        #[cfg(feature = "test-hooks")]
        if self.open_log.is_some() {
            return true;
        }
        self.hidden.is_some()
    }
}

/// Test-only (the `test-hooks` feature): `HOSTKNOB_TEST_OPEN_LOG=FILE`
/// appends every host path a root opened with [`Root::open`] asks for, once
/// each, a line each, so a test can check them against what a pod mounts.
#[cfg(feature = "test-hooks")]
pub(super) struct OpenLog {
    seen: Mutex<(BTreeSet<String>, std::fs::File)>,
}

#[cfg(feature = "test-hooks")]
impl OpenLog {
    pub(super) fn from_env() -> Option<OpenLog> {
        let path = std::env::var_os("HOSTKNOB_TEST_OPEN_LOG")?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        Some(OpenLog {
            seen: Mutex::new((BTreeSet::new(), file)),
        })
    }

    fn note(&self, logical: &str) {
        use std::io::Write;
        let mut g = self.seen.lock().unwrap();
        if g.0.insert(logical.to_string()) {
            let _ = writeln!(g.1, "{logical}");
        }
    }
}
