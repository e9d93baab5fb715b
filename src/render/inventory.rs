//! The inventory as tables for a person.

use super::{NOT_EXPOSED, cache_row, cores_text, cpus, facts, grid, kib, opt, smt_state};
use crate::cpulist::{Group, describe};
use crate::inventory::{Inventory, Section};

fn grouped<T: std::fmt::Display>(g: &[Group<T>]) -> String {
    if g.is_empty() {
        NOT_EXPOSED.into()
    } else {
        describe(g)
    }
}

fn khz(g: &[Group<u64>]) -> String {
    if g.is_empty() {
        return NOT_EXPOSED.into();
    }
    let mhz: Vec<Group<String>> = g
        .iter()
        .map(|x| Group {
            cpus: x.cpus.clone(),
            value: format!("{} MHz", x.value / 1000),
        })
        .collect();
    describe(&mhz)
}

fn list(v: &Option<Vec<String>>) -> String {
    v.as_ref()
        .map(|v| v.join(" "))
        .unwrap_or_else(|| NOT_EXPOSED.into())
}

type Want<'a> = &'a dyn Fn(Section) -> bool;

type SectionFn = fn(&Inventory, Want) -> String;

/// The sections asked for (all when `only` is empty) come in the usual
/// order, one function per section, in two parts: `finish(head + tail)`.
///
/// The head is the sections before the process table, so that they can be
/// rendered while the table is still being read.
pub fn render_head(inv: &Inventory, only: &[Section]) -> String {
    let want = |s: Section| s.wanted(only);
    let sections: [(bool, SectionFn); 9] = [
        (want(Section::Host), host),
        (want(Section::Cpu), cpu),
        (want(Section::Caches), caches),
        (want(Section::Frequency), frequency),
        (want(Section::Idle) || want(Section::PmQos), idle),
        (want(Section::Memory) || want(Section::Numa), memory),
        (want(Section::Vulnerabilities), vulnerabilities),
        (want(Section::Network), network),
        (want(Section::Platform), platform),
    ];
    render_sections(inv, &want, &sections)
}

/// The process table and what the host does not expose.
pub fn render_tail(inv: &Inventory, only: &[Section]) -> String {
    let want = |s: Section| s.wanted(only);
    let sections: [(bool, SectionFn); 2] = [
        (want(Section::Processes), processes),
        (only.is_empty(), not_exposed),
    ];
    render_sections(inv, &want, &sections)
}

/// The rendered sections as printed: one final newline.
pub fn finish(sections: String) -> String {
    sections.trim_end().to_string() + "\n"
}

fn render_sections(inv: &Inventory, want: Want, sections: &[(bool, SectionFn)]) -> String {
    sections
        .iter()
        .filter(|(wanted, _)| *wanted)
        .map(|(_, section)| section(inv, want))
        .collect()
}

fn host(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    let h = &inv.host;
    out += &facts(
        "Host",
        &[
            ("hostname".into(), opt(&h.hostname)),
            ("kernel".into(), opt(&h.kernel_release)),
            ("distribution".into(), opt(&h.distribution)),
            ("booted".into(), opt(&h.boot_time)),
            ("command line".into(), opt(&h.cmdline)),
        ],
    );
    out
}

