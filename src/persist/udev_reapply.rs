//! `persistence: udev-reapply`: a udev rule that applies the knob again
//! whenever one of its interfaces appears (udev's coldplug at boot, a driver
//! reload, a re-created interface), for what a systemd.link file cannot set:
//! RPS and XPS masks and flow tables (`queues/rx-N` files exist only once
//! the device does, so a tmpfiles.d line at boot misses a later one) and
//! ethtool fields .link lacks. The rule matches each interface by its PCI
//! function (`KERNELS==`, [`super::nic_match`]): the kernel name of an `add`
//! event is the name before udev renames it, and the MAC may be a bond's or
//! a cloned one. It hands the apply to systemd (`systemd-run --no-block`):
//! udev kills long RUN programs, and apply may wait for the lock (udev(7),
//! RUN). XPS on drivers that write their own map when the interface is
//! first opened, after the `add` event, is applied after the network is up
//! instead ([`XPS_AT_OPEN`]).

use super::template_unit::{self, manifest_for_unit};
use super::{Artifact, mechanism, nic_match};
use crate::knob::{HostCtx, Target};
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

pub const RULES_DIR: &str = "/etc/udev/rules.d";

/// The rule file of knob `id`.
pub fn path_for(id: &str) -> String {
    format!("{RULES_DIR}/90-hostknob-{id}.rules")
}

