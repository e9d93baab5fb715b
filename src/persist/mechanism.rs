//! Whether what applies a NIC persistence file runs on this host: a `.link`
//! file is read only by systemd-udevd (eudev has no `net_setup_link`), a
//! udev rule by any udevd, and the rule's `systemd-run` needs systemd as
//! PID 1. Checked before `persist --install` writes, and by audit before it
//! calls such a file `ok`: a file nothing reads keeps nothing.

use crate::knob::HostCtx;

/// udevd's control socket: systemd-udevd-control.socket (or udevd itself)
/// makes it, and it stays while udev is set up, also between the daemon's
/// socket-activated runs.
const UDEV_CONTROL: &str = "/run/udev/control";
/// What sd_booted(3) checks: systemd is PID 1.
const SYSTEMD_BOOTED: &str = "/run/systemd/system";

/// The udev daemons, by process name: systemd's, then eudev's.
fn udev_processes(host: &HostCtx) -> Vec<String> {
    host.processes()
        .iter()
        .filter(|p| matches!(p.comm.as_str(), "systemd-udevd" | "udevd"))
        .map(|p| format!("{} (PID {})", p.comm, p.pid))
        .collect()
}

/// Evidence that systemd is PID 1, or why not.
pub fn systemd(host: &HostCtx) -> Result<String, String> {
    if host.root.exists(SYSTEMD_BOOTED) {
        return Ok(format!("{SYSTEMD_BOOTED} exists"));
    }
    let pid1 = host.text("/proc/1/comm");
    Err(format!(
        "systemd is not PID 1 on {} ({SYSTEMD_BOOTED} is missing{})",
        host.name,
        pid1.map(|c| format!("; PID 1 is {c}")).unwrap_or_default()
    ))
}

/// Evidence that udev runs here (`systemd_only`: systemd-udevd, the one that
/// reads `.link` files), or why not.
pub fn udev(host: &HostCtx, systemd_only: bool) -> Result<String, String> {
    let running = udev_processes(host);
    if systemd_only && !running.is_empty() && running.iter().all(|p| p.starts_with("udevd ")) {
        return Err(format!(
            "the udev running on {} is not systemd's ({}): only systemd-udevd applies .link files",
            host.name,
            running.join(", ")
        ));
    }
    let control = host.root.exists(UDEV_CONTROL);
    if systemd_only && control && running.is_empty() {
        systemd(host).map_err(|e| format!("{e}: only systemd-udevd applies .link files"))?;
    }
    match (running.first(), control) {
        (Some(p), _) => Ok(format!("{p} runs")),
        (None, true) => Ok(format!("{UDEV_CONTROL} exists")),
        (None, false) => Err(format!(
            "no udev runs on {} (no systemd-udevd process, no {UDEV_CONTROL})",
            host.name
        )),
    }
}

/// The alternatives to name when a NIC's file would never be applied here.
pub fn instead(host: &HostCtx, id: &str) -> String {
    match systemd(host) {
        Ok(_) => "use `persistence: boot` (a unit that applies the knob at every boot), or \
                  start udev first"
            .into(),
        Err(_) => format!(
            "nothing hostknob writes runs at boot here: keep `persistence: runtime` and run \
             `hostknob apply {id}` from the host's own start-up"
        ),
    }
}

/// The hostknob a udev rule runs: by absolute path, as udev's `RUN` and
/// systemd's search path hold only the system directories (a binary in
/// ~/.cargo/bin is on neither).
pub fn hostknob_path() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| crate::name::shell_word(p) == *p)
        .unwrap_or_else(|| "/usr/bin/hostknob".into())
}
