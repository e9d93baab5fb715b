//! Issue 25 item 14: the Kubernetes DaemonSet (deploy/kubernetes/daemonset.yaml,
//! rendered from the Helm chart deploy/helm/hostknob): least privilege and
//! read-only mounts, the chart's manifest is the reviewed one, the pod's own
//! loop audits a corpus copy laid out as the pod sees it (ConfigMap links
//! included) into the textfile and changes nothing, and the rendered
//! manifests pass the Kubernetes schema (kubernetes-validate) and, where helm
//! is installed, `helm lint` and `helm template`.

use crate::support::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize as _;
use serde_yaml::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rendered_path() -> PathBuf {
    repo().join("deploy/kubernetes/daemonset.yaml")
}

fn docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn rendered() -> (Value, Value) {
    let all = docs(&std::fs::read_to_string(rendered_path()).unwrap());
    let kinds: Vec<&str> = all.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "DaemonSet"]);
    (all[0].clone(), all[1].clone())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn the_daemonset_reads_the_node_read_only_with_no_capability() {
    let (_, ds) = rendered();
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], Value::Bool(false));
    let containers = pod["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(sc["privileged"], Value::Bool(false));
    assert_eq!(
        sc["capabilities"]["drop"].as_sequence().unwrap(),
        &vec![Value::from("ALL")]
    );
    assert!(
        sc["capabilities"].get("add").is_none(),
        "no capability added"
    );
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        Value::from("RuntimeDefault")
    );
    // hostPath volumes: where each is mounted, and only the textfile directory writable.
    let volumes: Vec<(String, String)> = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|v| v.get("hostPath").is_some())
        .map(|v| {
            (
                s(&v["name"]).to_string(),
                s(&v["hostPath"]["path"]).to_string(),
            )
        })
        .collect();
    let mounts = c["volumeMounts"].as_sequence().unwrap();
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|m| s(&m["name"]) == name)
            .unwrap_or_else(|| panic!("{name} is not mounted"))
    };
    for (host, inside) in [
        ("/sys", "/host/sys"),
        ("/proc", "/host/proc"),
        ("/etc", "/host/etc"),
    ] {
        let (name, _) = volumes
            .iter()
            .find(|(_, p)| p == host)
            .unwrap_or_else(|| panic!("no hostPath {host}"));
        assert_eq!(s(&mount(name)["mountPath"]), inside);
    }
    let mut writable = Vec::new();
    for (name, path) in &volumes {
        if mount(name)["readOnly"] != Value::Bool(true) {
            writable.push(path.clone());
        }
    }
    assert_eq!(writable, ["/var/lib/prometheus/node-exporter"]);
    assert_eq!(s(&mount("manifest")["mountPath"]), "/manifest");
    assert_eq!(mount("manifest")["readOnly"], Value::Bool(true));
    // The loop runs audit, never a command that changes the node.
    let script = s(&c["args"][0]);
    assert!(
        script.contains("hostknob audit --textfile \"$TEXTFILE_DIR\""),
        "{script}"
    );
    for word in ["apply", "revert", "persist", "hold", "verify"] {
        assert!(!script.contains(word), "the loop runs `{word}`: {script}");
    }
}

#[test]
fn the_chart_ships_the_reviewed_manifest_and_the_configmap_holds_it() {
    let (cm, _) = rendered();
    let shipped = repo().join("manifest");
    let chart = repo().join("deploy/helm/hostknob/manifest");
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&chart), names(&shipped));
    let data = cm["data"].as_mapping().unwrap();
    assert_eq!(data.len(), names(&shipped).len());
    for n in names(&shipped) {
        let text = std::fs::read_to_string(shipped.join(&n)).unwrap();
        assert_eq!(
            std::fs::read_to_string(chart.join(&n)).unwrap(),
            text,
            "deploy/helm/hostknob/manifest/{n} differs from manifest/{n}"
        );
        assert_eq!(
            s(&data[&Value::from(n.as_str())]),
            text,
            "ConfigMap key {n}"
        );
    }
}

/// A ConfigMap volume as the kubelet lays it out: the files in a dated
/// directory, `..data` linking to it, and each key a link through `..data`.
fn configmap_volume(dir: &Path, data: &serde_yaml::Mapping) {
    let dated = dir.join("..2026_12_01_00_00_00.000000001");
    std::fs::create_dir_all(&dated).unwrap();
    std::os::unix::fs::symlink(dated.file_name().unwrap(), dir.join("..data")).unwrap();
    for (k, v) in data {
        std::fs::write(dated.join(s(k)), s(v)).unwrap();
        std::os::unix::fs::symlink(Path::new("..data").join(s(k)), dir.join(s(k))).unwrap();
    }
}

