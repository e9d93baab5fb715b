//! Issue 22 item 2: the MSR knob kinds on copies of corpus hosts whose
//! registers are materialized from pepc's dumps (`support::msr`). Expected
//! values are decoded here from the raw dump, independently of hostknob:
//! which bits each knob owns on which model, and which CPUs share a package.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::support::*;

/// A copy of `host` with its MSR dump materialized after `tweak`.
pub(crate) fn msr_copy(
    host: &str,
    tweak: impl Fn(&mut Dump),
) -> (tempfile::TempDir, PathBuf, Dump) {
    let (tmp, root) = copy_host(host);
    let mut dump = msr_dump(host).expect("an MSR dump");
    tweak(&mut dump);
    materialize_msrs(&root, &dump);
    (tmp, root, dump)
}

/// Sets `mask` bits to `bits` in `reg` on every CPU of the dump.
pub(crate) fn set_bits(dump: &mut Dump, reg: u32, mask: u64, bits: u64) {
    for v in dump.get_mut(&reg).unwrap().values_mut() {
        *v = (*v & !mask) | bits;
    }
}

/// Every register of `dump` as the tree's files hold it now.
pub(crate) fn read_regs(root: &Path, dump: &Dump) -> Dump {
    let mut out = Dump::new();
    for (reg, cpus) in dump {
        for cpu in cpus.keys() {
            let f = std::fs::File::open(root.join(format!("dev/cpu/{cpu}/msr"))).unwrap();
            let mut b = [0u8; 8];
            f.read_exact_at(&mut b, *reg as u64 * 8).unwrap();
            out.entry(*reg)
                .or_default()
                .insert(*cpu, u64::from_le_bytes(b));
        }
    }
    out
}

/// The write log's lines (`path<TAB>value`) whose path names `reg`.
pub(crate) fn logged(log: &Path, reg: u32) -> Vec<String> {
    let tag = format!("/msr@{reg:#x}[");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_string)
        .collect()
}

