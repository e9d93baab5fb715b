//! `persistence: link-file`: a systemd.link(5) file for the NIC kinds. udev
//! applies it whenever the device appears (at boot, and again when the
//! driver reloads or the interface is re-created), where a boot unit would
//! run once. One file per interface, `/etc/systemd/network/50-hostknob-IF.link`,
//! matched by the interface's MAC address (names change), holding every
//! `link-file` knob of the manifest on that interface: udev applies only the
//! first `.link` file that matches a device (systemd.link(5), "The first (in
//! lexical order) of the link files that matches a given device is applied"),
//! so the file also carries the naming policy of the `99-default.link` it
//! shadows. The settings and their ethtool fields are systemd's
//! src/shared/ethtool-util.c and src/udev/net/link-config-gperf.gperf
//! (coalescing since systemd 250).

use super::Artifact;
use crate::ethtool::{Field, Section};
use crate::knob::{HostCtx, Target};
use crate::manifest::{Knob, Manifest};
use crate::schema::Persistence;

pub const DIRS: [&str; 4] = [
    "/etc/systemd/network",
    "/run/systemd/network",
    "/usr/lib/systemd/network",
    "/lib/systemd/network",
];

/// The file of interface `ifname`.
pub fn path_for(ifname: &str) -> String {
    format!("{}/50-hostknob-{ifname}.link", DIRS[0])
}

/// A value in systemd's words: a number, `yes`/`no`, or a time span.
#[derive(Clone, Copy)]
enum Unit {
    Count,
    Bool,
    Usec,
    Sec,
}

/// ethtool's field to systemd.link's setting, per section.
const SETTINGS: &[(Section, &str, &str, Unit)] = &[
    (Section::Channels, "rx", "RxChannels", Unit::Count),
    (Section::Channels, "tx", "TxChannels", Unit::Count),
    (Section::Channels, "other", "OtherChannels", Unit::Count),
    (
        Section::Channels,
        "combined",
        "CombinedChannels",
        Unit::Count,
    ),
    (Section::Rings, "rx", "RxBufferSize", Unit::Count),
    (Section::Rings, "rx-mini", "RxMiniBufferSize", Unit::Count),
    (Section::Rings, "rx-jumbo", "RxJumboBufferSize", Unit::Count),
    (Section::Rings, "tx", "TxBufferSize", Unit::Count),
    (
        Section::Coalesce,
        "adaptive-rx",
        "UseAdaptiveRxCoalesce",
        Unit::Bool,
    ),
    (
        Section::Coalesce,
        "adaptive-tx",
        "UseAdaptiveTxCoalesce",
        Unit::Bool,
    ),
    (Section::Coalesce, "rx-usecs", "RxCoalesceSec", Unit::Usec),
    (
        Section::Coalesce,
        "rx-usecs-irq",
        "RxCoalesceIrqSec",
        Unit::Usec,
    ),
    (
        Section::Coalesce,
        "rx-usecs-low",
        "RxCoalesceLowSec",
        Unit::Usec,
    ),
    (
        Section::Coalesce,
        "rx-usecs-high",
        "RxCoalesceHighSec",
        Unit::Usec,
    ),
    (Section::Coalesce, "tx-usecs", "TxCoalesceSec", Unit::Usec),
    (
        Section::Coalesce,
        "tx-usecs-irq",
        "TxCoalesceIrqSec",
        Unit::Usec,
    ),
    (
        Section::Coalesce,
        "tx-usecs-low",
        "TxCoalesceLowSec",
        Unit::Usec,
    ),
    (
        Section::Coalesce,
        "tx-usecs-high",
        "TxCoalesceHighSec",
        Unit::Usec,
    ),
    (
        Section::Coalesce,
        "rx-frames",
        "RxMaxCoalescedFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "rx-frames-irq",
        "RxMaxCoalescedIrqFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "rx-frame-low",
        "RxMaxCoalescedLowFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "rx-frame-high",
        "RxMaxCoalescedHighFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "tx-frames",
        "TxMaxCoalescedFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "tx-frames-irq",
        "TxMaxCoalescedIrqFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "tx-frame-low",
        "TxMaxCoalescedLowFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "tx-frame-high",
        "TxMaxCoalescedHighFrames",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "pkt-rate-low",
        "CoalescePacketRateLow",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "pkt-rate-high",
        "CoalescePacketRateHigh",
        Unit::Count,
    ),
    (
        Section::Coalesce,
        "sample-interval",
        "CoalescePacketRateSampleIntervalSec",
        Unit::Sec,
    ),
    (
        Section::Coalesce,
        "stats-block-usecs",
        "StatisticsBlockCoalesceSec",
        Unit::Usec,
    ),
    (
        Section::Features,
        "rx-gro",
        "GenericReceiveOffload",
        Unit::Bool,
    ),
    (
        Section::Features,
        "rx-gro-hw",
        "GenericReceiveOffloadHardware",
        Unit::Bool,
    ),
    (
        Section::Features,
        "rx-lro",
        "LargeReceiveOffload",
        Unit::Bool,
    ),
    (
        Section::Features,
        "tx-generic-segmentation",
        "GenericSegmentationOffload",
        Unit::Bool,
    ),
    (
        Section::Features,
        "tx-tcp-segmentation",
        "TCPSegmentationOffload",
        Unit::Bool,
    ),
    (
        Section::Features,
        "tx-tcp6-segmentation",
        "TCP6SegmentationOffload",
        Unit::Bool,
    ),
    (
        Section::Features,
        "rx-checksum",
        "ReceiveChecksumOffload",
        Unit::Bool,
    ),
    (
        Section::Features,
        "rx-vlan-hw-parse",
        "ReceiveVLANCTAGHardwareAcceleration",
        Unit::Bool,
    ),
    (
        Section::Features,
        "tx-vlan-hw-insert",
        "TransmitVLANCTAGHardwareAcceleration",
        Unit::Bool,
    ),
    (
        Section::Features,
        "rx-vlan-filter",
        "ReceiveVLANCTAGFilter",
        Unit::Bool,
    ),
    (
        Section::Features,
        "tx-vlan-stag-hw-insert",
        "TransmitVLANSTAGHardwareAcceleration",
        Unit::Bool,
    ),
    (
        Section::Features,
        "rx-ntuple-filter",
        "NTupleFilter",
        Unit::Bool,
    ),
    (
        Section::Features,
        "tx-gso-partial",
        "PartialGenericSegmentationOffload",
        Unit::Bool,
    ),
];

