//! `persistence: link-file`: a systemd.link(5) file for the NIC kinds. udev
//! applies it whenever the device appears (at boot, and again when the
//! driver reloads or the interface is re-created), where a boot unit would
//! run once. One file per interface, `/etc/systemd/network/50-hostknob-IF.link`,
//! matched by the device's permanent address or PCI path
//! ([`super::nic_match`]), holding every `link-file` knob of the manifest on
//! that interface: udev applies only the first `.link` file that matches a
//! device ([`crate::peers::udev`]), so a host file sorting first and matching
//! is refused by name, and the file carries the `[Link]` lines of the one it
//! replaces (the naming policy of `99-default.link`). The settings and their
//! ethtool fields are systemd's src/shared/ethtool-util.c and
//! src/udev/net/link-config-gperf.gperf (coalescing since systemd 250).

use super::{Artifact, mechanism, nic_match, nm_view};
use crate::ethtool::{Field, Section};
use crate::knob::{HostCtx, Target};
use crate::manifest::{Knob, Manifest};
use crate::peers::udev::{self, Device, LinkFile};
use crate::schema::Persistence;

/// The file of interface `ifname`.
pub fn path_for(ifname: &str) -> String {
    format!("{}/{}", udev::LINK_DIRS[0], file_name(ifname))
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

/// The file name of interface `ifname`'s file: what orders it.
fn file_name(ifname: &str) -> String {
    format!("50-hostknob-{ifname}.link")
}

/// Why a `.link` file of the host that sorts first and matches the device
/// keeps hostknob's from ever being applied.
fn shadowed(file: &LinkFile, ifname: &str) -> String {
    format!(
        "shadowed by {}: it matches {ifname} ({}) and sorts before {}, and udev applies only \
         the first .link file that matches a device (systemd.link(5))",
        file.path,
        file.match_summary(),
        file_name(ifname)
    )
}

/// The interface's device, and the host's `.link` files with the facts
/// their conditions ask about.
fn host_links(
    knob: &Knob,
    host: &HostCtx,
    ifname: &str,
) -> Result<(Device, Vec<LinkFile>, udev::Facts), String> {
    let dev = nic_match::device(host, ifname).map_err(|e| format!("{}: {e}", knob.id))?;
    Ok((
        dev,
        udev::link_files(host.root),
        udev::Facts::read(host.root),
    ))
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
    mechanism::udev(host, true).map_err(|e| {
        format!(
            "{}: a .link file would never be applied here: {e}; {}",
            knob.id,
            mechanism::instead(host, &knob.id)
        )
    })?;
    let (dev, files, facts) = host_links(knob, host, &ifname)?;
    let (matching, why) =
        nic_match::link_match(host, &dev).map_err(|e| format!("{}: {e}", knob.id))?;
    let name = file_name(&ifname);
    let now = udev::applying(&files, &dev, &facts, Some(&name));
    if let Some(first) = now.filter(|f| f.name < name) {
        return Err(format!(
            "{}: {}; hostknob's file would never be applied: set these values in that file \
             (or in what generates it: netplan, cloud-init), or give the knob `persistence: \
             udev-reapply`",
            knob.id,
            shadowed(first, &ifname)
        ));
    }
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
    let (link, from) = match now {
        Some(f) => (
            f.link.iter().map(|l| format!("{l}\n")).collect(),
            f.path.clone(),
        ),
        None => (DEFAULT_LINK.to_string(), "systemd's default".into()),
    };
    let content = format!(
        "{header}# Every link-file knob on {ifname}: udev applies the first .link file that \
         matches a device, so there is one per interface.\n\
         [Match]\n{matching}\n\
         [Link]\n# The naming policy of {from}, which this file shadows for {ifname}.\n{link}{body}",
        header = super::header(knob, &host.name),
    );
    let mut notes = vec![
        format!(
            "{}: udev applies {} whenever {ifname} appears (boot, driver reload, re-created \
             interface); `udevadm trigger --action=add /sys/class/net/{ifname}` applies it now",
            knob.id,
            path_for(&ifname)
        ),
        format!("{}: {ifname} is {why}", knob.id),
    ];
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
    if let Some(view) = nm_view::view(host, &dev, &own) {
        notes.push(format!(
            "{}: NetworkManager manages {ifname}: it applies its connection's ethtool.* \
             properties when the connection activates, after udev; the command below sets the \
             same values there{}{}",
            knob.id,
            view.clash.map(|c| format!(" ({c})")).unwrap_or_default(),
            view.needs
                .map(|v| format!(
                    "; its nmcli needs NetworkManager {v} or later (older ones refuse the property)"
                ))
                .unwrap_or_default()
        ));
        notes.extend(view.missing.iter().map(|m| format!("{}: {m}", knob.id)));
        commands.extend(view.command);
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

/// What keeps the knob: its interface's file holds every one of its
/// settings, matches the device, and is the file udev applies to it.
pub(super) fn check(knob: &Knob, writable: &[&Target], host: &HostCtx) -> Result<String, String> {
    let owned: Vec<Target> = writable.iter().map(|t| (*t).clone()).collect();
    let fields = fields(&owned);
    let ifname = one_interface(knob, &fields)?;
    let path = path_for(&ifname);
    let again = format!("`hostknob persist {} --install` rewrites it", knob.id);
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
                "{path} lacks {want} ({} {}): {again}",
                f.ifname, f.name
            ));
        }
    }
    let runs = mechanism::udev(host, true).map_err(|e| format!("{path} is never applied: {e}"))?;
    let (dev, files, facts) = host_links(knob, host, &ifname)?;
    let (matching, _) = nic_match::link_match(host, &dev)?;
    if let Some(miss) = matching.lines().find(|m| !lines.contains(m)) {
        return Err(format!(
            "{path} does not match {ifname} by {miss} (an older hostknob matched the current \
             MAC, which a bond or a cloned MAC changes): {again}"
        ));
    }
    match udev::applying(&files, &dev, &facts, None) {
        Some(f) if f.path == path => {}
        Some(f) if f.name < file_name(&ifname) => return Err(shadowed(f, &ifname)),
        other => {
            return Err(format!(
                "{path} does not match {ifname} here ({}): {again}",
                other
                    .map(|f| format!("udev applies {}", f.path))
                    .unwrap_or_else(|| "udev applies no .link file to it".into())
            ));
        }
    }
    if let Some(view) = nm_view::view(host, &dev, &fields)
        && let Some(clash) = view.clash
    {
        return Err(clash);
    }
    let nm = match nm_view::connection(host, &dev) {
        Some(k) => format!("; NetworkManager's {} sets none of them otherwise", k.path),
        None => String::new(),
    };
    Ok(format!(
        "{path} (systemd.link: udev applies it whenever {ifname} appears; {runs}){nm}"
    ))
}
