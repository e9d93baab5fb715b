//! What a udev rule needs to set a knob (`persistence: udev-rule`): the
//! match keys that choose its devices as udev sees them at an `add` or
//! `change` event, and the `ATTR{...}="..."` assignments, which udev
//! writes in the order of the line (udev(7), ATTR; src/udev/udev-rules.c
//! applies each token as it reaches it), so a scheduler is set before the
//! `nr_requests` it resets.

/// One knob's rule: lines sharing the match keys.
#[derive(Clone, Debug, PartialEq)]
pub struct UdevRule {
    /// `SUBSYSTEM=="block"`, `KERNEL=="sd*"`, ... in the order written.
    pub keys: Vec<String>,
    pub lines: Vec<RuleLine>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RuleLine {
    /// A key of this line only (`TEST=="mq"`: blk-mq queues only).
    pub only: Option<String>,
    /// (attribute relative to the device, value).
    pub assign: Vec<(String, String)>,
}

impl UdevRule {
    /// The rule's lines as written to the file.
    pub fn text(&self) -> Vec<String> {
        self.lines
            .iter()
            .map(|l| {
                let mut parts = self.keys.clone();
                parts.extend(l.only.clone());
                parts.extend(l.assign.iter().map(|(a, v)| format!("ATTR{{{a}}}=\"{v}\"")));
                parts.join(", ")
            })
            .collect()
    }
}