/// systemd's shipped `99-default.link` `[Link]` (systemd 252), used when the
/// host has none to copy.
const DEFAULT_LINK: &str = "NamePolicy=keep kernel database onboard slot path\n\
                            AlternativeNamesPolicy=database onboard slot path\n\
                            MACAddressPolicy=persistent\n";

/// `Key=value` for one written value, or why systemd.link has no setting for it.
fn setting(field: &Field, value: &str) -> Result<String, String> {
    let Some(&(_, _, key, unit)) = SETTINGS
        .iter()
        .find(|(s, n, _, _)| *s == field.section && *n == field.name)
    else {
        return Err(format!(
            "{} {} has no systemd.link setting",
            field.section.as_str(),
            field.name
        ));
    };
    let v = match unit {
        Unit::Count => value.to_string(),
        Unit::Bool => match value {
            "on" | "1" => "yes".into(),
            _ => "no".into(),
        },
        Unit::Usec => format!("{value}us"),
        Unit::Sec => format!("{value}s"),
    };
    Ok(format!("{key}={v}"))
}

/// The values a knob writes here, as ethtool fields with their values.
fn fields(targets: &[Target]) -> Vec<(Field, String)> {
    targets
        .iter()
        .filter(|t| t.blocker.is_none())
        .filter_map(|t| Some((Field::parse(&t.path)?, t.write.clone()?)))
        .flat_map(|(f, w)| crate::ethtool::channels::each(&f, &w))
        .collect()
}

/// The one interface a knob's values are on, or why the knob cannot have a file.
fn one_interface(knob: &Knob, fields: &[(Field, String)]) -> Result<String, String> {
    let mut names: Vec<&str> = fields.iter().map(|(f, _)| f.ifname.as_str()).collect();
    names.dedup();
    match names.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(format!("{}: no interface here takes it", knob.id)),
        many => Err(format!(
            "{}: it selects {} interfaces here ({}); a .link file matches one device, so give \
             each interface a knob of its own (target.interfaces: NAME)",
            knob.id,
            many.len(),
            many.join(", ")
        )),
    }
}

