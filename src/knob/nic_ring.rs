//! `nic-ring`: a NIC's ring sizes (`ethtool -G`: rx, tx, rx-mini,
//! rx-jumbo), refused at plan time above the driver's reported maximum.

use std::collections::BTreeMap;

use super::nic::{EthtoolKnob, NicSel, NicTargetDoc, ethtool_kind, numbers};
use super::{FieldError, Spec};
use crate::ethtool::{RING_FIELDS, Section};

#[derive(Debug)]
pub struct NicRing(EthtoolKnob);

impl Spec for NicRing {
    type Target = NicTargetDoc;
    type Set = BTreeMap<String, serde_yaml::Value>;

    fn new(target: Option<NicTargetDoc>, set: Self::Set) -> Result<Self, FieldError> {
        let values = numbers(Section::Rings, &RING_FIELDS, set)?;
        // Drivers refuse an empty ring (EINVAL); it would stop the traffic.
        if let Some((k, _)) = values.iter().find(|(_, v)| v.as_str() == "0") {
            return Err(FieldError::new(
                &format!("set.{k}"),
                "a ring of 0 descriptors carries no packets; give the size (ethtool -g shows the maximum)",
            ));
        }
        Ok(NicRing(EthtoolKnob {
            section: Section::Rings,
            sel: NicSel::new(target)?,
            values,
        }))
    }
}

ethtool_kind!(NicRing, NicRing);
