//! What the kernel keeps of an RPS mask on a host with isolated CPUs.
//!
//! net/core/net-sysfs.c `store_rps_map` ANDs the mask it is given with the
//! housekeeping CPUs of `HK_TYPE_DOMAIN` and `HK_TYPE_WQ` (today in
//! `rps_cpumask_housekeeping`) and refuses a non-empty mask that leaves
//! nothing (`EINVAL`); an empty mask turns RPS off. `HK_TYPE_DOMAIN` loses
//! the CPUs of `isolcpus=` with the `domain` flag or no flag, `HK_TYPE_WQ`
//! those of `nohz_full=` (kernel/sched/isolation.c,
//! `housekeeping_nohz_full_setup`, `housekeeping_isolcpus_setup`).

use crate::cpulist::CpuList;

/// The first release whose `store_rps_map` drops isolated CPUs: commit
/// 07bbecb34106 "net: Restrict receive packets queuing to housekeeping
/// CPUs", merged for Linux 5.9.
pub const SINCE: [u64; 2] = [5, 9];

/// Since Linux 6.14 `isolcpus=nohz` is `nohz_full=` (commit 1174b9344bc7
/// "sched/isolation: Make "isolcpus=nohz" equivalent to "nohz_full""): its
/// CPUs leave `HK_TYPE_KERNEL_NOISE`, which `HK_TYPE_WQ` is.
pub const ISOLCPUS_NOHZ_SINCE: [u64; 2] = [6, 14];

/// Where the rule comes from, for messages and docs.
pub const SOURCE: &str = "net/core/net-sysfs.c store_rps_map, rps_cpumask_housekeeping: \
                          HK_TYPE_DOMAIN and HK_TYPE_WQ, Linux 5.9 and later";

/// The CPUs `store_rps_map` drops on a kernel of `release` booted with
/// `cmdline`, and the words that say why; `None` when it drops none.
pub fn dropped(release: &[u64], cmdline: &str) -> Option<(CpuList, String)> {
    let known = !release.is_empty();
    if known && release < &SINCE[..] {
        return None;
    }
    let mut nohz_full: Option<CpuList> = None;
    let mut isolcpus: Option<(Vec<&str>, CpuList)> = None;
    for word in cmdline.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        // The first mask of each counts (housekeeping_setup).
        match key {
            "nohz_full" if nohz_full.is_none() => nohz_full = CpuList::parse(value).ok(),
            "isolcpus" if isolcpus.is_none() => isolcpus = isolcpus_value(value),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut why = Vec::new();
    if let Some(l) = nohz_full.filter(|l| !l.is_empty()) {
        why.push(format!("nohz_full={l}"));
        out.extend_from_slice(l.as_slice());
    }
    if let Some((flags, l)) = isolcpus.filter(|(_, l)| !l.is_empty()) {
        let nohz_is_full = !known || release >= &ISOLCPUS_NOHZ_SINCE[..];
        let domain = flags.is_empty() || flags.contains(&"domain");
        if domain || (nohz_is_full && flags.contains(&"nohz")) {
            let flags = flags.iter().map(|f| format!("{f},")).collect::<String>();
            why.push(format!("isolcpus={flags}{l}"));
            out.extend_from_slice(l.as_slice());
        }
    }
    let cpus = CpuList::new(out);
    if cpus.is_empty() {
        return None;
    }
    let kernel = match known {
        true => "",
        false => " (kernel release unknown: taken as 5.9 or later)",
    };
    Some((
        cpus,
        format!("{} on the running command line{kernel}", why.join(" and ")),
    ))
}

/// `isolcpus=`'s flags and CPUs; unknown flags are skipped as the kernel
/// skips them (`housekeeping_isolcpus_setup`).
fn isolcpus_value(value: &str) -> Option<(Vec<&str>, CpuList)> {
    let mut flags = Vec::new();
    let mut rest = value;
    while rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        let (head, tail) = rest.split_once(',')?;
        flags.push(head);
        rest = tail;
    }
    flags.retain(|f| ["nohz", "domain", "managed_irq"].contains(f));
    CpuList::parse(rest).ok().map(|l| (flags, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(release: &[u64], cmdline: &str) -> Option<String> {
        dropped(release, cmdline).map(|(l, _)| l.to_string())
    }

    #[test]
    fn nohz_full_and_domain_isolation_drop_cpus_managed_irq_does_not() {
        let r = [6, 18, 8];
        assert_eq!(cpus(&r, "ro nohz_full=2-5"), Some("2-5".into()));
        assert_eq!(cpus(&r, "isolcpus=4-7"), Some("4-7".into()));
        assert_eq!(
            cpus(&r, "isolcpus=domain,managed_irq,4-7"),
            Some("4-7".into())
        );
        assert_eq!(cpus(&r, "isolcpus=managed_irq,4-7"), None);
        assert_eq!(
            cpus(&r, "isolcpus=managed_irq,4-7 nohz_full=4-5"),
            Some("4-5".into())
        );
        // isolcpus=nohz is nohz_full since 6.14, only the tick before.
        assert_eq!(cpus(&r, "isolcpus=nohz,4-7"), Some("4-7".into()));
        assert_eq!(cpus(&[6, 8, 0], "isolcpus=nohz,4-7"), None);
        // The first nohz_full= counts.
        assert_eq!(cpus(&r, "nohz_full=2-3 nohz_full=2-7"), Some("2-3".into()));
        // Before 5.9 store_rps_map kept every CPU.
        assert_eq!(cpus(&[5, 4, 0], "nohz_full=2-5"), None);
        assert_eq!(cpus(&r, "quiet"), None);
        let (_, why) = dropped(&r, "nohz_full=2-5 isolcpus=domain,2-3").unwrap();
        assert_eq!(
            why,
            "nohz_full=2-5 and isolcpus=domain,2-3 on the running command line"
        );
    }
}