/// The `[Link]` lines of the `99-default.link` the host's udev reads, else systemd's.
fn default_link(host: &HostCtx) -> (String, String) {
    for dir in DIRS {
        let path = format!("{dir}/99-default.link");
        if let Some(text) = host.text(&path) {
            let mut in_link = false;
            let mut out = String::new();
            for line in text.lines().map(str::trim) {
                if line.starts_with('[') {
                    in_link = line == "[Link]";
                } else if in_link && !line.is_empty() && !line.starts_with(['#', ';']) {
                    out += &format!("{line}\n");
                }
            }
            return (out, path);
        }
    }
    (DEFAULT_LINK.to_string(), "systemd's default".into())
}

/// The settings of `knob` on `ifname`, one per line with the knob's id.
fn knob_lines(knob: &Knob, host: &HostCtx) -> Result<(String, Vec<String>), String> {
    let survey = knob
        .spec
        .survey(host)
        .map_err(|e| knob.source.field_error(e).to_string())?;
    crate::knob::refusal(&knob.id, &super::blocked(&survey.targets))?;
    let fields = fields(&survey.targets);
    let ifname = one_interface(knob, &fields)?;
    let (at, _) = super::how_to_persist(knob);
    let lines = fields
        .iter()
        .map(|(f, v)| setting(f, v))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "{at}: persistence: {}: {e}; keep it `runtime` (apply it again after a driver reload)",
                knob.id
            )
        })?;
    Ok((ifname, lines))
}

pub(super) fn artifact(
    knob: &Knob,
    host: &HostCtx,
    manifest: &Manifest,
) -> Result<Artifact, String> {
    let survey = knob
        .spec
        .survey(host)
        .map_err(|e| knob.source.field_error(e).to_string())?;
    let own = fields(&survey.targets);
    let (ifname, _) = knob_lines(knob, host)?;
    let mac = host
        .text(&format!("/sys/class/net/{ifname}/address"))
        .filter(|m| !m.is_empty() && m != "00:00:00:00:00:00")
        .ok_or_else(|| format!("{}: {ifname} has no MAC address to match", knob.id))?;
    let mut body = String::new();
    let mut others = Vec::new();
    for other in manifest.for_host(&host.name) {
        if other.persistence != Persistence::LinkFile {
            continue;
        }
        let Ok((i, lines)) = knob_lines(other, host) else {
            continue;
        };
        if i != ifname {
            continue;
        }
        if other.id != knob.id {
            others.push(other.id.clone());
        }
        body += &format!("# {} ({})\n{}\n", other.id, other.kind, lines.join("\n"));
    }
    let (link, from) = default_link(host);
    let content = format!(
        "{header}# Every link-file knob on {ifname}: udev applies the first .link file that \
         matches a device, so there is one per interface.\n\
         [Match]\nMACAddress={mac}\n\n\
         [Link]\n# The naming policy of {from}, which this file shadows for {ifname}.\n{link}{body}",
        header = super::header(knob, &host.name),
    );
    let mut notes = vec![format!(
        "{}: udev applies {} whenever {ifname} appears (boot, driver reload, re-created \
         interface); `udevadm trigger --action=add /sys/class/net/{ifname}` applies it now",
        knob.id,
        path_for(&ifname)
    )];
    if !others.is_empty() {
        notes.push(format!(
            "{}: the file also holds {} of this manifest (one .link file per interface); \
             `persist {} --remove` deletes the file, and `persist OTHER --install` writes it \
             again with the others",
            knob.id,
            others.join(", "),
            knob.id
        ));
    }
    let mut commands = vec![];
    if let Some((command, clash)) = nm_view(host, &ifname, &own) {
        notes.push(format!(
            "{}: NetworkManager manages {ifname}: it applies its connection's ethtool.* \
             properties when the connection activates, after udev; the command below sets the \
             same values there{}",
            knob.id,
            clash.map(|c| format!(" ({c})")).unwrap_or_default()
        ));
        commands.push(command);
    }
    Ok(Artifact {
        knob: knob.id.clone(),
        mechanism: Persistence::LinkFile,
        path: Some(path_for(&ifname)),
        content,
        commands,
        notes,
        replaces: vec![],
    })
}

