//! `inventory --format json` on every captured host, checked against the facts
//! an independent reader took from the same data (`<host>.expected.yaml`).

use crate::support::*;
use serde_json::Value as J;
use serde_yaml::Value as Y;

/// The value of a grouped list (`[{cpus, value}]`) for one CPU.
fn for_cpu(groups: &J, cpu: u32) -> J {
    for g in groups.as_array().into_iter().flatten() {
        let list = hostknob::cpulist::CpuList::parse(g["cpus"].as_str().unwrap()).unwrap();
        if list.contains(cpu) {
            return g["value"].clone();
        }
    }
    J::Null
}

fn y_str(v: &Y) -> Option<String> {
    match v {
        Y::Null => None,
        Y::String(s) => Some(s.clone()),
        Y::Number(n) => Some(n.to_string()),
        other => Some(serde_yaml::to_string(other).unwrap().trim().to_string()),
    }
}

fn j_str(v: &J) -> Option<String> {
    match v {
        J::Null => None,
        J::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn y_list(v: &Y) -> Option<Vec<String>> {
    v.as_sequence()
        .map(|s| s.iter().filter_map(y_str).collect())
}

fn j_list(v: &J) -> Option<Vec<String>> {
    v.as_array().map(|s| s.iter().filter_map(j_str).collect())
}

struct Check<'a> {
    host: &'a str,
    failures: Vec<String>,
}

impl Check<'_> {
    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.failures.push(format!(
                "{}: {what}: got {got:?}, expected {want:?}",
                self.host
            ));
        }
    }
}

