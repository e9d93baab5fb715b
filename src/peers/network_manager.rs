//! NetworkManager: the keyfile of a connection naming an interface, and
//! the `ethtool.*` property names it accepts.
//!
//! NetworkManager applies a connection's `ethtool.*` properties when the
//! connection activates, after udev's `.link` file. Its names are those of
//! libnm-base/nm-ethtool-base.c (`nm_ethtool_data`, the `NM_ETHTOOL_OPTNAME_*`
//! of nm-ethtool-utils-base.h), and the kernel features each sets are
//! libnm-platform/nmp-ethtool-ioctl.c `_ethtool_feature_infos` (1.54 on;
//! nm-platform-utils.c before): most set one
//! feature, but `feature-sg`, `feature-tso` and `feature-tx` set several, so
//! a knob on one feature never gets those.

use crate::root::Root;

pub const KEYFILE_DIR: &str = "/etc/NetworkManager/system-connections";

/// NetworkManager's features with the kernel features each sets
/// (`_ethtool_feature_infos`); a property not listed sets the kernel
/// feature of its own name (`feature-rx-gro-hw` sets `rx-gro-hw`).
const FEATURES: &[(&str, &[&str])] = &[
    ("feature-gro", &["rx-gro"]),
    ("feature-gso", &["tx-generic-segmentation"]),
    ("feature-lro", &["rx-lro"]),
    ("feature-ntuple", &["rx-ntuple-filter"]),
    ("feature-rx", &["rx-checksum"]),
    ("feature-rxhash", &["rx-hashing"]),
    ("feature-rxvlan", &["rx-vlan-hw-parse"]),
    ("feature-txvlan", &["tx-vlan-hw-insert"]),
    (
        "feature-sg",
        &["tx-scatter-gather", "tx-scatter-gather-fraglist"],
    ),
    (
        "feature-tso",
        &[
            "tx-tcp-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation",
        ],
    ),
    (
        "feature-tx",
        &[
            "tx-checksum-fcoe-crc",
            "tx-checksum-ip-generic",
            "tx-checksum-ipv4",
            "tx-checksum-ipv6",
            "tx-checksum-sctp",
        ],
    ),
];

/// Kernel features NetworkManager has a property of their own name for
/// (`feature-` and the kernel's name).
const SAME_NAME: &str = "esp-hw-offload esp-tx-csum-hw-offload fcoe-mtu highdma hw-tc-offload l2-fwd-offload \
     loopback macsec-hw-offload rx-all rx-fcs rx-gro-hw rx-gro-list rx-udp-gro-forwarding \
     rx-udp_tunnel-port-offload rx-vlan-filter rx-vlan-stag-filter rx-vlan-stag-hw-parse \
     tls-hw-record tls-hw-rx-offload tls-hw-tx-offload tx-checksum-fcoe-crc \
     tx-checksum-ip-generic tx-checksum-ipv4 tx-checksum-ipv6 tx-checksum-sctp \
     tx-esp-segmentation tx-fcoe-segmentation tx-gre-csum-segmentation \
     tx-gre-segmentation tx-gso-list tx-gso-partial tx-gso-robust tx-ipxip4-segmentation \
     tx-ipxip6-segmentation tx-nocache-copy tx-scatter-gather tx-scatter-gather-fraglist \
     tx-sctp-segmentation tx-tcp-ecn-segmentation tx-tcp-mangleid-segmentation \
     tx-tcp-segmentation tx-tcp6-segmentation tx-tunnel-remcsum-segmentation \
     tx-udp-segmentation tx-udp_tnl-csum-segmentation tx-udp_tnl-segmentation \
     tx-vlan-stag-hw-insert";

/// The property that sets kernel feature `feature` and nothing else, or why
/// there is none.
pub fn feature_property(feature: &str) -> Result<String, String> {
    if let Some((prop, _)) = FEATURES.iter().find(|(_, f)| *f == [feature]) {
        return Ok(prop.to_string());
    }
    if SAME_NAME.split_whitespace().any(|n| n == feature) {
        return Ok(format!("feature-{feature}"));
    }
    let wider: Vec<&str> = FEATURES
        .iter()
        .filter(|(_, f)| f.contains(&feature))
        .map(|(p, _)| *p)
        .collect();
    Err(match wider.as_slice() {
        [] => format!("NetworkManager has no ethtool property for the feature {feature}"),
        w => format!(
            "NetworkManager sets {feature} only with {}, which sets other features too",
            w.join(", ")
        ),
    })
}

