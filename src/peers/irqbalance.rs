//! irqbalance: its environment file (where distributions keep it, its
//! assignments as systemd's `EnvironmentFile=` reads them) and the CPUs it
//! will leave alone on this host.

use crate::cpulist::CpuList;
use crate::root::Root;

/// Where distributions keep irqbalance's environment, in the order looked for.
pub const FILES: [&str; 2] = ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"];
pub const VAR: &str = "IRQBALANCE_BANNED_CPULIST";

/// What irqbalance is told to leave alone, for the irq-affinity knobs.
pub struct Ban {
    pub banned: CpuList,
    /// Where the ban comes from (file:line, or the kernel's masks).
    pub source: String,
    pub online: CpuList,
}

/// The file's active assignment: its line index and value (quotes removed).
pub fn assignment(text: &str) -> Option<(usize, String)> {
    assignment_of(text, VAR)
}

/// The last assignment of `var` (line index, unquoted value).
pub fn assignment_of(text: &str, var: &str) -> Option<(usize, String)> {
    // No vector of lines: a file of many short lines would cost 16 bytes each.
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let rest = l
                .trim_start()
                .strip_prefix("export ")
                .unwrap_or(l.trim_start());
            let v = rest.strip_prefix(var)?.strip_prefix('=')?;
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            Some((i, v.to_string()))
        })
        .last()
}

/// The first line (1-based) that ends in an unescaped backslash: systemd's
/// `EnvironmentFile=` joins it with the next (systemd.exec(5), "Lines ending
/// in a backslash are concatenated"; comments too, src/basic/env-file.c), so
/// rewriting one line could cut a continued value.
pub fn continued_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            (l.len() - l.trim_end_matches('\\').len()) % 2 == 1
        })
        .map(|i| i + 1)
}

/// The banned CPUs a file configures, in CPU-list words (`unset` when none).
pub fn banned(text: &str) -> String {
    match assignment(text) {
        None => "unset".into(),
        Some((_, v)) => CpuList::parse(&v).map(|l| l.to_string()).unwrap_or(v),
    }
}

/// irqbalance's banned CPUs as it decides them (irqbalance 1.9 cputree.c
/// `setup_banned_cpus`): a non-empty `IRQBALANCE_BANNED_CPUS` mask first,
/// else `IRQBALANCE_BANNED_CPULIST` when set (even empty), else the
/// kernel's isolated and nohz_full CPUs, which it then bans itself.
pub fn ban(root: &Root, online: &CpuList) -> Ban {
    const MASK: &str = "IRQBALANCE_BANNED_CPUS";
    let found = |banned: CpuList, source: String| Ban {
        banned,
        source,
        online: online.clone(),
    };
    let mut unset = format!("neither {} exists", FILES.join(" nor "));
    if let Some((f, text)) = FILES
        .iter()
        .find_map(|f| root.read_string(f).ok().map(|t| (f, t)))
    {
        if let Some((line, v)) = assignment_of(&text, MASK).filter(|(_, v)| !v.is_empty()) {
            return found(
                CpuList::parse_mask(&v).unwrap_or_default(),
                format!(
                    "{MASK}={v:?} at {f}:{}, a mask irqbalance reads before {VAR}",
                    line + 1
                ),
            );
        }
        if let Some((line, v)) = assignment(&text) {
            return found(
                CpuList::parse(&v).unwrap_or_default(),
                format!("{VAR}={v:?} at {f}:{}", line + 1),
            );
        }
        unset = format!("{f} sets neither {MASK} nor {VAR}");
    }
    let list = |p: &str| {
        root.read_string(p)
            .ok()
            .and_then(|t| CpuList::parse(t.trim()).ok())
            .unwrap_or_default()
    };
    let (iso, nohz) = (
        list("/sys/devices/system/cpu/isolated"),
        list("/sys/devices/system/cpu/nohz_full"),
    );
    let banned: CpuList = iso
        .as_slice()
        .iter()
        .chain(nohz.as_slice())
        .copied()
        .collect::<std::collections::BTreeSet<u32>>()
        .into_iter()
        .collect();
    found(
        banned,
        format!(
            "{unset}, so irqbalance bans the kernel's isolated CPUs ({iso}) and nohz_full CPUs ({nohz}) itself"
        ),
    )
}
