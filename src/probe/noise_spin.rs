//! What `probe noise`'s measuring threads hand over: below both the probe
//! (`noise`) and its attribution (`noise_attrib`), so neither imports the other.

/// What one measuring thread saw.
pub struct Spin {
    pub cpu: u32,
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub loops: u64,
    pub gaps: Vec<(u64, u64)>,
}

impl Spin {
    /// The sum of its gaps, ns.
    pub fn lost_ns(&self) -> u64 {
        self.gaps.iter().map(|g| g.1).sum()
    }
}

/// `part / whole` to three places; 0 for nothing.
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        round3(part as f64 / whole as f64)
    }
}

pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
