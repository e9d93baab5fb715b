//! `nic-channels`: a NIC's queue counts (`ethtool -L`: combined, rx, tx,
//! other), every count of a knob in one request per interface
//! (`crate::ethtool::channels`). Refused at plan time above the driver's
//! reported maximum and where no rx or no tx channel would be left. More
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
        let values = numbers(Section::Channels, &CHANNEL_FIELDS, set)?;
        no_queue_left(&values)?;
        Ok(NicChannels(EthtoolKnob {
            section: Section::Channels,
            sel: NicSel::new(target)?,
            values,
        }))
    }
}

/// Counts the knob alone leaves without a receive or a transmit channel
/// (`combined: 0` with `rx: 0` or `tx: 0`): refused whatever the host has
/// (net/ethtool/ioctl.c ethtool_set_channels, net/ethtool/channels.c
/// ethnl_set_channels). Counts that need today's values of the fields
/// the knob leaves alone are judged at plan time, per interface.
fn no_queue_left(values: &BTreeMap<String, String>) -> Result<(), FieldError> {
    let given = |k: &str| values.get(k).map(String::as_str);
    if given("combined") != Some("0") {
        return Ok(());
    }
    for k in ["rx", "tx"] {
        if given(k) == Some("0") {
            return Err(FieldError::new(
                &format!("set.{k}"),
                format!(
                    "combined 0 and {k} 0 leave the NIC no {} channel, which the kernel refuses \
                     (net/ethtool/ioctl.c ethtool_set_channels); give combined 1 or more, or \
                     {k} above 0",
                    if k == "rx" { "receive" } else { "transmit" }
                ),
            ));
        }
    }
    Ok(())
}

ethtool_kind!(NicChannels, NicChannels);