/// The CPUs of the write log's lines for `reg`, in order; each CPU once.
pub(crate) fn logged_cpus(log: &Path, reg: u32) -> Vec<u32> {
    let mut cpus: Vec<u32> = logged(log, reg)
        .iter()
        .map(|l| {
            l["/dev/cpu/".len()..]
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    let n = cpus.len();
    cpus.sort();
    cpus.dedup();
    assert_eq!(cpus.len(), n, "a CPU written twice: {:?}", logged(log, reg));
    cpus
}

const C1E: u32 = 0x1fc;
const PKG_CST: u32 = 0xe2;
const HWP_REQ: u32 = 0x774;

fn three_knobs() -> tempfile::TempDir {
    knobs(&[
        ("c1e-off", "kind: c1e\nset: \"off\"\npersistence: runtime\n"),
        (
            "pkgc-pc2",
            "kind: package-cstate-limit\nset: PC2\npersistence: runtime\n",
        ),
        (
            "hwp-floor",
            "kind: hwp-min\nset: 20\npersistence: runtime\n",
        ),
    ])
}

/// `c1e: off`, `package-cstate-limit: PC2` and `hwp-min: 20` on a copy of
/// `host` with C1E turned on in its dump: only each knob's bits change, each
/// register is written once per scope domain (package, package, CPU), and
/// revert gives back byte-identical register files. `limit_mask` is the
/// model's limit field (pepc: bits 2:0 on Xeons, 3:0 on clients); PC2 is 1.
fn apply_and_revert(host: &str, limit_mask: u64) {
    let (tmp, root, _) = msr_copy(host, |d| set_bits(d, C1E, 0b10, 0b10));
    // hwp-min is not applicable under intel_pstate (it owns 0x774).
    crate::platform_msr::set_driver(&root, "acpi-cpufreq");
    let dump = read_regs(&root, &msr_dump(host).unwrap());
    let pristine = tree(&root);
    let m = three_knobs();
    let log = tmp.path().join("writes.log");
    let out = command(&root, m.path(), &["apply", "--all"])
        .env("HOSTKNOB_TEST_WRITE_LOG", &log)
        .output()
        .unwrap();
    let applied = ok(&out);
    assert!(applied.contains("wrote and read back"), "{host}: {applied}");
    let now = read_regs(&root, &dump);
    let fields: [(u32, u64, u64); 3] = [
        (C1E, 0b10, 0),
        (PKG_CST, limit_mask, 1),
        (HWP_REQ, 0xff, 20),
    ];
    for (reg, cpus) in &dump {
        for (cpu, before) in cpus {
            let after = now[reg][cpu];
            let (mask, want) = fields
                .iter()
                .find(|f| f.0 == *reg)
                .map(|f| (f.1, f.2))
                .unwrap_or((0, 0));
            assert_eq!(
                (after ^ before) & !mask,
                0,
                "{host}: MSR {reg:#x} on CPU {cpu}: {before:#x} -> {after:#x} changed bits outside {mask:#x}"
            );
            assert_eq!(after & mask, want & mask, "{host}: MSR {reg:#x} CPU {cpu}");
        }
    }
    // Every CPU's own copy is written (each domain needed the write here:
    // C1E was on, PC2 and 20 were not set), each once.
    for reg in [C1E, PKG_CST, HWP_REQ] {
        let want: Vec<u32> = dump[&reg].keys().copied().collect();
        assert_eq!(logged_cpus(&log, reg), want, "{host}: MSR {reg:#x}");
    }
    // Audit reads them back in effect.
    let (report, _) = audit_json(&root, m.path(), None);
    for id in ["c1e-off", "pkgc-pc2", "hwp-floor"] {
        let k = knob(&report, id);
        assert!(
            ["ok", "unpersisted"].contains(&k["status"].as_str().unwrap()),
            "{host}: {id}: {k:#}"
        );
    }
    // The journal keeps the whole register as found and the bits written.
    let j = journal(&root);
    let e = j
        .iter()
        .find(|e| e["knob"] == "pkgc-pc2")
        .expect("a journal entry");
    let first: u32 = e["path"].as_str().unwrap()["/dev/cpu/".len()..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        e["before"].as_str().unwrap(),
        format!("{:#018x}", dump[&PKG_CST][&first]),
        "{e:#}"
    );
    assert_eq!(e["written"], "0x1", "{e:#}");
    let reverted = ok(&run(&root, m.path(), &["revert", "--all"]));
    assert!(reverted.contains("restored and read back"), "{reverted}");
    assert_tree(&pristine, &root, &format!("{host} after revert"));
}

#[test]
fn msr_knobs_write_only_their_bits_on_every_cpu_and_revert_byte_identical_spr1() {
    apply_and_revert("spr1", 0b111);
}

#[test]
fn msr_knobs_write_only_their_bits_on_every_cpu_and_revert_byte_identical_gnr0() {
    apply_and_revert("gnr0", 0b111);
}

#[test]
fn msr_knobs_write_only_their_bits_on_every_cpu_and_revert_byte_identical_adl0() {
    // Alder Lake (hybrid): the limit field is bits 3:0, PC10 (8) as found.
    apply_and_revert("adl0", 0b1111);
}

#[test]
fn msr_revert_restores_only_the_knobs_bits_and_keeps_a_bit_changed_since() {
    let (_tmp, root, _) = msr_copy("spr1", |d| set_bits(d, C1E, 0b10, 0b10));
    let m = knobs(&[("c1e-off", "kind: c1e\nset: \"off\"\npersistence: runtime\n")]);
    ok(&run(&root, m.path(), &["apply", "c1e-off"]));
    // Someone else sets bit 20 of 0x1FC on every CPU after the apply.
    let dump = msr_dump("spr1").unwrap();
    for cpu in dump[&C1E].keys() {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(root.join(format!("dev/cpu/{cpu}/msr")))
            .unwrap();
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, C1E as u64 * 8).unwrap();
        let v = u64::from_le_bytes(b) | 1 << 20;
        f.write_all_at(&v.to_le_bytes(), C1E as u64 * 8).unwrap();
    }
    ok(&run(&root, m.path(), &["revert", "c1e-off"]));
    let now = read_regs(&root, &dump);
    for (cpu, v) in &now[&C1E] {
        assert_eq!(v & 0b10, 0b10, "CPU {cpu}: C1E restored on: {v:#x}");
        assert_eq!(v & 1 << 20, 1 << 20, "CPU {cpu}: bit 20 kept: {v:#x}");
        assert_eq!(*v, dump[&C1E][cpu] | 0b10 | 1 << 20, "CPU {cpu}");
    }
}

/// Applies `doc` as knob `id` on `root`: refused, naming `why`, nothing changed.
pub(crate) fn refused(root: &Path, id: &str, doc: &str, why: &str) -> String {
    let before = tree(root);
    let m = knobs(&[(id, doc)]);
    let out = run(root, m.path(), &["apply", id]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}{}", stdout(&out));
    assert!(err.contains(why), "expected {why:?} in {err}");
    assert_tree(&before, root, "refused apply");
    err
}

#[test]
fn a_locked_package_cstate_limit_is_refused_at_plan_time() {
    // icx2s3's BIOS set 0xE2 bit 15; icx2s0, the same model, left it clear.
    let doc = "kind: package-cstate-limit\nset: PC2\npersistence: runtime\n";
    let (_t, locked, _) = msr_copy("icx2s3", |_| {});
    refused(&locked, "pkgc", doc, "locked by BIOS");
    let (_t2, open, _) = msr_copy("icx2s0", |_| {});
    let m = knobs(&[("pkgc", doc)]);
    let plan = ok(&run(&open, m.path(), &["apply", "pkgc", "--dry-run"]));
    assert!(plan.contains("0xe2"), "{plan}");
    // C1 demotion (bit 26) is outside the locked bits 15:0: still writable.
    let m = knobs(&[(
        "demote",
        "kind: c1-demotion\nset: \"on\"\npersistence: runtime\n",
    )]);
    ok(&run(&locked, m.path(), &["apply", "demote", "--dry-run"]));
}

#[test]
fn hosts_without_hwp_refuse_hwp_min() {
    // hswep0 (Haswell-EP) has no HWP: no `hwp` flag, no 0x770/0x774 in its dump.
    let (_t, root, _) = msr_copy("hswep0", |_| {});
    refused(
        &root,
        "floor",
        "kind: hwp-min\nset: 10\npersistence: runtime\n",
        "has no HWP",
    );
    // spr1 with HWP turned off in 0x770: refused for that reason.
    let (_t2, off, _) = msr_copy("spr1", |d| set_bits(d, 0x770, 1, 0));
    crate::platform_msr::set_driver(&off, "acpi-cpufreq");
    refused(
        &off,
        "floor",
        "kind: hwp-max\nset: 10\npersistence: runtime\n",
        "HWP is not enabled",
    );
}

#[test]
fn an_atom_server_takes_its_own_limit_codes_and_bits() {
    // Denverton (Goldmont-D): limit bits 3:0, PC6 is code 3 (pepc), 0 is unlimited.
    let (_t, root, _) = msr_copy("dnv0", |_| {});
    let dump = read_regs(&root, &msr_dump("dnv0").unwrap());
    let m = knobs(&[(
        "pkgc",
        "kind: package-cstate-limit\nset: PC6\npersistence: runtime\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "pkgc"]));
    for (cpu, v) in &read_regs(&root, &dump)[&PKG_CST] {
        assert_eq!(*v, (dump[&PKG_CST][cpu] & !0xf) | 3, "CPU {cpu}");
    }
    // A limit its table lacks (PC6R exists on Sapphire Rapids only) is refused.
    let (_t2, root2, _) = msr_copy("dnv0", |_| {});
    refused(
        &root2,
        "pkgc",
        "kind: package-cstate-limit\nset: PC6R\npersistence: runtime\n",
        "ATOM_GOLDMONT_D has no package C-state limit PC6R",
    );
}

#[test]
fn prefetchers_by_name_per_core_and_part_of_a_package_is_refused() {
    let (_t, root, _) = msr_copy("spr1", |_| {});
    let dump = read_regs(&root, &msr_dump("spr1").unwrap());
    let m = knobs(&[(
        "no-l2-adj",
        "kind: prefetchers\ntarget: {prefetcher: l2-adjacent}\nset: \"off\"\npersistence: runtime\n",
    )]);
    ok(&run(&root, m.path(), &["apply", "no-l2-adj"]));
    for (cpu, v) in &read_regs(&root, &dump)[&0x1a4] {
        assert_eq!(*v, dump[&0x1a4][cpu] | 0b10, "CPU {cpu}");
    }
    ok(&run(&root, m.path(), &["revert", "no-l2-adj"]));
    assert_eq!(read_regs(&root, &dump), dump);
    // C1E is one per package: CPU 0 alone would change its package's other CPUs.
    refused(
        &root,
        "c1e",
        "kind: c1e\ntarget: {cpus: \"0\"}\nset: \"on\"\npersistence: runtime\n",
        "select whole packages",
    );
}

#[test]
fn without_the_registers_msr_knobs_are_unsupported_with_the_reason() {
    // The VM capture is an AMD guest: not applicable, skipped with the reason.
    let (_t, root) = copy_host("fc-haltpoll-2cpu");
    let before = tree(&root);
    let m = knobs(&[("c1e", "kind: c1e\nset: \"off\"\npersistence: runtime\n")]);
    let out = ok(&run(&root, m.path(), &["apply", "c1e"]));
    assert!(
        out.contains("these are Intel MSRs; this CPU is AuthenticAMD"),
        "{out}"
    );
    assert_tree(&before, &root, "not applicable");
    // An Intel capture whose registers were not captured: unsupported, named.
    let (_t1, bare) = copy_host("spr1");
    std::fs::remove_dir_all(bare.join("dev/cpu")).unwrap();
    refused(
        &bare,
        "c1e",
        "kind: c1e\nset: \"off\"\npersistence: runtime\n",
        "the capture holds no MSRs",
    );
    // Kernel lockdown refuses MSR writes.
    let (_t2, locked, _) = msr_copy("spr1", |_| {});
    write_files(
        &locked,
        &[(
            "sys/kernel/security/lockdown",
            "none [integrity] confidentiality\n",
        )],
    );
    refused(
        &locked,
        "c1e",
        "kind: c1e\nset: \"on\"\npersistence: runtime\n",
        "kernel lockdown is `integrity`",
    );
}

/// The model's limit field of 0xE2 on spr1 (pepc: bits 2:0 on Xeons).
const SPR_LIMIT: u64 = 0b111;

#[test]
fn package_cstate_limit_writes_and_reads_back_every_cpu_of_the_package() {
    // 0xE2 is one copy per core (pepc iosname) though the limit is per
    // package: each CPU's file is written and the log names every CPU.
    let (tmp, root, _) = msr_copy("spr1", |_| {});
    let dump = read_regs(&root, &msr_dump("spr1").unwrap());
    let m = knobs(&[(
        "pkgc",
        "kind: package-cstate-limit\nset: PC6\npersistence: runtime\n",
    )]);
    let log = tmp.path().join("writes.log");
    let out = command(&root, m.path(), &["apply", "pkgc"])
        .env("HOSTKNOB_TEST_WRITE_LOG", &log)
        .output()
        .unwrap();
    assert!(ok(&out).contains("wrote and read back"));
    let cpus: Vec<u32> = dump[&PKG_CST].keys().copied().collect();
    assert!(cpus.len() > 2, "{cpus:?}");
    assert_eq!(logged_cpus(&log, PKG_CST), cpus);
    // PC6 is code 2 on Sapphire Rapids (pepc); the rest of each register is its own.
    for (cpu, v) in &read_regs(&root, &dump)[&PKG_CST] {
        assert_eq!(*v, (dump[&PKG_CST][cpu] & !SPR_LIMIT) | 2, "CPU {cpu}");
    }
}

#[test]
fn a_package_whose_copies_differ_before_apply_is_refused_and_nothing_changes() {
    // CPU 1's copy of the limit reads PC2 (1); its package's others as captured.
    let (_t, root, dump) = msr_copy("spr1", |d| {
        let v = d.get_mut(&PKG_CST).unwrap().get_mut(&1).unwrap();
        *v = (*v & !SPR_LIMIT) | 1;
    });
    assert_ne!(
        dump[&PKG_CST][&0] & SPR_LIMIT,
        1,
        "the capture's CPU 0 is not PC2"
    );
    let err = refused(
        &root,
        "pkgc",
        "kind: package-cstate-limit\nset: PC6\npersistence: runtime\n",
        "differ before the write",
    );
    assert!(err.contains("on CPU 1"), "{err}");
    // Audit says so too, without writing.
    let m = knobs(&[(
        "pkgc",
        "kind: package-cstate-limit\nset: PC6\npersistence: runtime\n",
    )]);
    let (report, _) = audit_json(&root, m.path(), None);
    assert!(
        knob(&report, "pkgc").to_string().contains("differ"),
        "{report:#}"
    );
}

#[test]
fn revert_restores_each_cpus_own_register_byte_identical() {
    // Each CPU's 0x1FC differs outside the C1E bit (bits 20+ carry its number),
    // so CPU 0's value written to all would be wrong on every other CPU.
    let (tmp, root, _) = msr_copy("spr1", |d| {
        for (cpu, v) in d.get_mut(&C1E).unwrap().iter_mut() {
            *v = (*v & !(0xff << 20)) | ((*cpu as u64 & 0xff) << 20) | 0b10;
        }
    });
    let dump = read_regs(&root, &msr_dump("spr1").unwrap());
    let pristine = tree(&root);
    let m = knobs(&[("c1e-off", "kind: c1e\nset: \"off\"\npersistence: runtime\n")]);
    ok(&run(&root, m.path(), &["apply", "c1e-off"]));
    for (cpu, v) in &read_regs(&root, &dump)[&C1E] {
        assert_eq!(*v, dump[&C1E][cpu] & !0b10, "CPU {cpu} after apply");
    }
    let log = tmp.path().join("revert.log");
    let out = command(&root, m.path(), &["revert", "c1e-off"])
        .env("HOSTKNOB_TEST_WRITE_LOG", &log)
        .output()
        .unwrap();
    assert!(ok(&out).contains("restored and read back"));
    let cpus: Vec<u32> = dump[&C1E].keys().copied().collect();
    assert_eq!(logged_cpus(&log, C1E), cpus);
    assert_eq!(read_regs(&root, &dump), dump);
    assert_tree(&pristine, &root, "after revert");
}
