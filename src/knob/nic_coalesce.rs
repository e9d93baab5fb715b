//! `nic-coalesce`: interrupt coalescing (`ethtool -C`), any field of
//! `struct ethtool_coalesce` by ethtool's name (`rx-usecs`, `tx-frames`,
//! `adaptive-rx: off`, ...).

use std::collections::BTreeMap;

use super::nic::{EthtoolKnob, NicSel, NicTargetDoc, ethtool_kind, numbers};
use super::{FieldError, Spec};
use crate::ethtool::{COALESCE_FIELDS, Section};

#[derive(Debug)]
pub struct NicCoalesce(EthtoolKnob);

impl Spec for NicCoalesce {
    type Target = NicTargetDoc;
    type Set = BTreeMap<String, serde_yaml::Value>;

    fn new(target: Option<NicTargetDoc>, set: Self::Set) -> Result<Self, FieldError> {
        Ok(NicCoalesce(EthtoolKnob {
            section: Section::Coalesce,
            sel: NicSel::new(target)?,
            values: numbers(Section::Coalesce, &COALESCE_FIELDS, set)?,
        }))
    }
}

ethtool_kind!(NicCoalesce, NicCoalesce);