#[test]
fn the_pods_loop_audits_a_corpus_copy_into_the_textfile_and_changes_nothing() {
    let (cm, ds) = rendered();
    let c = &ds["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["command"].as_sequence().unwrap(),
        &vec![Value::from("/bin/sh"), Value::from("-c")]
    );
    let script = s(&c["args"][0]);
    let (_keep, host) = copy_host("adl0");
    let before = tree(&host);
    let pod = tempfile::tempdir().unwrap();
    let manifest = pod.path().join("manifest");
    configmap_volume(&manifest, cm["data"].as_mapping().unwrap());
    let textfile = pod.path().join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let bin_dir = pod.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin(), bin_dir.join("hostknob")).unwrap();
    // The container's environment, its paths moved to this pod directory.
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script).env_clear();
    cmd.env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()));
    for e in c["env"].as_sequence().unwrap() {
        let name = s(&e["name"]);
        let value = match name {
            "HOSTKNOB_ROOT" => host.display().to_string(),
            "HOSTKNOB_MANIFEST" => manifest.display().to_string(),
            "TEXTFILE_DIR" => textfile.display().to_string(),
            "HOSTKNOB_HOST" => {
                assert_eq!(s(&e["valueFrom"]["fieldRef"]["fieldPath"]), "spec.nodeName");
                "adl0".to_string()
            }
            _ => s(&e["value"]).to_string(),
        };
        cmd.env(name, value);
    }
    let child = cmd
        .current_dir(fresh_cwd())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prom = textfile.join("hostknob.prom");
    let start = std::time::Instant::now();
    while !prom.exists() && start.elapsed() < std::time::Duration::from_secs(120) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The loop now sleeps INTERVAL_SECONDS; SIGTERM ends it (the trap exits 0).
    std::thread::sleep(std::time::Duration::from_millis(200));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    let metrics = std::fs::read_to_string(&prom).expect("the loop wrote the textfile");
    assert!(
        metrics.contains(
            "hostknob_knob_status{host=\"adl0\",knob=\"cpufreq-governor-performance\",\
             kind=\"cpufreq-governor\",status=\"drift\"} 1"
        ),
        "{metrics}"
    );
    // One summary line per round in the pod's log; drift is not an error.
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains(" drift"), "{stdout}");
    assert!(!stderr.contains("exited"), "{stderr}");
    assert_tree(&before, &host, "the pod's audit");
    assert_eq!(
        std::fs::read_dir(&textfile).unwrap().count(),
        1,
        "only hostknob.prom"
    );
}

#[test]
fn the_rendered_manifests_pass_the_kubernetes_schema() {
    let path = rendered_path();
    if !on_path("kubernetes-validate") {
        println!(
            "kubernetes-validate not installed (pip install kubernetes-validate): schema check skipped"
        );
    } else {
        let ok = Command::new("kubernetes-validate")
            .arg("--strict")
            .arg(&path)
            .output()
            .unwrap();
        assert!(ok.status.success(), "{}{}", out(&ok), err(&ok));
        // The check means something: a misspelt field and a wrong type are refused.
        let text = std::fs::read_to_string(&path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (from, to) in [
            (
                "readOnlyRootFilesystem: true",
                "readOnlyRootFilesystem: \"yes\"",
            ),
            ("allowPrivilegeEscalation:", "allowPrivilegeEscalaton:"),
        ] {
            assert!(text.contains(from));
            let bad = dir.path().join("bad.yaml");
            std::fs::write(&bad, text.replace(from, to)).unwrap();
            let o = Command::new("kubernetes-validate")
                .arg("--strict")
                .arg(&bad)
                .output()
                .unwrap();
            assert!(!o.status.success(), "{to} passed the schema check");
        }
    }
    if !on_path("helm") {
        println!(
            "helm not installed (not packaged for Debian, PyPI or npm here): \
             helm lint and helm template skipped, the rendered file checked alone"
        );
        return;
    }
    let chart = repo().join("deploy/helm/hostknob");
    let lint = Command::new("helm")
        .args(["lint", "--strict"])
        .arg(&chart)
        .output()
        .unwrap();
    assert!(lint.status.success(), "{}{}", out(&lint), err(&lint));
    let t = Command::new("helm")
        .args(["template", "hostknob", "--namespace", "hostknob"])
        .arg(&chart)
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", err(&t));
    assert_eq!(
        docs(&out(&t)),
        docs(&std::fs::read_to_string(&path).unwrap()),
        "deploy/kubernetes/daemonset.yaml is not what the chart renders"
    );
}
