//! `nic-channels`: a NIC's queue counts (`ethtool -L`: combined, rx, tx,
//! other). Refused at plan time above the driver's reported maximum. More
//! queues mean more IRQs and more `queues/rx-N` files: its writes go
//! before every per-queue kind and irq-affinity (`rules::phase`).

use std::collections::BTreeMap;

use super::nic::{EthtoolKnob, NicSel, NicTargetDoc, ethtool_kind, numbers};
use super::{FieldError, Spec};
use crate::ethtool::{CHANNEL_FIELDS, Section};

#[derive(Debug)]
pub struct NicChannels(EthtoolKnob);

impl Spec for NicChannels {
    type Target = NicTargetDoc;
    type Set = BTreeMap<String, serde_yaml::Value>;

    fn new(target: Option<NicTargetDoc>, set: Self::Set) -> Result<Self, FieldError> {
        Ok(NicChannels(EthtoolKnob {
            section: Section::Channels,
            sel: NicSel::new(target)?,
            values: numbers(Section::Channels, &CHANNEL_FIELDS, set)?,
        }))
    }
}

ethtool_kind!(NicChannels, NicChannels);
