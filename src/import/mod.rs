//! `hostknob import`: other tools' tuning as manifest knobs to review.

pub mod tuned;