fn check_host(host: &str) -> Vec<String> {
    let root = corpus_host(host);
    let out = inventory_json(&root);
    let inv = json_of(&out);
    let exp = expected(host);
    let mut c = Check {
        host,
        failures: Vec::new(),
    };

    let cpu = &inv["cpu"];
    let e = &exp["cpu"];
    c.eq(
        "vendor_id",
        j_str(&cpu["vendor_id"]),
        y_str(&e["vendor_id"]),
    );
    c.eq(
        "model_name",
        j_str(&cpu["model_name"]),
        y_str(&e["model_name"]),
    );
    c.eq("family", cpu["family"].as_u64(), e["cpu_family"].as_u64());
    c.eq("model", cpu["model"].as_u64(), e["model"].as_u64());
    c.eq("stepping", cpu["stepping"].as_u64(), e["stepping"].as_u64());
    c.eq(
        "kernel_release",
        j_str(&inv["host"]["kernel_release"]),
        y_str(&exp["kernel_release"]),
    );

    let t = &exp["topology"];
    c.eq(
        "online_count",
        cpu["online_count"].as_u64(),
        t["online_cpus"].as_u64(),
    );
    c.eq("online", j_str(&cpu["online"]), y_str(&t["online"]));
    c.eq("packages", cpu["packages"].as_u64(), t["packages"].as_u64());
    c.eq("cores", cpu["cores"].as_u64(), t["cores"].as_u64());
    if let Some(hist) = t["threads_per_core_histogram"].as_mapping() {
        let want: Vec<(u64, u64)> = hist
            .iter()
            .map(|(k, v)| (k.as_u64().unwrap(), v.as_u64().unwrap()))
            .collect();
        let got: Vec<(u64, u64)> = cpu["threads_per_core_histogram"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
            .collect();
        c.eq("threads_per_core_histogram", got, want.clone());
        c.eq(
            "threads_per_core",
            cpu["threads_per_core"].as_u64(),
            want.iter().map(|(k, _)| *k).max(),
        );
    }
    if let Some(tpc) = t["threads_per_core"].as_u64() {
        c.eq(
            "threads_per_core",
            cpu["threads_per_core"].as_u64(),
            Some(tpc),
        );
    }
    if let Some(hy) = t["hybrid_pmu_cpus"].as_mapping() {
        for (kind, cpus) in hy {
            let got = cpu["hybrid"]
                .as_array()
                .and_then(|a| a.iter().find(|h| h["kind"].as_str() == kind.as_str()))
                .and_then(|h| j_str(&h["cpus"]));
            c.eq(
                &format!("hybrid {}", kind.as_str().unwrap()),
                got,
                y_str(cpus),
            );
        }
    }
    if let Some(dies) = t["dies_from_sysfs_die_id"].as_u64() {
        c.eq("dies", cpu["dies"].as_u64(), Some(dies));
    }

    if let Some(nodes) = exp["numa"]["cpulist"].as_mapping() {
        for (node, cpus) in nodes {
            let id: u64 = node
                .as_str()
                .unwrap()
                .trim_start_matches("node")
                .parse()
                .unwrap();
            let got = inv["numa"]["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["id"].as_u64() == Some(id))
                .and_then(|n| j_str(&n["cpus"]));
            c.eq(&format!("numa node{id} cpus"), got, y_str(cpus));
        }
    }

    let idle = &inv["idle"];
    let ei = &exp["cpuidle"];
    c.eq(
        "idle driver",
        j_str(&idle["driver"]),
        y_str(&ei["current_driver"]),
    );
    c.eq(
        "idle governor",
        j_str(&idle["governor"]),
        y_str(&ei["current_governor"]),
    );
    c.eq(
        "idle available_governors",
        j_list(&idle["available_governors"]),
        y_list(&ei["available_governors"]),
    );
    let want_states = ei["cpu0_states"].as_sequence().cloned().unwrap_or_default();
    // No states is "not exposed": null, not an empty list.
    c.eq(
        "idle states null exactly when none",
        idle["states"].is_null(),
        want_states.is_empty(),
    );
    let states = idle["states"].as_array().cloned().unwrap_or_default();
    c.eq("number of idle states", states.len(), want_states.len());
    for (got, want) in states.iter().zip(&want_states) {
        let i = want["state"].as_u64().unwrap();
        c.eq(&format!("state{i} index"), got["index"].as_u64(), Some(i));
        c.eq(
            &format!("state{i} name"),
            j_str(&got["name"]),
            y_str(&want["name"]),
        );
        c.eq(
            &format!("state{i} latency"),
            got["latency_us"].as_u64(),
            want["latency_us"].as_u64(),
        );
        c.eq(
            &format!("state{i} residency"),
            got["residency_us"].as_u64(),
            want["residency_us"].as_u64(),
        );
        let cpu0_disabled =
            hostknob::cpulist::CpuList::parse(got["disabled_cpus"].as_str().unwrap())
                .unwrap()
                .contains(0);
        c.eq(
            &format!("state{i} disabled on cpu0"),
            cpu0_disabled,
            want["disable"].as_u64() == Some(1),
        );
        if let Some(ds) = y_str(&want["default_status"]) {
            c.eq(
                &format!("state{i} default_status"),
                j_str(&got["default_status"]),
                Some(ds),
            );
        }
    }
    if let Some(n) = ei["cpus_with_cpuidle_states"].as_u64() {
        let got = hostknob::cpulist::CpuList::parse(idle["cpus_with_states"].as_str().unwrap())
            .unwrap()
            .len() as u64;
        c.eq("cpus with idle states", got, n);
    }

    let f = &inv["frequency"];
    let ef = &exp["cpufreq"];
    if ef.is_null() {
        c.eq("frequency (no cpufreq)", f.is_null(), true);
    } else if f.is_null() {
        c.failures.push(format!(
            "{host}: frequency missing but expected.yaml has cpufreq"
        ));
    } else {
        c.eq(
            "scaling driver (cpu0)",
            j_str(&for_cpu(&f["drivers"], 0)),
            y_str(&ef["scaling_driver"]),
        );
        c.eq(
            "governor (cpu0)",
            j_str(&for_cpu(&f["governors"], 0)),
            y_str(&ef["scaling_governor"]),
        );
        c.eq(
            "available governors",
            j_list(&f["available_governors"]),
            y_list(&ef["scaling_available_governors"]),
        );
        c.eq(
            "epp (cpu0)",
            j_str(&for_cpu(&f["epp"], 0)),
            y_str(&ef["energy_performance_preference"]),
        );
        c.eq(
            "available epp",
            j_list(&f["available_epp"]),
            y_list(&ef["energy_performance_available_preferences"]),
        );
        c.eq(
            "min khz (cpu0)",
            for_cpu(&f["min_khz"], 0).as_u64(),
            ef["cpuinfo_min_freq_khz"].as_u64(),
        );
        c.eq(
            "max khz (cpu0)",
            for_cpu(&f["max_khz"], 0).as_u64(),
            ef["cpuinfo_max_freq_khz"].as_u64(),
        );
        c.eq(
            "base khz (cpu0)",
            for_cpu(&f["base_khz"], 0).as_u64(),
            ef["base_frequency_khz"].as_u64(),
        );
        let ep = &exp["intel_pstate"];
        for field in ["max_perf_pct", "min_perf_pct"] {
            c.eq(field, f[field].as_u64(), ep[field].as_u64());
        }
        c.eq(
            "hwp_dynamic_boost",
            f["hwp_dynamic_boost"].as_bool(),
            ep["hwp_dynamic_boost"].as_u64().map(|v| v == 1),
        );
        if let Some(n) = exp["cpufreq_policies"].as_u64() {
            c.eq("policies", f["policies"].as_u64(), Some(n));
        }
    }
    if let Some(epb) = exp["cpu0_energy_perf_bias"].as_u64() {
        c.eq(
            "energy_perf_bias (cpu0)",
            for_cpu(&f["energy_perf_bias"], 0).as_u64(),
            Some(epb),
        );
    }
    if let Some(thp) = exp["transparent_hugepage"]["enabled"].as_str() {
        c.eq(
            "thp enabled",
            inv["memory"]["thp_enabled"].as_str(),
            Some(thp),
        );
    }
    if let Some(kb) = exp["memory"]["mem_total_kb"].as_u64() {
        c.eq(
            "mem total",
            inv["memory"]["mem_total_kib"].as_u64(),
            Some(kb),
        );
    }
    if let Some(nets) = exp["network"].as_sequence() {
        for n in nets {
            let name = n["name"].as_str().unwrap();
            let got = inv["network"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|i| i["name"].as_str() == Some(name));
            match got {
                None => c.failures.push(format!("{host}: interface {name} missing")),
                Some(i) => {
                    if let Some(mtu) = n["mtu"].as_u64() {
                        c.eq(&format!("{name} mtu"), i["mtu"].as_u64(), Some(mtu));
                    }
                    if let Some(dev) = n["driver_path"].as_str() {
                        c.eq(&format!("{name} device"), i["device"].as_str(), Some(dev));
                    }
                }
            }
        }
    }
    if let Some(qos) = exp["pm_qos_resume_latency_us"].as_mapping() {
        for (cpu, v) in qos {
            let n: u32 = cpu
                .as_str()
                .unwrap()
                .trim_start_matches("cpu")
                .parse()
                .unwrap();
            c.eq(
                &format!("pm_qos cpu{n}"),
                j_str(&for_cpu(&idle["pm_qos_resume_latency_us"], n)),
                y_str(v),
            );
        }
    }
    c.failures
}

#[test]
fn every_captured_host_matches_its_expected_facts() {
    let hosts = corpus_hosts();
    assert!(
        hosts.len() >= 47,
        "expected the 47 corpus hosts, found {}",
        hosts.len()
    );
    // Unpack (first run only) and check on both cores.
    let half = hosts.len() / 2;
    let (a, b) = hosts.split_at(half);
    let failures: Vec<String> = std::thread::scope(|s| {
        let h = s.spawn(|| a.iter().flat_map(|h| check_host(h)).collect::<Vec<_>>());
        let mut f: Vec<String> = b.iter().flat_map(|h| check_host(h)).collect();
        f.extend(h.join().unwrap());
        f
    });
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