/// `ethtool -c` names NetworkManager has as `coalesce-*` (frames spelled
/// `frames`), `ethtool -g` as `ring-*`, `ethtool -l` as `channels-*`.
const COALESCE: &[&str] = &[
    "adaptive-rx",
    "adaptive-tx",
    "pkt-rate-high",
    "pkt-rate-low",
    "rx-frames",
    "rx-frames-high",
    "rx-frames-irq",
    "rx-frames-low",
    "rx-usecs",
    "rx-usecs-high",
    "rx-usecs-irq",
    "rx-usecs-low",
    "sample-interval",
    "stats-block-usecs",
    "tx-frames",
    "tx-frames-high",
    "tx-frames-irq",
    "tx-frames-low",
    "tx-usecs",
    "tx-usecs-high",
    "tx-usecs-irq",
    "tx-usecs-low",
];
const RINGS: &[&str] = &["rx", "rx-jumbo", "rx-mini", "tx"];
const CHANNELS: &[&str] = &["rx", "tx", "other", "combined"];

/// The property of a value of an ethtool section (`coalesce`, `rings`,
/// `channels`, `features`), or why NetworkManager has none.
pub fn property(section: &str, name: &str) -> Result<String, String> {
    let (prefix, names, n) = match section {
        "features" => return feature_property(name),
        "coalesce" => ("coalesce", COALESCE, name.replace("frame-", "frames-")),
        "rings" => ("ring", RINGS, name.to_string()),
        "channels" => ("channels", CHANNELS, name.to_string()),
        _ => {
            return Err(format!(
                "NetworkManager has no ethtool property for {section}"
            ));
        }
    };
    if names.contains(&n.as_str()) {
        Ok(format!("{prefix}-{n}"))
    } else {
        Err(format!(
            "NetworkManager has no ethtool property for {section} {name}"
        ))
    }
}

/// The first NetworkManager release that takes `prop`, where later than
/// 1.14 (the ethtool setting's first): ring and coalesce 1.26 (7109ac667a,
/// b0240db068), six features 1.30 (f72278eff7), channels 1.46 (80dd179ffd);
/// an older nmcli refuses the command.
pub fn since(prop: &str) -> Option<&'static str> {
    const NEWER_FEATURES: &[&str] = &[
        "feature-macsec-hw-offload",
        "feature-rx-gro-list",
        "feature-rx-udp-gro-forwarding",
        "feature-tls-hw-rx-offload",
        "feature-tx-gso-list",
        "feature-tx-tunnel-remcsum-segmentation",
    ];
    match prop {
        p if p.starts_with("channels-") => Some("1.46"),
        p if NEWER_FEATURES.contains(&p) => Some("1.30"),
        p if p.starts_with("ring-") || p.starts_with("coalesce-") => Some("1.26"),
        _ => None,
    }
}

/// A connection keyfile naming an interface.
pub struct Keyfile {
    pub path: String,
    /// Its `id=` (the file name without `.nmconnection` when it has none).
    pub id: String,
    pub text: String,
}

/// The first keyfile (by file name) whose `interface-name=` is `ifname` or
/// whose `mac-address=` is one of `macs` (a connection bound to the device).
pub fn connection(root: &Root, ifname: &str, macs: &[&str]) -> Option<Keyfile> {
    let names = root.read_dir(KEYFILE_DIR).unwrap_or_default();
    names.into_iter().find_map(|name| {
        let path = format!("{KEYFILE_DIR}/{name}");
        let text = root.read_string(&path).ok()?;
        let ours = text.lines().map(str::trim).any(|l| {
            l == format!("interface-name={ifname}")
                || l.strip_prefix("mac-address=")
                    .is_some_and(|m| macs.iter().any(|mac| m.eq_ignore_ascii_case(mac)))
        });
        let id = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("id="))
            .unwrap_or(name.trim_end_matches(".nmconnection"))
            .to_string();
        ours.then_some(Keyfile { path, id, text })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_feature_one_property_from_networkmanagers_table() {
        assert_eq!(
            feature_property("tx-tcp-segmentation").unwrap(),
            "feature-tx-tcp-segmentation"
        );
        assert_eq!(
            feature_property("rx-vlan-hw-parse").unwrap(),
            "feature-rxvlan"
        );
        assert_eq!(feature_property("rx-gro").unwrap(), "feature-gro");
        assert_eq!(since("channels-combined"), Some("1.46"));
        assert_eq!(since("feature-rx-gro-list"), Some("1.30"));
        assert_eq!(since("coalesce-rx-usecs"), Some("1.26"));
        assert_eq!(since("feature-gro"), None);
        assert_eq!(feature_property("rx-checksum").unwrap(), "feature-rx");
        let none = feature_property("tx-lockless").unwrap_err();
        assert!(none.contains("no ethtool property"), "{none}");
        assert_eq!(
            property("coalesce", "rx-frame-high").unwrap(),
            "coalesce-rx-frames-high"
        );
        assert!(property("coalesce", "rx-frames-irq").is_ok());
        assert!(property("rings", "rx-jumbo").is_ok());
        assert_eq!(
            property("channels", "combined").unwrap(),
            "channels-combined"
        );
    }
}