/// What keeps the knob: its interface's file holds every one of its settings.
pub(super) fn check(knob: &Knob, writable: &[&Target], host: &HostCtx) -> Result<String, String> {
    let owned: Vec<Target> = writable.iter().map(|t| (*t).clone()).collect();
    let fields = fields(&owned);
    let ifname = one_interface(knob, &fields)?;
    let path = path_for(&ifname);
    let Some(text) = host.text(&path) else {
        return Err(format!(
            "{path} does not exist: `hostknob persist {} --install` writes it",
            knob.id
        ));
    };
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    for (f, v) in &fields {
        let want = setting(f, v)?;
        if !lines.contains(&want.as_str()) {
            return Err(format!(
                "{path} lacks {want} ({} {}): `hostknob persist {} --install` rewrites it",
                f.ifname, f.name, knob.id
            ));
        }
    }
    if let Some((_, Some(clash))) = nm_view(host, &ifname, &fields) {
        return Err(clash);
    }
    let nm = match nm_connection(host, &ifname) {
        Some((p, _)) => format!("; NetworkManager's {p} sets none of them otherwise"),
        None => String::new(),
    };
    Ok(format!(
        "{path} (systemd.link: udev applies it whenever {ifname} appears){nm}"
    ))
}

/// NetworkManager's `ethtool.*` property for a field (nm-ethtool-utils.h:
/// the short feature names for ethtool's legacy ones, the kernel's others).
fn nm_property(field: &Field) -> String {
    let n = field.name.as_str();
    match field.section {
        Section::Features => {
            let short = match n {
                "rx-gro" => "gro",
                "rx-lro" => "lro",
                "tx-generic-segmentation" => "gso",
                "tx-tcp-segmentation" => "tso",
                "rx-checksum" => "rx",
                "rx-ntuple-filter" => "ntuple",
                other => other,
            };
            format!("feature-{short}")
        }
        Section::Coalesce => format!("coalesce-{}", n.replace("frame-", "frames-")),
        Section::Rings => format!("ring-{n}"),
        Section::Channels => format!("channels-{n}"),
    }
}

/// NetworkManager's keyfile for `ifname` (by `interface-name=` or its MAC),
/// when NetworkManager runs here: its path and connection id.
fn nm_connection(host: &HostCtx, ifname: &str) -> Option<(String, String)> {
    let dir = "/etc/NetworkManager/system-connections";
    let mac = host
        .text(&format!("/sys/class/net/{ifname}/address"))
        .unwrap_or_default()
        .to_ascii_lowercase();
    let mut names = host.list(dir);
    names.sort();
    names.into_iter().find_map(|name| {
        let path = format!("{dir}/{name}");
        let text = host.text(&path)?;
        let ours = text.lines().map(str::trim).any(|l| {
            l == format!("interface-name={ifname}")
                || (!mac.is_empty() && l.to_ascii_lowercase() == format!("mac-address={mac}"))
        });
        let id = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("id="))
            .unwrap_or(name.trim_end_matches(".nmconnection"))
            .to_string();
        ours.then_some((path, id))
    })
}

/// The `nmcli` command that sets the same values in NetworkManager's
/// connection, and a keyfile line that disagrees with them.
fn nm_view(
    host: &HostCtx,
    ifname: &str,
    fields: &[(Field, String)],
) -> Option<(String, Option<String>)> {
    let (path, id) = nm_connection(host, ifname)?;
    let text = host.text(&path).unwrap_or_default();
    let mut args = Vec::new();
    let mut clash = None;
    for (f, v) in fields {
        let prop = nm_property(f);
        let nm_value = match (f.section, v.as_str()) {
            (Section::Features, "on") => "on".to_string(),
            (Section::Features, _) => "off".to_string(),
            (_, "on") => "1".to_string(),
            (_, "off") => "0".to_string(),
            (_, n) => n.to_string(),
        };
        let keyfile = match nm_value.as_str() {
            "on" => "true".to_string(),
            "off" => "false".to_string(),
            n => n.to_string(),
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(set) = line.trim().strip_prefix(&format!("{prop}="))
                && set != keyfile
                && clash.is_none()
            {
                clash = Some(format!(
                    "{path}:{}: NetworkManager's connection {id} sets {prop}={set}, not {keyfile}, \
                     and applies it when the connection activates, after udev's .link file",
                    i + 1
                ));
            }
        }
        args.push(format!("ethtool.{prop} {nm_value}"));
    }
    let command = format!("nmcli connection modify '{id}' {}", args.join(" "));
    Some((command, clash))
}
