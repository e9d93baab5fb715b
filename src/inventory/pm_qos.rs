//! PM QoS as the kernel exposes it: the one place its files are named and
//! parsed. The global CPU latency request (`/dev/cpu_dma_latency`) is read by
//! inventory, the `pm-qos` knob, `hold` and the probes' `--pmqos-us`; the
//! per-CPU resume latency by inventory, the `pm-qos-resume-latency` knob and
//! verify's not-honoured check.

use super::CPU_DIR;
use crate::root::Root;

/// The global PM QoS CPU latency request.
pub const PM_QOS_DEVICE: &str = "/dev/cpu_dma_latency";

/// The aggregate request: 4 bytes, native-endian s32 (some kernels print hex text).
pub fn parse_pm_qos_request(bytes: &[u8]) -> Option<i64> {
    match bytes.len() {
        4 => Some(i32::from_ne_bytes(bytes[..4].try_into().ok()?) as i64),
        _ => {
            let text = String::from_utf8_lossy(bytes);
            i64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
        }
    }
}

/// The limit in force (the minimum of all requests), µs. Opening the device
/// adds a request at the default value (no constraint), so reading it does
/// not change the aggregate; the file is closed at once.
pub fn read_cpu_dma_latency(root: &Root) -> Option<i64> {
    parse_pm_qos_request(&root.read_device(PM_QOS_DEVICE, 64).ok()?)
}

/// One CPU's resume-latency limit: `0` means no constraint, `n/a` that the
/// CPU may enter no idle state but polling.
pub fn resume_latency_path(cpu: u32) -> String {
    format!("{CPU_DIR}/cpu{cpu}/power/pm_qos_resume_latency_us")
}

/// The limit a resume-latency file's text sets, µs: `Some(0)` for `n/a`
/// (polling only), `None` for no limit (`0`) or text that is not a number.
pub fn resume_limit_us(text: &str) -> Option<u64> {
    match text.trim() {
        "n/a" => Some(0),
        "0" => None,
        n => n.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_limits_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_pm_qos_request(&7i32.to_ne_bytes()), Some(7));
        assert_eq!(parse_pm_qos_request(b"0x77359400\n"), Some(2_000_000_000));
        assert_eq!(parse_pm_qos_request(b"zz"), None);
        assert_eq!(resume_limit_us("n/a\n"), Some(0));
        assert_eq!(resume_limit_us("0"), None);
        assert_eq!(resume_limit_us("20"), Some(20));
    }
}
