//! Issue 23 item 1: `when:` conditions on knobs, on copies of real hosts:
//! every fact matching and not matching, labels present, absent and
//! malformed, and a knob whose conditions fail being not-applicable in
//! audit, knobs, apply and verify.

use std::path::Path;

use crate::support::*;

/// A THP knob for every host with `when` as given (YAML flow mapping).
fn knob_doc(id: &str, when: &str) -> String {
    format!(
        "id: {id}\ntitle: THP on request only\nkind: thp\ntarget: {{setting: enabled}}\nset: madvise\nhosts: \"*\"\npersistence: runtime\nwhy: fewer compaction stalls\nwhen: {when}\n"
    )
}

/// Audits `host` with one knob per `(when, should hold)`; checks each
/// knob's one condition holds (or not) and returns what the host read.
fn check_facts(host: &Path, cases: &[(&str, bool)]) -> Vec<String> {
    let docs: Vec<(String, String)> = cases
        .iter()
        .enumerate()
        .map(|(i, (when, _))| (format!("k{i:02}.yaml"), knob_doc(&format!("k{i:02}"), when)))
        .collect();
    let files: Vec<(&str, &str)> = docs.iter().map(|(f, d)| (f.as_str(), d.as_str())).collect();
    let m = manifest(&files);
    let (r, _) = audit_json(host, m.path(), None);
    cases
        .iter()
        .enumerate()
        .map(|(i, (when, holds))| {
            let k = knob(&r, &format!("k{i:02}"));
            let c = &k["conditions"][0];
            assert_eq!(c["holds"], *holds, "{when} on {}: {k:#}", host.display());
            if !holds {
                assert_eq!(k["status"], "not-applicable", "{when}: {k:#}");
                let want = format!(
                    "when: {}; this host: {}",
                    c["condition"].as_str().unwrap(),
                    c["host"].as_str().unwrap()
                );
                assert_eq!(k["detail"], want.as_str(), "{when}");
            }
            c["host"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn every_fact_matches_and_fails_on_spr1() {
    let (_tmp, host) = copy_host("spr1");
    let seen = check_facts(
        &host,
        &[
            ("{vendor: intel}", true),
            ("{vendor: amd}", false),
            ("{family: 6}", true),
            ("{family: 0x19}", false),
            ("{model: 0x8f}", true),
            ("{model: 143}", true),
            ("{model: sapphirerapids}", true),
            ("{model: emeraldrapids}", false),
            ("{microarchitecture: sapphirerapids}", true),
            ("{microarchitecture: zen4}", false),
            ("{hybrid: false}", true),
            ("{hybrid: true}", false),
            ("{virtualized: false}", true),
            ("{virtualized: true}", false),
            ("{hypervisor: none}", true),
            ("{hypervisor: kvm}", false),
            ("{idle_driver: intel_idle}", true),
            ("{idle_driver: haltpoll}", false),
            ("{idle_governor: menu}", true),
            ("{idle_governor: teo}", false),
            ("{cpufreq_driver: intel_pstate}", true),
            ("{cpufreq_driver: acpi-cpufreq}", false),
            ("{cpufreq_mode: active}", true),
            ("{cpufreq_mode: passive}", false),
            // 6.18.8 from /proc/version: 18 > 9 as numbers, not as text.
            ("{kernel: '>=6.1'}", true),
            ("{kernel: '<6.9'}", false),
            ("{arch: x86_64}", true),
            ("{arch: arm64}", false),
            ("{numa_nodes: 4}", true),
            ("{numa_nodes: '>4'}", false),
            // A pepc capture has no /proc/meminfo: unknown never matches.
            ("{memory: '>=1GiB'}", false),
        ],
    );
    assert_eq!(seen[0], "GenuineIntel");
    assert_eq!(seen[4], "143 (0x8f, SAPPHIRERAPIDS_X)");
    assert_eq!(seen[24], "6.18.8-200.fc43.x86_64");
    assert_eq!(seen[30], "unknown (no /proc/meminfo)");
}

#[test]
fn every_fact_matches_and_fails_on_genoa0() {
    let (_tmp, host) = copy_host("genoa0");
    let seen = check_facts(
        &host,
        &[
            ("{vendor: amd}", true),
            ("{vendor: [intel, hygon]}", false),
            ("{family: 25}", true),
            ("{model: 0x11}", true),
            ("{model: sapphirerapids}", false),
            ("{microarchitecture: zen4}", true),
            ("{microarchitecture: zen3}", false),
            ("{idle_driver: acpi_idle}", true),
            ("{idle_driver: '!=acpi_idle'}", false),
            ("{cpufreq_driver: acpi-cpufreq}", true),
            // No intel_pstate or amd_pstate status: unknown never matches.
            ("{cpufreq_mode: active}", false),
            ("{kernel: '>=7'}", true),
            ("{kernel: ['<6', '>=7.1']}", false),
            ("{numa_nodes: '>1'}", true),
            ("{numa_nodes: 1}", false),
        ],
    );
    assert_eq!(seen[0], "AuthenticAMD");
    assert_eq!(seen[10], "unknown (no intel_pstate or amd_pstate status)");
    assert_eq!(seen[11], "7.0.0-rc1-gc0ed8dbcff08");
}

#[test]
fn the_vm_is_virtualized_on_haltpoll_and_its_memory_and_kernel_compare() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let cases = [
        ("{virtualized: true}", true),
        ("{virtualized: false}", false),
        ("{idle_driver: haltpoll}", true),
        ("{idle_driver: intel_idle}", false),
        ("{idle_governor: haltpoll}", true),
        ("{idle_governor: [menu, teo]}", false),
        ("{cpufreq_driver: intel_pstate}", false),
        // 6.18.44: later than 6.9 and than 6.1, in the 6.18 series.
        ("{kernel: '>6.9'}", true),
        ("{kernel: '6.18'}", true),
        ("{kernel: '>=6.19'}", false),
        // MemTotal 24684096 kB, 23.5 GiB.
        ("{memory: '>=16GiB'}", true),
        ("{memory: '>=24GiB'}", false),
        ("{numa_nodes: 1}", true),
        ("{numa_nodes: '>1'}", false),
        ("{hypervisor: xen}", false),
        ("{hybrid: false}", true),
    ];
    let seen = check_facts(&host, &cases);
    assert_eq!(seen[7], "6.18.44-fc-v595");
    assert_eq!(seen[10], "23.5 GiB (MemTotal)");
    assert!(
        seen[14].starts_with("unknown (a virtual machine"),
        "{}",
        seen[14]
    );
    // Xen guests name their hypervisor in /sys/hypervisor/type.
    write_files(&host, &[("sys/hypervisor/type", "xen\n")]);
    let seen = check_facts(
        &host,
        &[("{hypervisor: xen}", true), ("{hypervisor: kvm}", false)],
    );
    assert_eq!(seen[0], "xen");
}

#[test]
fn adl0_is_hybrid() {
    let (_tmp, host) = copy_host("adl0");
    check_facts(
        &host,
        &[
            ("{hybrid: true}", true),
            ("{hybrid: false}", false),
            ("{model: alderlake}", true),
            ("{microarchitecture: alderlake}", true),
            ("{microarchitecture: sapphirerapids}", false),
            (
                "{idle_driver: intel_idle, cpufreq_driver: intel_pstate}",
                true,
            ),
        ],
    );
}

#[test]
fn labels_present_absent_and_malformed() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    // Absent: a label condition fails, naming the file.
    let seen = check_facts(&host, &[("{label.role: rpc}", false)]);
    assert_eq!(seen[0], "unknown (no label role in /etc/hostknob/labels)");
    write_files(
        &host,
        &[(
            "etc/hostknob/labels",
            "# fleet labels\nrole=rpc\nrack = r12\n",
        )],
    );
    check_facts(
        &host,
        &[
            ("{label.role: rpc}", true),
            ("{label.role: db}", false),
            ("{label.rack: [r11, r12]}", true),
            ("{label.zone: eu}", false),
        ],
    );
    // Malformed: an error naming the labels file and line, and the knob's `when`.
    write_files(&host, &[("etc/hostknob/labels", "role=rpc\nrpc-node\n")]);
    let m = manifest(&[("k.yaml", &knob_doc("k", "{label.role: rpc}"))]);
    let before = snapshot(&host);
    for cmd in ["audit", "knobs"] {
        let out = hostknob(&[
            "--root",
            host.to_str().unwrap(),
            "--manifest",
            m.path().to_str().unwrap(),
            cmd,
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let want = format!(
            "{}:9: when: cannot be checked: /etc/hostknob/labels:2: ",
            m.path().join("k.yaml").display()
        );
        assert!(err.contains(&want), "{cmd}: want {want:?} in {err}");
        assert!(err.contains("\"rpc-node\" is not `key=value`"), "{err}");
    }
    let out = apply::run(&host, m.path(), &["apply", "--all"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("/etc/hostknob/labels:2: "),
        "{}",
        stderr(&out)
    );
    assert_eq!(before, snapshot(&host), "nothing changed");
    // A knob without label conditions does not read the file.
    let m = manifest(&[("k.yaml", &knob_doc("k", "{idle_driver: haltpoll}"))]);
    let (_, code) = audit_json(&host, m.path(), None);
    assert_ne!(code, 1);
}

const VM_DRIVER: &str = "{idle_driver: intel_idle}";

#[test]
fn a_knob_whose_conditions_fail_is_not_applicable_and_apply_leaves_it() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let m = manifest(&[
        ("bare.yaml", &knob_doc("thp-bare-metal", VM_DRIVER)),
        (
            "vm.yaml",
            &knob_doc("thp-vm", "{virtualized: true, kernel: '>=6.1'}")
                .replace("set: madvise", "set: never"),
        ),
    ]);
    let (r, code) = audit_json(&host, m.path(), None);
    let k = knob(&r, "thp-bare-metal");
    assert_eq!(k["status"], "not-applicable", "{k:#}");
    assert_eq!(
        k["detail"],
        "when: idle_driver == intel_idle; this host: haltpoll"
    );
    assert_eq!(k["current"], serde_json::json!([]));
    let vm = knob(&r, "thp-vm");
    assert_eq!(vm["status"], "drift", "{vm:#}");
    assert_eq!(
        vm["conditions"],
        serde_json::json!([
            {"condition": "virtualized == true", "holds": true, "host": "true"},
            {"condition": "kernel >= 6.1", "holds": true, "host": "6.18.44-fc-v595"}
        ])
    );
    assert_eq!(code, 2);

    // knobs: the JSON lists the conditions, the table says which matched.
    let out = hostknob(&[
        "--root",
        host.to_str().unwrap(),
        "--manifest",
        m.path().to_str().unwrap(),
        "knobs",
        "--format",
        "json",
    ]);
    let j: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    let line = j["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "thp-bare-metal")
        .unwrap();
    assert_eq!(line["status"], "not-applicable");
    assert_eq!(line["conditions"][0]["holds"], false);
    for cmd in ["knobs", "audit"] {
        let out = hostknob(&[
            "--root",
            host.to_str().unwrap(),
            "--manifest",
            m.path().to_str().unwrap(),
            cmd,
        ]);
        let text = stdout(&out);
        assert!(text.contains("Conditions (when:):"), "{cmd}: {text}");
        assert!(
            text.contains("thp-bare-metal: idle_driver == intel_idle: fails (this host: haltpoll)"),
            "{cmd}: {text}"
        );
        assert!(
            text.contains("thp-vm: virtualized == true: matched (this host: true); kernel >= 6.1: matched (this host: 6.18.44-fc-v595)"),
            "{cmd}: {text}"
        );
    }

    // apply --all writes the knob whose conditions hold, and nothing for the other.
    let thp = host.join("sys/kernel/mm/transparent_hugepage/enabled");
    let out = apply::run(&host, m.path(), &["apply", "--all", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let o = json_of(&out);
    let bare = o["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == "thp-bare-metal")
        .unwrap();
    assert_eq!(
        bare["not_applicable"],
        "when: idle_driver == intel_idle; this host: haltpoll"
    );
    assert_eq!(bare["changes"], serde_json::json!([]));
    assert_eq!(o["written"], 1);
    assert_eq!(std::fs::read_to_string(&thp).unwrap().trim(), "never");
    // Named alone, it plans nothing and says why.
    let out = apply::run(&host, m.path(), &["apply", "thp-bare-metal", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("thp-bare-metal: not applicable here (when: idle_driver == intel_idle; this host: haltpoll); nothing to write"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn verify_refuses_a_knob_whose_conditions_fail() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let m = manifest(&[(
        "k.yaml",
        &format!(
            "{}verify: {{probe: wakeup}}\n",
            knob_doc("thp-bare-metal", VM_DRIVER)
        ),
    )]);
    let thp = host.join("sys/kernel/mm/transparent_hugepage/enabled");
    let before = std::fs::read(&thp).unwrap();
    let out = apply::run(&host, m.path(), &["verify", "thp-bare-metal"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("thp-bare-metal is not-applicable on vm: when: idle_driver == intel_idle; this host: haltpoll"),
        "{err}"
    );
    assert_eq!(before, std::fs::read(&thp).unwrap());
}

/// Issue 49 item 3: `isolated_cpus` counts `isolated` and `nohz_full`
/// together; a capture with neither file does not know it.
#[test]
fn isolated_cpus_counts_isolcpus_and_nohz_full_together() {
    let (_tmp, host) = copy_host("fc-haltpoll-2cpu");
    let cpu = host.join("sys/devices/system/cpu");
    // As captured: `isolated` is empty, there is no nohz_full.
    let seen = check_facts(
        &host,
        &[
            ("{isolated_cpus: '>0'}", false),
            ("{isolated_cpus: 0}", true),
        ],
    );
    assert_eq!(seen[0], "0");
    std::fs::write(cpu.join("isolated"), "1\n").unwrap();
    std::fs::write(cpu.join("nohz_full"), "0-1\n").unwrap();
    let seen = check_facts(
        &host,
        &[
            ("{isolated_cpus: '>0'}", true),
            ("{isolated_cpus: 2}", true),
        ],
    );
    assert_eq!(seen[0], "2");
    // adl0 (a pepc capture) has neither file: unknown, so no condition holds.
    let (_tmp2, adl0) = copy_host("adl0");
    let seen = check_facts(&adl0, &[("{isolated_cpus: '>=0'}", false)]);
    assert!(seen[0].contains("unknown"), "{seen:?}");
}
