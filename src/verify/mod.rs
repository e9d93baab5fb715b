//! `hostknob verify KNOB`: an A/B of one knob with its declared probe, in
//! shuffled rounds, with the host left as found on every path.

pub mod verdict;
