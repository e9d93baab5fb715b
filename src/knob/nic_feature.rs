//! `nic-feature`: offloads on or off (`ethtool -K`), by the kernel's
//! feature names (`rx-gro`, `rx-gro-hw`, `rx-lro`, ...) or ethtool's
//! legacy ones (`gro`, `tso`, `sg`, `tx`, ...), each covering the features
//! ethtool's table gives it. A feature named that the driver reports as
//! fixed is refused at plan time (the kernel keeps it: net/ethtool/features.c).

use std::collections::BTreeMap;

use super::nic::{self, EthtoolKnob, NicSel, NicTargetDoc, ethtool_kind};
use super::{Blocker, FieldError, Spec, Target};
use crate::ethtool::{self, Field, Section, State};

/// ethtool's legacy names as ethtool means them (ethtool.c, `off_flag_def`):
/// the short name, the long one `ethtool -k` prints, and the pattern
/// (fnmatch(3)) over the kernel's feature names it covers. `ethtool -K`
/// requests every covered feature the device has and can change (available,
/// not `never_changed`: `do_sfeatures`), so `tso` is IPv4, IPv6, ECN,
/// mangleid and AccECN TSO alike.
pub const LEGACY: [(&str, &str, &str); 12] = [
    ("rx", "rx-checksumming", "rx-checksum"),
    ("tx", "tx-checksumming", "tx-checksum-*"),
    ("sg", "scatter-gather", "tx-scatter-gather*"),
    ("tso", "tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("ufo", "udp-fragmentation-offload", "tx-udp-fragmentation"),
    ("gso", "generic-segmentation-offload", "tx-generic-segmentation"),
    ("gro", "generic-receive-offload", "rx-gro"),
    ("lro", "large-receive-offload", "rx-lro"),
    ("rxvlan", "rx-vlan-offload", "rx-vlan-hw-parse"),
    ("txvlan", "tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple", "ntuple-filters", "rx-ntuple-filter"),
    ("rxhash", "receive-hashing", "rx-hashing"),
];

/// The legacy entry a short or long name is, as (short name, pattern).
pub fn legacy(name: &str) -> Option<(&'static str, &'static str)> {
    LEGACY
        .iter()
        .find(|(s, l, _)| *s == name || *l == name)
        .map(|(s, _, p)| (*s, *p))
}

/// Whether a legacy pattern covers the kernel feature `name`.
pub fn covers(pattern: &str, name: &str) -> bool {
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches(name))
}

/// The kernel's feature names: `netdev_features_strings` (net/ethtool/common.c,
/// Linux 6.18, as `ethtool -k`/`ETH_SS_FEATURES` lists them on this project's
/// VM), and five that older kernels still print (`tx-lockless`, `netns-local`,
/// `fcoe-mtu`, `busy-poll`, `tx-udp-fragmentation`). A name outside it is a typo
/// a driver would never match.
pub const KERNEL_FEATURES: [&str; 65] = [
    "busy-poll",
    "esp-hw-offload",
    "esp-tx-csum-hw-offload",
    "fcoe-mtu",
    "highdma",
    "hsr-dup-offload",
    "hsr-fwd-offload",
    "hsr-tag-ins-offload",
    "hsr-tag-rm-offload",
    "hw-tc-offload",
    "l2-fwd-offload",
    "loopback",
    "macsec-hw-offload",
    "netns-local",
    "rx-all",
    "rx-checksum",
    "rx-fcs",
    "rx-gro",
    "rx-gro-hw",
    "rx-gro-list",
    "rx-hashing",
    "rx-lro",
    "rx-ntuple-filter",
    "rx-udp-gro-forwarding",
    "rx-udp_tunnel-port-offload",
    "rx-vlan-filter",
    "rx-vlan-hw-parse",
    "rx-vlan-stag-filter",
    "rx-vlan-stag-hw-parse",
    "tls-hw-record",
    "tls-hw-rx-offload",
    "tls-hw-tx-offload",
    "tx-checksum-fcoe-crc",
    "tx-checksum-ip-generic",
    "tx-checksum-ipv4",
    "tx-checksum-ipv6",
    "tx-checksum-sctp",
    "tx-esp-segmentation",
    "tx-fcoe-segmentation",
    "tx-generic-segmentation",
    "tx-gre-csum-segmentation",
    "tx-gre-segmentation",
    "tx-gso-list",
    "tx-gso-partial",
    "tx-gso-robust",
    "tx-ipxip4-segmentation",
    "tx-ipxip6-segmentation",
    "tx-lockless",
    "tx-nocache-copy",
    "tx-scatter-gather",
    "tx-scatter-gather-fraglist",
    "tx-sctp-segmentation",
    "tx-tcp-accecn-segmentation",
    "tx-tcp-ecn-segmentation",
    "tx-tcp-mangleid-segmentation",
    "tx-tcp-segmentation",
    "tx-tcp6-segmentation",
    "tx-tunnel-remcsum-segmentation",
    "tx-udp-fragmentation",
    "tx-udp-segmentation",
    "tx-udp_tnl-csum-segmentation",
    "tx-udp_tnl-segmentation",
    "tx-vlan-hw-insert",
    "tx-vlan-stag-hw-insert",
    "vlan-challenged",
];

