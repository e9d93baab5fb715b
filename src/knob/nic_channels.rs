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
        let values = numbers(Section::Channels, &CHANNEL_FIELDS, set)?;
        no_queue_left(&values)?;
        Ok(NicChannels(EthtoolKnob {
            section: Section::Channels,
            sel: NicSel::new(target)?,
            values,
        }))
    }
}

/// The kernel refuses counts that leave no receive or no transmit queue
/// (net/ethtool/channels.c, ethnl_set_channels: "requested channel count
/// is too low"): `combined: 0` needs rx and tx queues of their own.
fn no_queue_left(values: &BTreeMap<String, String>) -> Result<(), FieldError> {
    let given = |k: &str| values.get(k).map(String::as_str);
    if given("combined") != Some("0") {
        return Ok(());
    }
    for k in ["rx", "tx"] {
        if matches!(given(k), None | Some("0")) {
            return Err(FieldError::new(
                "set.combined",
                format!(
                    "0 combined channels without {k} channels of their own leave the NIC no {} \
                     queue, which the kernel refuses (net/ethtool/channels.c); give combined 1 \
                     or more, or rx and tx above 0",
                    if k == "rx" { "receive" } else { "transmit" }
                ),
            ));
        }
    }
    Ok(())
}

ethtool_kind!(NicChannels, NicChannels);
