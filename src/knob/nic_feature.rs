//! `nic-feature`: offloads on or off (`ethtool -K`), by the kernel's
//! feature names (`rx-gro`, `rx-gro-hw`, `rx-lro`, ...) or ethtool's
//! short ones (`gro`, `lro`, `gso`, `tso`). A feature the driver reports as
//! fixed is refused at plan time (the kernel keeps it: net/ethtool/features.c).

use std::collections::BTreeMap;

use super::nic::{EthtoolKnob, NicSel, NicTargetDoc, ethtool_kind};
use super::{FieldError, Spec};
use crate::ethtool::Section;

/// ethtool's legacy names for single features (ethtool.c, `off_flag_def`).
/// `tso` is IPv4 TSO only: IPv6 is `tx-tcp6-segmentation`.
pub const ALIASES: [(&str, &str); 8] = [
    ("gro", "rx-gro"),
    ("generic-receive-offload", "rx-gro"),
    ("lro", "rx-lro"),
    ("large-receive-offload", "rx-lro"),
    ("gso", "tx-generic-segmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("tso", "tx-tcp-segmentation"),
    ("tcp-segmentation-offload", "tx-tcp-segmentation"),
];

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

fn feature_name(field: &str, name: &str) -> Result<String, FieldError> {
    let name = ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map(|(_, k)| *k)
        .unwrap_or(name);
    let ok = !name.is_empty()
        && name.len() < 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if !ok || !KERNEL_FEATURES.contains(&name) {
        let known = KERNEL_FEATURES
            .iter()
            .chain(ALIASES.iter().map(|(a, _)| a))
            .copied();
        return Err(FieldError::new(
            field,
            format!(
                "{name:?} is not a feature name the kernel has{} (ethtool -k lists them, as \
                 rx-gro; ethtool's short names gro, lro, gso and tso are taken too)",
                crate::spelling::did_you_mean(name, known)
            ),
        ));
    }
    Ok(name.to_string())
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
        Ok(NicFeature(EthtoolKnob {
            section: Section::Features,
            sel: NicSel::new(target)?,
            values,
        }))
    }
}

ethtool_kind!(NicFeature, NicFeature);