/// The interfaces a knob's files (`/sys/class/net/IF/...`) and ethtool
/// values (`ethtool:IF/...`) are on, in order.
fn interfaces(targets: &[Target]) -> Vec<String> {
    let mut out: Vec<String> = targets
        .iter()
        .filter(|t| t.blocker.is_none())
        .filter_map(|t| {
            if let Some(f) = crate::ethtool::Field::parse(&t.path) {
                return Some(f.ifname);
            }
            let rest = t.path.strip_prefix("/sys/class/net/")?;
            let end = rest.find('/')?;
            Some(rest[..end].to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Drivers that set each TX ring's XPS map themselves when the ring is
/// first configured at open (`ndo_open`), after udev's `add` event, and the
/// function doing it: an apply at the `add` event is overwritten.
pub const XPS_AT_OPEN: [(&str, &str); 3] = [
    ("ice", "ice_cfg_xps_tx_ring"),
    ("i40e", "i40e_config_xps_tx_ring"),
    ("ixgbe", "ixgbe_configure_tx_ring"),
];

/// systemd-run's ordering of the apply after the network is up: at boot,
/// network-online.target is reached once the network manager has brought
/// the interfaces up (opened them).
const AFTER_UP: &str = "--property=After=network-online.target \
                        --property=Wants=network-online.target ";

/// The driver function that rewrites XPS at open, for a knob writing XPS
/// files on an interface of such a driver.
fn xps_at_open(targets: &[Target], ifname: &str, driver: Option<&str>) -> Option<&'static str> {
    let writes_xps = targets.iter().any(|t| {
        t.path
            .starts_with(&format!("/sys/class/net/{ifname}/queues/tx-"))
            && t.path.contains("/xps_")
    });
    let driver = driver?;
    XPS_AT_OPEN
        .iter()
        .find(|(d, _)| *d == driver)
        .filter(|_| writes_xps)
        .map(|(_, f)| *f)
}

fn command(dir: &str, id: &str, after_up: bool) -> String {
    format!(
        "/usr/bin/systemd-run --no-block --collect --quiet {}{} apply --wait --manifest {dir} {id}",
        if after_up { AFTER_UP } else { "" },
        mechanism::hostknob_path()
    )
}

/// What runs the rule here (udev, and systemd for `systemd-run`), or why
/// nothing would.
fn runs_here(host: &HostCtx) -> Result<String, String> {
    let udev = mechanism::udev(host, false)?;
    let systemd = mechanism::systemd(host)
        .map_err(|e| format!("{e}: the rule's systemd-run needs systemd"))?;
    Ok(format!("{udev}, {systemd}"))
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    manifest: &Manifest,
    targets: &[&Target],
) -> Result<Artifact, String> {
    let id = &knob.id;
    runs_here(host).map_err(|e| {
        format!(
            "{id}: a udev rule would never run here: {e}; {}",
            mechanism::instead(host, id)
        )
    })?;
    let (dir, outside) = manifest_for_unit(manifest, host).map_err(|e| format!("{id}: {e}"))?;
    let owned: Vec<Target> = targets.iter().map(|t| (*t).clone()).collect();
    let mut rules = String::new();
    let mut notes = vec![format!(
        "{id}: udev applies the knob again whenever its interface appears (at boot too); \
         `udevadm control --reload` reads the rule now"
    )];
    for ifname in interfaces(&owned) {
        let dev = nic_match::device(host, &ifname).map_err(|e| format!("{id}: {e}"))?;
        let (keys, why) = nic_match::rule_match(host, &dev).map_err(|e| format!("{id}: {e}"))?;
        notes.push(format!("{id}: {ifname} is {why}"));
        let at_open = xps_at_open(&owned, &ifname, dev.driver.as_deref());
        if let Some(f) = at_open {
            notes.push(format!(
                "{id}: {} sets XPS itself when {ifname} is first opened ({f}), after udev's add \
                 event, so the rule applies the knob once the network is up \
                 (After=network-online.target); after a driver reload later on, run `hostknob \
                 apply {id}` once {ifname} is up, and audit shows the driver's map until then",
                dev.driver.as_deref().unwrap_or_default()
            ));
        }
        rules += &format!(
            "# {ifname}\nACTION==\"add\", SUBSYSTEM==\"net\", {keys}, RUN+=\"{}\"\n",
            command(&dir, id, at_open.is_some())
        );
    }
    if outside {
        notes.push(template_unit::outside_note("rule", &dir, host));
    }
    Ok(Artifact {
        knob: id.clone(),
        mechanism: Persistence::UdevReapply,
        path: Some(path_for(id)),
        content: format!("{}{rules}", super::header(knob, &host.name)),
        commands: vec!["udevadm control --reload".into()],
        notes,
        replaces: Vec::new(),
    })
}

/// `Ok(where)` when the knob's rule is installed and applies it, from the
/// manifest it was loaded from, for each of its interfaces here.
pub(super) fn check(knob: &Knob, writable: &[&Target], host: &HostCtx) -> Result<String, String> {
    let id = &knob.id;
    let path = path_for(id);
    let again = format!("`hostknob persist {id} --install` writes it");
    // Advise the install only where it would work: persist refuses it
    // where udev (or systemd, for the rule's systemd-run) is missing.
    let runs = runs_here(host);
    let Some(text) = host.text(&path) else {
        return Err(match runs {
            Ok(_) => format!("{path} does not exist: {again}"),
            Err(e) => format!(
                "{path} does not exist, and a udev rule would never run here ({e}): \
                 nothing hostknob writes keeps this knob on this host; run `hostknob apply {id}` \
                 from the host's own start-up"
            ),
        });
    };
    let runs = runs.map_err(|e| format!("{path} is never run: {e}"))?;
    let owned: Vec<Target> = writable.iter().map(|t| (*t).clone()).collect();
    let manifest_dir = knob
        .source
        .file
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    for ifname in interfaces(&owned) {
        let dev = nic_match::device(host, &ifname)?;
        let (keys, _) = nic_match::rule_match(host, &dev)?;
        let line = text
            .lines()
            .find(|l| !l.trim_start().starts_with('#') && l.contains(&keys));
        let Some(line) = line else {
            return Err(format!(
                "{path} has no rule for {ifname} ({keys}; an older hostknob matched the \
                 current MAC, which a bond or a cloned MAC changes): {again}"
            ));
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let runs_knob = words.windows(3).any(|w| {
            w[0] == "--manifest"
                && w[2].trim_end_matches('"') == id
                && same_dir(host, w[1], &manifest_dir)
        });
        // udev's PATH has only the system directories: a bare name may not run.
        let program = words.windows(2).find(|w| w[1] == "apply").map(|w| w[0]);
        if let Some(p) = program.filter(|p| !p.starts_with('/')) {
            return Err(format!(
                "{path}: its rule runs `{p}` by name, which udev and systemd look up only in \
                 the system directories: {again} (by absolute path)"
            ));
        }
        if !runs_knob {
            return Err(format!(
                "{path}: its rule for {ifname} does not apply {id} from the manifest it was \
                 loaded from ({}): {again}",
                knob.source.file.display()
            ));
        }
        let driver = dev.driver.as_deref().unwrap_or_default();
        if let Some(f) = xps_at_open(&owned, &ifname, dev.driver.as_deref()) {
            if !line.contains("After=network-online.target") {
                return Err(format!(
                    "{path}: its rule applies {id} at udev's add event, but {driver} sets XPS \
                     itself when {ifname} is first opened ({f}), after that event, so every \
                     boot ends with the driver's map: {again}"
                ));
            }
            let flags = host.text(&format!("/sys/class/net/{ifname}/flags"));
            let up = flags
                .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
                .map(|f| f & 1 == 1);
            if up == Some(false) {
                return Err(format!(
                    "{ifname} is down: {driver} sets XPS itself when it is next opened ({f}), \
                     replacing the map in effect now; {path} applies {id} again only at the \
                     next boot: run `hostknob apply {id}` once {ifname} is up"
                ));
            }
        }
    }
    Ok(format!(
        "{path} (udev applies the knob whenever its interface appears; {runs})"
    ))
}

/// Whether a rule's `--manifest DIR` (a path on the booted host) is `dir`.
fn same_dir(host: &HostCtx, named: &str, dir: &str) -> bool {
    let canon = |p: std::path::PathBuf| p.canonicalize().ok();
    let want = canon(std::path::absolute(dir).unwrap_or_default());
    want.is_some()
        && [host.root.host_path(named), std::path::PathBuf::from(named)]
            .into_iter()
            .filter_map(canon)
            .any(|d| Some(d) == want)
}
