//! Issue 32 items 1-6 and 13: the MSR and frequency kinds against the
//! kernel's and pepc's rules, on copies of corpus hosts with their MSR dumps
//! materialized (`support::msr`). Scopes and bits are decoded here from the
//! trees' own files and pepc's dumps, independently of hostknob.

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::msr_knobs::{logged, logged_cpus, msr_copy, read_regs, refused, set_bits};
use crate::support::*;

const PKG_CST: u32 = 0xe2;
const POWER_CTL: u32 = 0x1fc;
const MISC_FEATURE: u32 = 0x1a4;
const HWP_REQ: u32 = 0x774;

/// Every cpufreq policy of the tree driven by `driver` instead of the capture's.
pub(crate) fn set_driver(root: &Path, driver: &str) {
    let dir = root.join("sys/devices/system/cpu/cpufreq");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("policy")
        {
            std::fs::write(p.join("scaling_driver"), format!("{driver}\n")).unwrap();
        }
    }
}

/// The journal entries of knob `id`: (path, CPU list) per scope domain.
fn journal_domains(root: &Path, id: &str) -> Vec<(String, String)> {
    journal(root)
        .iter()
        .filter(|e| e["knob"] == id)
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["cpus"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The online CPUs of a tree, from its own `online` file.
fn online(root: &Path) -> String {
    std::fs::read_to_string(root.join("sys/devices/system/cpu/online"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn c1_demotion_is_one_per_package_on_xeon_phi_knl0() {
    // pepc PCStateConfigCtl.py: 0xE2's I/O scope is package on Xeon Phi, and
    // C1 demotion takes it. knl0 is one package of 272 CPUs (68 cores x 4).
    let (_t, root, dump) = msr_copy("knl0", |_| {});
    assert_eq!(dump[&PKG_CST].len(), 272);
    assert_eq!(online(&root), "0-271");
    let m = knobs(&[(
        "demote",
        "kind: c1-demotion\nset: \"off\"\npersistence: runtime\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "demote"]));
    // One domain: the whole package, journalled once, every CPU written.
    let domains = journal_domains(&root, "demote");
    assert_eq!(
        domains,
        vec![(
            "/dev/cpu/0/msr@0xe2[26:26]".to_string(),
            "0-271".to_string()
        )],
        "{:#?}",
        journal(&root)
    );
    for (cpu, v) in &read_regs(&root, &dump)[&PKG_CST] {
        assert_eq!(*v, dump[&PKG_CST][cpu] & !(1 << 26), "CPU {cpu}");
    }
    // One core's threads (0, 68, 136, 204 share core 0) are part of the package.
    let (_t2, root2, _) = msr_copy("knl0", |_| {});
    refused(
        &root2,
        "demote",
        "kind: c1-demotion\ntarget: {cpus: \"0,68,136,204\"}\nset: \"off\"\npersistence: runtime\n",
        "select whole packages",
    );
}

#[test]
fn the_l2_prefetcher_is_one_per_tile_on_xeon_phi_knl0() {
    // pepc MiscFeatureControl.py (aea860c3): l2_hw_prefetcher has module
    // scope on Phi (bit 1 there). A tile is the CPUs sharing an L2, as the
    // tree's cache/index2/shared_cpu_list says. knl0's dump lacks 0x1A4:
    // add it (all prefetchers on).
    let (tmp, root, dump) = msr_copy("knl0", |d| {
        let cpus: Vec<u32> = d[&PKG_CST].keys().copied().collect();
        d.insert(MISC_FEATURE, cpus.into_iter().map(|c| (c, 0)).collect());
    });
    let shared = std::fs::read_to_string(
        root.join("sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_list"),
    )
    .unwrap();
    let tile = shared.trim().to_string();
    assert_eq!(tile, "0-1,68-69,136-137,204-205", "two cores of 4 threads");
    let doc = |cpus: &str| {
        format!(
            "kind: prefetchers\ntarget: {{prefetcher: l2-hw, cpus: \"{cpus}\"}}\nset: \"off\"\npersistence: runtime\n"
        )
    };
    // Core 0's threads alone would change core 1's L2 prefetcher too.
    refused(&root, "l2", &doc("0,68,136,204"), "select whole modules");
    let m = knobs(&[("l2", &doc(&tile))]);
    let log = tmp.path().join("writes.log");
    let out = command(&root, m.path(), &["apply", "l2"])
        .env("HOSTKNOB_TEST_WRITE_LOG", &log)
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(
        logged_cpus(&log, MISC_FEATURE),
        vec![0, 1, 68, 69, 136, 137, 204, 205]
    );
    let now = read_regs(&root, &dump);
    for (cpu, v) in &now[&MISC_FEATURE] {
        let want = if [0, 1, 68, 69, 136, 137, 204, 205].contains(cpu) {
            0b10
        } else {
            0
        };
        assert_eq!(*v, want, "CPU {cpu}");
    }
    // The DCU prefetcher (bit 0) stays per core.
    let m = knobs(&[(
        "dcu",
        "kind: prefetchers\ntarget: {prefetcher: dcu-hw, cpus: \"0,68,136,204\"}\nset: \"off\"\npersistence: runtime\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "dcu", "--dry-run"]));
}

/// CLX-AP (clxap1): two Cascade Lake dies a package, die_id in sysfs.
fn clxap1_die0(root: &Path) -> String {
    let text =
        std::fs::read_to_string(root.join("sys/devices/system/cpu/cpu0/topology/die_cpus_list"))
            .unwrap();
    text.trim().to_string()
}

#[test]
fn c1e_is_one_per_die_on_clx_ap() {
    // pepc _FeaturedMSR.get_clx_ap_adjusted_msr_scope: 0x1FC's package
    // features are per die on a SKYLAKE_X with two dies a package.
    // C1E turned on in the dump (clxap1 has it off), so the knob writes.
    let (_t, root, dump) = msr_copy("clxap1", |d| set_bits(d, POWER_CTL, 0b10, 0b10));
    let die0 = clxap1_die0(&root);
    assert_eq!(die0, "0-23,96-119");
    let m = knobs(&[(
        "c1e",
        &format!("kind: c1e\ntarget: {{cpus: \"{die0}\"}}\nset: \"off\"\npersistence: runtime\n"),
    )]);
    ok(&run(&root, m.path(), &["apply", "c1e"]));
    assert_eq!(
        journal_domains(&root, "c1e"),
        vec![("/dev/cpu/0/msr@0x1fc[1:1]".to_string(), die0.clone())]
    );
    let now = read_regs(&root, &dump);
    let in_die0 = |c: u32| c < 24 || (96..120).contains(&c);
    for (cpu, v) in &now[&POWER_CTL] {
        let was = dump[&POWER_CTL][cpu];
        let want = if in_die0(*cpu) { was & !0b10 } else { was };
        assert_eq!(*v, want, "CPU {cpu}");
    }
    // Half a die is still refused, naming the die.
    let (_t2, root2, _) = msr_copy("clxap1", |_| {});
    refused(
        &root2,
        "c1e",
        "kind: c1e\ntarget: {cpus: \"0-23\"}\nset: \"off\"\npersistence: runtime\n",
        "select whole dies",
    );
    // The package C-state limit takes the die scope too; clxap1's BIOS
    // locked it (0xE2 bit 15), so with the lock cleared it plans per die.
    let (_t3, root3, _) = msr_copy("clxap1", |d| set_bits(d, PKG_CST, 1 << 15, 0));
    let m = knobs(&[(
        "pkgc",
        &format!(
            "kind: package-cstate-limit\ntarget: {{cpus: \"{die0}\"}}\nset: PC6\npersistence: runtime\n"
        ),
    )]);
    ok(&run(&root3, m.path(), &["apply", "pkgc"]));
    assert_eq!(
        journal_domains(&root3, "pkgc"),
        vec![("/dev/cpu/0/msr@0xe2[2:0]".to_string(), die0)]
    );
}

#[test]
fn c1e_needs_no_model_table_row_snr0() {
    // Snow Ridge (ATOM_TREMONT_D, 0x86) has no package C-state limits in
    // pepc, so no row in the model table; pepc's c1e_autopromote has no
    // model restriction. snr0's 0x1FC has C1E on (bit 1 of 0xa00a40059 is 0: off).
    let (_t, root, dump) = msr_copy("snr0", |d| set_bits(d, POWER_CTL, 0b10, 0b10));
    let m = knobs(&[("c1e", "kind: c1e\nset: \"off\"\npersistence: runtime\n")]);
    let out = ok(&run(&root, m.path(), &["apply", "c1e"]));
    assert!(out.contains("wrote and read back"), "{out}");
    for (cpu, v) in &read_regs(&root, &dump)[&POWER_CTL] {
        assert_eq!(*v, dump[&POWER_CTL][cpu] & !0b10, "CPU {cpu}");
    }
    // Kinds whose bits do depend on the model still say so.
    let (_t2, root2, _) = msr_copy("snr0", |_| {});
    refused(
        &root2,
        "pkgc",
        "kind: package-cstate-limit\nset: PC6\npersistence: runtime\n",
        "not in the MSR model table",
    );
}

/// `knobs --format json`'s line for `id`.
fn knobs_line(root: &Path, m: &Path, id: &str) -> serde_json::Value {
    let out = run(root, m, &["knobs", "--format", "json"]);
    let j: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    j["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
        .clone()
}

#[test]
fn hwp_min_and_max_are_not_applicable_under_intel_pstate_spr1() {
    // intel_pstate owns MSR 0x774 (rewrites it on policy and EPP changes):
    // spr1's policies are driven by it, and it runs in active mode.
    let (_t, root, dump) = msr_copy("spr1", |_| {});
    let driver =
        std::fs::read_to_string(root.join("sys/devices/system/cpu/cpu0/cpufreq/scaling_driver"))
            .unwrap();
    assert_eq!(driver.trim(), "intel_pstate");
    let m = knobs(&[
        ("floor", "kind: hwp-min\nset: 20\npersistence: runtime\n"),
        ("ceiling", "kind: hwp-max\nset: 30\npersistence: runtime\n"),
    ]);
    let (report, _) = audit_json(&root, m.path(), None);
    for id in ["floor", "ceiling"] {
        let line = knobs_line(&root, m.path(), id);
        assert_eq!(line["status"], "not-applicable", "{line:#}");
        // `knobs` gives the reason, in JSON and in the table.
        let reason = line["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("the scaling driver is intel_pstate")
                && reason.contains("cpufreq-min/cpufreq-max"),
            "{line:#}"
        );
        let table = ok(&run(&root, m.path(), &["knobs"]));
        assert!(
            table.contains(&format!("{id}: the scaling driver is intel_pstate")),
            "{table}"
        );
        // audit gives the reason.
        let text = knob(&report, id).to_string();
        assert!(
            text.contains("the scaling driver is intel_pstate"),
            "{text}"
        );
        assert!(text.contains("cpufreq-min/cpufreq-max"), "{text}");
    }
    // apply leaves 0x774 alone and says why.
    let out = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert!(out.contains("intel_pstate"), "{out}");
    assert_eq!(read_regs(&root, &dump), dump);
    // intel_cpufreq (passive mode) owns it too.
    set_driver(&root, "intel_cpufreq");
    let line = knobs_line(&root, m.path(), "floor");
    assert_eq!(line["status"], "not-applicable", "{line:#}");
}

#[test]
fn hwp_knobs_elsewhere_respect_capabilities_bounds_and_package_control() {
    // spr1's 0x771 = 0x5081626: lowest 5, highest 0x26 = 38; its 0x774 =
    // 0x20002608: min 8, max 0x26 = 38. Driven by acpi-cpufreq here.
    let doc = |kind: &str, v: u32| format!("kind: {kind}\nset: {v}\npersistence: runtime\n");
    let copy = |tweak: fn(&mut Dump)| {
        let (t, root, dump) = msr_copy("spr1", tweak);
        set_driver(&root, "acpi-cpufreq");
        (t, root, dump)
    };
    let (_t, root, dump) = copy(|_| {});
    assert_eq!(dump[&0x771][&0], 0x5081626);
    assert_eq!(dump[&HWP_REQ][&0], 0x20002608);
    refused(
        &root,
        "f",
        &doc("hwp-min", 39),
        "outside this CPU's HWP performance levels 5..38",
    );
    refused(
        &root,
        "f",
        &doc("hwp-max", 4),
        "outside this CPU's HWP performance levels 5..38",
    );
    // min above the max in place, max under the min in place.
    let (_t2, low_max, _) = copy(|d| set_bits(d, HWP_REQ, 0xff00, 20 << 8));
    refused(
        &low_max,
        "f",
        &doc("hwp-min", 30),
        "above the HWP max performance 20",
    );
    let (_t3, high_min, _) = copy(|d| set_bits(d, HWP_REQ, 0xff, 30));
    refused(
        &high_min,
        "c",
        &doc("hwp-max", 20),
        "below the HWP min performance 30",
    );
    // Package control (bit 42) without the min valid bit (63): 0x772 rules.
    let (_t4, pkg, _) = copy(|d| set_bits(d, HWP_REQ, 1 << 42, 1 << 42));
    refused(
        &pkg,
        "f",
        &doc("hwp-min", 20),
        "HWP package control is in use",
    );
    // With the valid bit the CPU's own request counts again.
    let (_t5, valid, _) = copy(|d| set_bits(d, HWP_REQ, 1 << 42 | 1 << 63, 1 << 42 | 1 << 63));
    let m = knobs(&[("f", &doc("hwp-min", 20))]);
    ok(&run(&valid, m.path(), &["apply", "f", "--dry-run"]));
}

#[test]
fn msr_writes_come_after_every_sysfs_write_of_the_apply() {
    // hwp-min and cpufreq-max in one apply: the sysfs file first (a real
    // kernel may turn it into a write of 0x774), the MSR last.
    let (tmp, root, _) = msr_copy("spr1", |_| {});
    set_driver(&root, "acpi-cpufreq");
    let m = knobs(&[
        ("a-floor", "kind: hwp-min\nset: 20\npersistence: runtime\n"),
        (
            "z-cap",
            "kind: cpufreq-max\nset: base\npersistence: runtime\n",
        ),
    ]);
    let log = tmp.path().join("writes.log");
    let out = command(&root, m.path(), &["apply", "--all"])
        .env("HOSTKNOB_TEST_WRITE_LOG", &log)
        .output()
        .unwrap();
    ok(&out);
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let first_msr = lines
        .iter()
        .position(|l| l.contains("/msr@"))
        .expect("an MSR write");
    let last_sysfs = lines
        .iter()
        .rposition(|l| l.contains("scaling_max_freq"))
        .expect("a sysfs write");
    assert!(last_sysfs < first_msr, "{lines:#?}");
    assert!(!logged(&log, HWP_REQ).is_empty());
}

#[test]
fn an_msr_value_changed_after_its_write_fails_the_final_re_read_and_rolls_back() {
    // The MSRs are read again once every write is done: here a second writer
    // (standing for intel_pstate or firmware rewriting 0x774) puts one CPU's
    // HWP min back after hostknob's own read-back of it succeeded and before
    // the apply ends. The test-only write gate holds the apply at that point.
    let (tmp, root, dump) = msr_copy("spr1", |_| {});
    set_driver(&root, "acpi-cpufreq");
    let before = tree(&root);
    let m = knobs(&[
        ("a-floor", "kind: hwp-min\nset: 20\npersistence: runtime\n"),
        (
            "z-cap",
            "kind: cpufreq-max\nset: base\npersistence: runtime\n",
        ),
    ]);
    let log = tmp.path().join("writes.log");
    let gate = tempfile::tempdir().unwrap();
    let child = command(&root, m.path(), &["apply", "--all"])
        .env(hostknob::apply::GATE_VAR, gate.path())
        .env(hostknob::apply::LOG_VAR, &log)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Step by step until one 0x774 write is done and another write is pending.
    let mut k = 0;
    let cpu = loop {
        wait_for(&gate.path().join(format!("at-{k}")));
        if let Some(&cpu) = logged_cpus(&log, HWP_REQ).first() {
            break cpu;
        }
        std::fs::write(gate.path().join(format!("go-{k}")), "").unwrap();
        k += 1;
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join(format!("dev/cpu/{cpu}/msr")))
        .unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, HWP_REQ as u64 * 8).unwrap();
    let now = u64::from_le_bytes(b);
    assert_eq!(now & 0xff, 20, "CPU {cpu} written: {now:#x}");
    f.write_all_at(&dump[&HWP_REQ][&cpu].to_le_bytes(), HWP_REQ as u64 * 8)
        .unwrap();
    drop(f);
    // Every later write goes through.
    open_gate(gate.path(), k + 10_000);
    let o = child.wait_with_output().unwrap();
    let e = err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}{}", stdout(&o));
    assert!(
        e.contains(&format!("/dev/cpu/{cpu}/msr@0x774"))
            && e.contains("after every write of the apply")
            && e.contains("read back"),
        "{e}"
    );
    assert!(e.contains("restored"), "{e}");
    // Rolled back: the sysfs limit and every CPU's register as before.
    assert_eq!(read_regs(&root, &dump), dump);
    assert_tree(&before, &root, "rolled-back apply");
    assert!(journal(&root).is_empty(), "{:#?}", journal(&root));
}

#[test]
fn msr_writes_refused_by_the_driver_filter_are_said_at_plan_time() {
    // msr.allow_writes=off: the driver returns EPERM to every write
    // (arch/x86/kernel/msr.c filter_write), which is not a missing capability.
    let (_t, root, _) = msr_copy("spr1", |d| set_bits(d, POWER_CTL, 0b10, 0b10));
    write_files(
        &root,
        &[("sys/module/msr/parameters/allow_writes", "off\n")],
    );
    let err = refused(
        &root,
        "c1e",
        "kind: c1e\nset: \"off\"\npersistence: runtime\n",
        "/sys/module/msr/parameters/allow_writes is `off`",
    );
    assert!(!err.contains("CAP_SYS_RAWIO"), "{err}");
    // `default` and `on` let writes through.
    write_files(
        &root,
        &[("sys/module/msr/parameters/allow_writes", "default\n")],
    );
    let m = knobs(&[("c1e", "kind: c1e\nset: \"off\"\npersistence: runtime\n")]);
    ok(&run(&root, m.path(), &["apply", "c1e"]));
}

#[test]
fn every_msr_kind_says_it_taints_the_kernel_and_c1_bits_that_intel_idle_resets_them() {
    let (_t, root, _) = msr_copy("spr1", |d| set_bits(d, POWER_CTL, 0b10, 0b10));
    let m = knobs(&[
        ("c1e", "kind: c1e\nset: \"off\"\npersistence: runtime\n"),
        (
            "pkgc",
            "kind: package-cstate-limit\nset: PC6\npersistence: runtime\n",
        ),
    ]);
    let plan = ok(&run(&root, m.path(), &["apply", "--all", "--dry-run"]));
    assert!(plan.contains("TAINT_CPU_OUT_OF_SPEC"), "{plan}");
    let applied = ok(&run(&root, m.path(), &["apply", "--all"]));
    assert_eq!(
        applied.matches("TAINT_CPU_OUT_OF_SPEC").count(),
        2,
        "{applied}"
    );
    assert_eq!(
        applied.matches("intel_idle_cpu_init").count(),
        1,
        "{applied}"
    );
    let (report, _) = audit_json(&root, m.path(), None);
    let caveats = |id: &str| knob(&report, id)["caveats"].to_string();
    assert!(caveats("c1e").contains("intel_idle_cpu_init"), "{report:#}");
    assert!(
        caveats("pkgc").contains("TAINT_CPU_OUT_OF_SPEC"),
        "{report:#}"
    );
}

#[test]
fn a_cpu_brought_online_that_intel_idle_set_up_again_is_drift_in_audit() {
    // c1e on over package 0 of spr1; then CPU 7 goes offline and online and
    // intel_idle_cpu_init clears C1E promotion on it (SPR's
    // disable_promotion_to_c1e): its copy of 0x1FC differs from the package's.
    let (_t, root, dump) = msr_copy("spr1", |d| set_bits(d, POWER_CTL, 0b10, 0));
    let m = knobs(&[("c1e", "kind: c1e\nset: \"on\"\npersistence: runtime\n")]);
    ok(&run(&root, m.path(), &["apply", "c1e"]));
    let (report, _) = audit_json(&root, m.path(), None);
    assert!(
        ["ok", "unpersisted"].contains(&knob(&report, "c1e")["status"].as_str().unwrap()),
        "{report:#}"
    );
    let mut now = read_regs(&root, &dump);
    let v = now.get_mut(&POWER_CTL).unwrap().get_mut(&7).unwrap();
    *v &= !0b10;
    crate::support::materialize_msrs(&root, &now);
    let (report, code) = audit_json(&root, m.path(), None);
    let k = knob(&report, "c1e");
    assert_eq!(k["status"], "drift", "{k:#}");
    assert!(k.to_string().contains("on CPU 7"), "{k:#}");
    assert_ne!(code, 0);
}

#[test]
fn intel_pstate_global_perf_pct_bounds_the_cpufreq_limits_spr1() {
    // intel_pstate.rst: max_perf_pct caps every policy in active mode, in
    // percent of the highest level. spr1: cpuinfo_max_freq 3.8 GHz, its
    // scaling_max_freq 3.8 GHz as captured; max_perf_pct 50 caps it at 1.9 GHz.
    let (_t, root) = copy_host("spr1");
    let m = knobs(&[
        ("cap", "kind: cpufreq-max\nset: max\npersistence: runtime\n"),
        (
            "floor",
            "kind: cpufreq-min\nset: min\npersistence: runtime\n",
        ),
    ]);
    let (report, _) = audit_json(&root, m.path(), None);
    assert!(
        ["ok", "unpersisted"].contains(&knob(&report, "cap")["status"].as_str().unwrap()),
        "{report:#}"
    );
    write_files(
        &root,
        &[("sys/devices/system/cpu/intel_pstate/max_perf_pct", "50\n")],
    );
    let (report, _) = audit_json(&root, m.path(), None);
    let cap = knob(&report, "cap");
    assert!(
        !["ok", "unpersisted"].contains(&cap["status"].as_str().unwrap()),
        "{cap:#}"
    );
    assert!(
        cap.to_string().contains("caps every policy at 1.9 GHz"),
        "{cap:#}"
    );
    // The floor (800 MHz, min_perf_pct 21 of 3.8 GHz = 798 MHz) is untouched.
    assert!(
        ["ok", "unpersisted"].contains(&knob(&report, "floor")["status"].as_str().unwrap()),
        "{report:#}"
    );
    // apply refuses the ceiling rather than write one that does not hold.
    let before = tree(&root);
    let out = run(&root, m.path(), &["apply", "cap", "--dry-run"]);
    assert!(stdout(&out).contains("max_perf_pct") || stderr(&out).contains("max_perf_pct"));
    assert_tree(&before, &root, "dry run");
    // min_perf_pct 80 (3.04 GHz) keeps the floor above 800 MHz.
    write_files(
        &root,
        &[
            ("sys/devices/system/cpu/intel_pstate/max_perf_pct", "100\n"),
            ("sys/devices/system/cpu/intel_pstate/min_perf_pct", "80\n"),
        ],
    );
    let (report, _) = audit_json(&root, m.path(), None);
    let floor = knob(&report, "floor");
    assert!(
        floor
            .to_string()
            .contains("min_perf_pct keeps every policy at 3.04 GHz"),
        "{floor:#}"
    );
}

#[test]
fn tpmi_domain_writes_outside_the_root_domains_limits_are_refused_gnr0() {
    // gnr0: TPMI, package 0's root domain package_00_die_00 (800 MHz to
    // 2.5 GHz as captured) and its power domains uncore00-04 (to 2.2 GHz).
    // A root write of 1.8 GHz before: a domain's 2 GHz would fail with EINVAL.
    let (_t, root) = copy_host("gnr0");
    let unc = "sys/devices/system/cpu/intel_uncore_frequency";
    let doc = "persistence: runtime\nkind: uncore-freq\ntarget: {bound: max, packages: \"0\"}\nset: 2 GHz\n";
    let m = knobs(&[("ceiling", doc)]);
    ok(&run(&root, m.path(), &["apply", "ceiling", "--dry-run"]));
    write_files(
        &root,
        &[(
            &format!("{unc}/package_00_die_00/max_freq_khz"),
            "1800000\n",
        )],
    );
    let err = refused(
        &root,
        "ceiling",
        doc,
        "outside the limits of package 0's root domain",
    );
    assert!(
        err.contains("package_00_die_00") && err.contains("1.8 GHz"),
        "{err}"
    );
    // Package 1's root is as captured: its domains still take 2 GHz.
    let m = knobs(&[(
        "ceiling1",
        "persistence: runtime\nkind: uncore-freq\ntarget: {bound: max, packages: \"1\"}\nset: 2 GHz\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "ceiling1", "--dry-run"]));
}

#[test]
fn inventory_shows_intel_pstates_global_limits_spr1() {
    // spr1 as captured: max_perf_pct 100, min_perf_pct 21, hwp_dynamic_boost 1.
    let (_t, root) = copy_host("spr1");
    let f = |root: &Path| json_of(&inventory_json(root))["frequency"].clone();
    let as_captured = f(&root);
    assert_eq!(as_captured["max_perf_pct"], 100, "{as_captured:#}");
    assert_eq!(as_captured["min_perf_pct"], 21, "{as_captured:#}");
    assert_eq!(as_captured["hwp_dynamic_boost"], true, "{as_captured:#}");
    write_files(
        &root,
        &[
            ("sys/devices/system/cpu/intel_pstate/max_perf_pct", "50\n"),
            (
                "sys/devices/system/cpu/intel_pstate/hwp_dynamic_boost",
                "0\n",
            ),
        ],
    );
    let capped = f(&root);
    assert_eq!(capped["max_perf_pct"], 50, "{capped:#}");
    assert_eq!(capped["hwp_dynamic_boost"], false, "{capped:#}");
    // The table says what the CPUs get: half of cpuinfo_max_freq's 3.8 GHz.
    let text = ok(&hostknob(&[
        "--root",
        root.to_str().unwrap(),
        "inventory",
        "frequency",
    ]));
    assert!(
        text.contains("min 21 %, max 50 % of the hardware max (at most 1.9 GHz)"),
        "{text}"
    );
    assert!(text.contains("hwp_dynamic_boost"), "{text}");
    // A driver without them (the VM's) shows none.
    let (_t2, vm) = copy_host("fc-haltpoll-2cpu");
    let vm_f = f(&vm);
    assert!(vm_f.is_null() || vm_f["max_perf_pct"].is_null(), "{vm_f:#}");
}