#[derive(Debug)]
pub struct NicFeature(EthtoolKnob);

/// The key a `set:` name is kept under: ethtool's short name for a legacy
/// one, the kernel's name otherwise.
fn feature_name(field: &str, name: &str) -> Result<String, FieldError> {
    if let Some((short, _)) = legacy(name) {
        return Ok(short.to_string());
    }
    let ok = !name.is_empty()
        && name.len() < 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if !ok || !KERNEL_FEATURES.contains(&name) {
        let known = KERNEL_FEATURES
            .iter()
            .chain(LEGACY.iter().flat_map(|(s, l, _)| [s, l]))
            .copied();
        return Err(FieldError::new(
            field,
            format!(
                "{name:?} is not a feature name the kernel has{} (ethtool -k lists them, as \
                 rx-gro; ethtool's legacy names such as gro, tso, sg, tx and rxvlan are taken too)",
                crate::spelling::did_you_mean(name, known)
            ),
        ));
    }
    Ok(name.to_string())
}

/// A kernel feature given by name and by a legacy name covering it: ethtool
/// would request it twice, maybe both ways.
fn overlap(values: &BTreeMap<String, String>) -> Option<String> {
    values.keys().find_map(|k| {
        values.keys().find_map(|other| {
            let (short, pattern) = legacy(other)?;
            (k != other && legacy(k).is_none() && covers(pattern, k))
                .then(|| format!("{k} is given twice: {short} covers it ({pattern})"))
        })
    })
}

impl Spec for NicFeature {
    type Target = NicTargetDoc;
    type Set = BTreeMap<String, serde_yaml::Value>;

    fn new(target: Option<NicTargetDoc>, set: Self::Set) -> Result<Self, FieldError> {
        if set.is_empty() {
            return Err(FieldError::new("set", "empty: give features such as gro: off"));
        }
        let mut values = BTreeMap::new();
        for (k, v) in set {
            let field = format!("set.{k}");
            let word = match v {
                serde_yaml::Value::String(s) if s == "on" || s == "off" => s,
                serde_yaml::Value::Bool(b) => if b { "on" } else { "off" }.to_string(),
                other => {
                    return Err(FieldError::new(
                        &field,
                        format!("{other:?} is not on or off"),
                    ));
                }
            };
            let name = feature_name(&field, &k)?;
            if values.insert(name.clone(), word).is_some() {
                return Err(FieldError::new(&field, format!("{name} is given twice")));
            }
        }
        if let Some(why) = overlap(&values) {
            return Err(FieldError::new("set", why));
        }
        Ok(NicFeature(EthtoolKnob {
            section: Section::Features,
            sel: NicSel::new(target)?,
            values,
        }))
    }
}

ethtool_kind!(NicFeature, NicFeature, |k: &EthtoolKnob, host| {
    k.survey_with(host, |ifname, state| {
        k.values
            .iter()
            .flat_map(|(name, want)| targets(ifname, state, name, want))
            .collect()
    })
});

/// The targets of one `set:` entry on `ifname`: the kernel feature named, or
/// every feature a legacy name covers that the device can change (those it
/// reports fixed are left as ethtool leaves them); when it can change none,
/// the fixed ones, refused as fixed.
pub fn targets(
    ifname: &str,
    state: &Result<Option<State>, String>,
    key: &str,
    want: &str,
) -> Vec<Target> {
    let field = |n: &str| Field::new(ifname, Section::Features, n);
    let Some((short, pattern)) = legacy(key) else {
        return vec![nic::target(&field(key), state, want)];
    };
    let Ok(Some(s)) = state else {
        return vec![nic::target(&field(key), state, want)];
    };
    let covered: Vec<(&String, &String)> = s
        .features
        .iter()
        .flatten()
        .filter(|(n, _)| covers(pattern, n))
        .collect();
    if covered.is_empty() {
        let why = format!(
            "{ifname} has no feature {short} covers ({pattern}) on {} (ethtool -k {ifname})",
            nic::driver_of(s, ifname)
        );
        return vec![Target {
            label: Some(format!("{ifname} {short}")),
            blocker: Some(Blocker::Unsupported(why)),
            ..Target::absent(field(key).path(), None, want, String::new())
        }];
    }
    let free: Vec<_> = covered
        .iter()
        .filter(|(_, w)| !ethtool::feature_fixed(w))
        .collect();
    let names: Vec<&String> = match free.is_empty() {
        true => covered.iter().map(|(n, _)| *n).collect(),
        false => free.iter().map(|(n, _)| *n).collect(),
    };
    names
        .into_iter()
        .map(|n| nic::target(&field(n), state, want))
        .collect()
}