fn cpu(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    let c = &inv.cpu;
    let siblings = match c.smt.sibling_lists.len() {
        0 => "none".to_string(),
        n if n <= 4 => c
            .smt
            .sibling_lists
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        n => format!(
            "{} {} ... {} ({n} cores)",
            c.smt.sibling_lists[0],
            c.smt.sibling_lists[1],
            c.smt.sibling_lists[n - 1]
        ),
    };
    let x86 = c.architecture.as_deref().is_none_or(|a| a == "x86");
    let mut cpu_rows = vec![
        ("model".into(), opt(&c.model_name)),
        ("vendor".into(), opt(&c.vendor_id)),
    ];
    if x86 {
        cpu_rows.push((
            "family/model/stepping".into(),
            format!("{}/{}/{}", opt(&c.family), opt(&c.model), opt(&c.stepping)),
        ));
    } else {
        cpu_rows.push(("architecture".into(), opt(&c.architecture)));
    }
    for (label, v) in [
        ("revision", &c.revision),
        ("machine", &c.machine),
        ("ISA", &c.isa),
        ("MMU", &c.mmu),
    ] {
        if v.is_some() {
            cpu_rows.push((label.into(), opt(v)));
        }
    }
    if let Some(types) = &c.core_types {
        cpu_rows.push((
            "core types".into(),
            types
                .iter()
                .map(|t| format!("{}: {}", t.model, t.cpus))
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    cpu_rows.push((
        "online".into(),
        format!("{} ({} CPUs)", c.online, c.online_count),
    ));
    // The architecture's own levels, outermost first (s390x drawers and books).
    for (label, v) in [("drawers", c.drawers), ("books", c.books)] {
        if v.is_some() {
            cpu_rows.push((label.into(), opt(&v)));
        }
    }
    cpu_rows.push(("packages".into(), opt(&c.packages)));
    if c.dies.is_some() || x86 {
        cpu_rows.push(("dies".into(), opt(&c.dies)));
    }
    // Clusters say something only where they differ from cores and packages.
    if c.clusters.is_some() && c.clusters != c.cores && c.clusters != c.packages {
        cpu_rows.push(("clusters".into(), opt(&c.clusters)));
    }
    cpu_rows.extend([
        ("cores".into(), cores_text(c)),
        ("threads per core".into(), opt(&c.threads_per_core)),
        ("SMT".into(), smt_state(c)),
        ("SMT siblings".into(), siblings),
        ("isolated".into(), cpus(&c.isolated)),
        ("nohz_full".into(), cpus(&c.nohz_full)),
        ("topology from".into(), c.topology.source.clone()),
    ]);
    if let Some(hy) = &c.hybrid {
        cpu_rows.push((
            "hybrid".into(),
            hy.iter()
                .map(|h| format!("{}: {}", h.kind, h.cpus))
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    if c.virtualized == Some(true) {
        cpu_rows.push(("virtualized".into(), "yes (hypervisor flag)".into()));
    }
    out += &facts("CPU", &cpu_rows);
    out
}

fn caches(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    out += &grid(
        "Caches",
        &[
            "level",
            "type",
            "size (each)",
            "instances",
            "shared by (first)",
        ],
        inv.caches.iter().map(cache_row).collect(),
    );
    out
}

fn frequency(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    match &inv.frequency {
        None => out += "Frequency\n  cpufreq not exposed (no cpufreq policies)\n\n",
        Some(f) => {
            out += &facts(
                "Frequency",
                &[
                    ("driver".into(), grouped(&f.drivers)),
                    ("governor".into(), grouped(&f.governors)),
                    ("energy preference".into(), grouped(&f.epp)),
                    ("available governors".into(), list(&f.available_governors)),
                    ("available EPP".into(), list(&f.available_epp)),
                    ("hardware min".into(), khz(&f.min_khz)),
                    ("hardware max".into(), khz(&f.max_khz)),
                    ("base".into(), khz(&f.base_khz)),
                    ("scaling min".into(), khz(&f.scaling_min_khz)),
                    ("scaling max".into(), khz(&f.scaling_max_khz)),
                    ("boost".into(), on_off(f.boost)),
                    ("intel_pstate".into(), opt(&f.intel_pstate_status)),
                    (
                        "intel_pstate perf".into(),
                        f.perf_pct_text().unwrap_or(NOT_EXPOSED.into()),
                    ),
                    ("hwp_dynamic_boost".into(), on_off(f.hwp_dynamic_boost)),
                    ("energy_perf_bias".into(), grouped(&f.energy_perf_bias)),
                ],
            )
        }
    }
    out
}

fn on_off(b: Option<bool>) -> String {
    b.map(|b| if b { "on" } else { "off" }.to_string())
        .unwrap_or(NOT_EXPOSED.into())
}

fn idle(inv: &Inventory, want: Want) -> String {
    let mut out = String::new();
    let i = &inv.idle;
    out += &facts(
        "Idle",
        &[
            ("driver".into(), opt(&i.driver)),
            ("governor".into(), opt(&i.governor)),
            ("available governors".into(), list(&i.available_governors)),
            (
                "PM QoS resume latency".into(),
                grouped(&i.pm_qos_resume_latency_us),
            ),
            (
                "PM QoS cpu_dma_latency".into(),
                inv.pm_qos
                    .cpu_dma_latency_us
                    .map(|v| {
                        if v >= 2_000_000_000 {
                            format!("{v} µs (no request)")
                        } else {
                            format!("{v} µs (held by a process)")
                        }
                    })
                    .unwrap_or_else(|| {
                        if inv
                            .not_exposed
                            .iter()
                            .any(|n| n.what == crate::inventory::PM_QOS_WHAT)
                        {
                            format!("not exposed (no {})", crate::inventory::PM_QOS_DEVICE)
                        } else {
                            "not readable (root only)".into()
                        }
                    }),
            ),
        ],
    );
    if !want(Section::Idle) {
        // `inventory pm_qos`: the states were not read, so none are shown.
        return out;
    }
    if i.states.is_empty() {
        out += "  no idle states exposed\n\n";
    } else {
        out += &grid(
            "Idle states",
            &[
                "state",
                "name",
                "description",
                "exit/target µs",
                "status",
                "entries",
                "time s",
            ],
            i.states
                .iter()
                .map(|s| {
                    let mut status = if s.disabled_cpus.is_empty() {
                        "enabled".to_string()
                    } else {
                        format!("disabled on {}", s.disabled_cpus)
                    };
                    if s.default_status.as_deref() == Some("disabled") {
                        status += " (default: disabled)";
                    }
                    vec![
                        s.index.to_string(),
                        s.name.clone(),
                        opt(&s.desc),
                        format!("{}/{}", opt(&s.latency_us), opt(&s.residency_us)),
                        status,
                        opt(&s.usage),
                        s.time_us
                            .map(|t| format!("{:.1}", t as f64 / 1e6))
                            .unwrap_or(NOT_EXPOSED.into()),
                    ]
                })
                .collect(),
        );
        out = out.trim_end().to_string() + "\nentries and time s: sums over all CPUs\n\n";
    }
    if let Some(t) = &i.state_tables {
        out += &facts(
            "Idle state tables differ",
            &t.iter()
                .map(|g| (g.cpus.to_string(), g.value.clone()))
                .collect::<Vec<_>>(),
        );
    }
    out
}

/// Sizes grouped by the choice in force, `inherit` marked:
/// `always: 64K; madvise: 2M (inherit); never: 16K 32K`.
fn thp_sizes(sizes: &[crate::inventory::ThpSize]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for s in sizes {
        let choice = s.effective.clone().unwrap_or_else(|| "?".into());
        let size = if s.size_kib >= 1024 && s.size_kib % 1024 == 0 {
            format!("{}M", s.size_kib / 1024)
        } else {
            format!("{}K", s.size_kib)
        };
        let size = if s.enabled == "inherit" {
            format!("{size} (inherit)")
        } else {
            size
        };
        match groups.iter_mut().find(|(c, _)| *c == choice) {
            Some((_, v)) => v.push(size),
            None => groups.push((choice, vec![size])),
        }
    }
    groups.sort();
    groups
        .into_iter()
        .map(|(c, v)| format!("{c}: {}", v.join(" ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn memory(inv: &Inventory, want: Want) -> String {
    let mut out = String::new();
    let m = &inv.memory;
    let mut mem_rows = vec![
        ("total".into(), kib(m.mem_total_kib)),
        ("available".into(), kib(m.mem_available_kib)),
        ("THP enabled".into(), opt(&m.thp_enabled)),
        ("THP defrag".into(), opt(&m.thp_defrag)),
    ];
    if let Some(sizes) = &m.thp_sizes {
        mem_rows.push(("THP per size".into(), thp_sizes(sizes)));
    }
    if let Some(hp) = &m.hugepages {
        for p in hp {
            mem_rows.push((
                format!("huge pages {}", kib(Some(p.size_kib))),
                format!("{} total, {} free", opt(&p.total), opt(&p.free)),
            ));
        }
    }
    if !want(Section::Memory) {
        mem_rows.clear();
    }
    for n in inv.numa.nodes.iter().filter(|_| want(Section::Numa)) {
        mem_rows.push((
            format!("NUMA node {}", n.id),
            format!("CPUs {}, {}", opt(&n.cpus), kib(n.mem_total_kib)),
        ));
    }
    out += &facts("Memory", &mem_rows);
    out
}

fn vulnerabilities(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    if !inv.vulnerabilities.is_empty() {
        out += &facts(
            "Vulnerabilities",
            &inv.vulnerabilities
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>(),
        );
    }
    out
}

fn network(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    let mut net_rows = Vec::new();
    for n in &inv.network {
        let irqs = if n.irqs.is_empty() {
            "-".to_string()
        } else {
            n.irqs
                .iter()
                .map(|q| {
                    format!(
                        "{} {} -> {}",
                        q.irq,
                        q.name,
                        q.effective_affinity
                            .as_ref()
                            .or(q.affinity.as_ref())
                            .map(|l| l.to_string())
                            .unwrap_or("?".into())
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        // A software device has no bound driver in sysfs; ethtool still names it (ifb, veth).
        let driver = n
            .driver
            .clone()
            .or_else(|| n.ethtool.as_ref().and_then(|e| e.driver.clone()));
        net_rows.push(vec![
            n.name.clone(),
            opt(&driver),
            opt(&n.device),
            opt(&n.mtu),
            opt(&n.operstate),
            irqs,
        ]);
    }
    out += &grid(
        "Network",
        &[
            "interface",
            "driver",
            "device",
            "mtu",
            "state",
            "IRQ name -> CPUs",
        ],
        net_rows,
    );
    out += &super::network::nic_settings(inv);
    out
}

fn processes(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    if let Some(p) = &inv.processes {
        let rows = |v: &Vec<crate::inventory::Process>| {
            v.iter()
                .map(|p| {
                    vec![
                        p.pid.to_string(),
                        p.comm.clone(),
                        format!("{:.1} s", p.cpu_time_s),
                        kib(Some(p.rss_kib)),
                    ]
                })
                .collect::<Vec<_>>()
        };
        out += &grid(
            &format!("Busiest of {} processes, by CPU time", p.count),
            &["pid", "command", "CPU time", "RSS"],
            rows(&p.by_cpu_time),
        );
        out += &grid(
            "By resident memory",
            &["pid", "command", "CPU time", "RSS"],
            rows(&p.by_rss),
        );
    }
    out
}

fn not_exposed(inv: &Inventory, _: Want) -> String {
    let mut out = String::new();
    if !inv.not_exposed.is_empty() {
        out += &facts(
            "Not exposed by this host",
            &inv.not_exposed
                .iter()
                .map(|n| (n.what.clone(), format!("looked for {}", n.path)))
                .collect::<Vec<_>>(),
        );
    }
    out
}

/// `not exposed: why`: what a register that could not be read shows.
fn unread(why: &str) -> String {
    format!("{NOT_EXPOSED}: {why}")
}

fn platform(inv: &Inventory, _: Want) -> String {
    let Some(p) = &inv.platform else {
        return String::new();
    };
    msrs(p) + &uncore(&p.uncore)
}

fn msrs(p: &crate::inventory::Platform) -> String {
    const TITLE: &str = "Platform power (MSRs)";
    if let Some(why) = &p.unavailable {
        return facts(TITLE, &[("MSRs".into(), unread(why))]);
    }
    let rows = p
        .facts
        .iter()
        .map(|f| {
            let place = if f.bits.is_empty() {
                f.register.clone()
            } else if f.bits.contains(':') || f.bits.contains(',') {
                format!("{} bits {}", f.register, f.bits)
            } else {
                format!("{} bit {}", f.register, f.bits)
            };
            let (values, commands) = match &f.unavailable {
                Some(why) => (unread(why), "-".to_string()),
                None => {
                    let one = f.groups.len() == 1;
                    let value = |g: &crate::inventory::FactGroup| {
                        let v = match (&g.value, &g.unavailable) {
                            (Some(v), _) => v.clone(),
                            (None, why) => unread(why.as_deref().unwrap_or("unread")),
                        };
                        if one { v } else { format!("{}: {v}", g.cpus) }
                    };
                    (
                        f.groups.iter().map(value).collect::<Vec<_>>().join("\n"),
                        f.groups
                            .iter()
                            .map(|g| g.command.clone())
                            .collect::<Vec<_>>()
                            .join("\n"),
                    )
                }
            };
            vec![f.label.clone(), place, values, commands]
        })
        .collect();
    let title = match &p.model {
        Some(m) => format!("{TITLE}, model {m}"),
        None => TITLE.to_string(),
    };
    grid(&title, &["fact", "register", "value", "read with"], rows)
}

/// `800 MHz`; a file not there is `not exposed`.
fn mhz(khz: Option<u64>) -> String {
    khz.map_or_else(|| NOT_EXPOSED.into(), |k| format!("{} MHz", k / 1000))
}

/// The uncore floor and ceiling of each die (TPMI: power domain).
fn uncore(u: &crate::inventory::Uncore) -> String {
    const TITLE: &str = "Uncore frequency per die (intel_uncore_frequency)";
    if let Some(why) = &u.unavailable {
        return facts(TITLE, &[("floor and ceiling".into(), unread(why))]);
    }
    let tpmi = u.layout.as_deref() == Some("tpmi");
    let rows = u
        .domains
        .iter()
        .map(|d| {
            let range = match (d.initial_min_khz, d.initial_max_khz) {
                (None, None) => NOT_EXPOSED.into(),
                (lo, hi) => format!("{}..{}", mhz(lo), mhz(hi)),
            };
            vec![
                d.package.to_string(),
                d.die.to_string(),
                mhz(d.min_khz),
                mhz(d.max_khz),
                range,
                mhz(d.current_khz),
                d.command.clone(),
            ]
        })
        .collect();
    let title = if tpmi {
        format!("{TITLE}, TPMI: per power domain")
    } else {
        TITLE.to_string()
    };
    let die = if tpmi { "domain" } else { "die" };
    grid(
        &title,
        &[
            "package",
            die,
            "floor",
            "ceiling",
            "hardware range",
            "current",
            "read with",
        ],
        rows,
    )
}
