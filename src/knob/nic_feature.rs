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
    if !ok {
        return Err(FieldError::new(
            field,
            format!("{name:?} is not a feature name (like rx-gro or gro: ethtool -k lists them)"),
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
