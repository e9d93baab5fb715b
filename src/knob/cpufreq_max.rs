//! `cpufreq-max`: the ceiling half of [`super::cpufreq_limit`] (the `kinds!`
//! table takes one kind per module).

pub use super::cpufreq_limit::CpufreqMax;
