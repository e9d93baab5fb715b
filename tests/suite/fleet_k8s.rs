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

pub(crate) fn rendered() -> (Value, Value) {
    let all = docs(&std::fs::read_to_string(rendered_path()).unwrap());
    let kinds: Vec<&str> = all.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "DaemonSet"]);
    (all[0].clone(), all[1].clone())
}

/// What hostknob's audit reads on a node (checked by
/// `fleet_pod::every_path_the_audit_asks_for_is_mounted_or_declared_unseen`),
/// each a hostPath of this type. `DirectoryOrCreate` only where the
/// directory may be absent and empty means the same as absent.
const AUDIT_READS: [(&str, &str); 29] = [
    ("/sys", "Directory"),
    ("/proc/sys", "Directory"),
    ("/proc/irq", "Directory"),
    ("/proc/cmdline", "File"),
    ("/proc/stat", "File"),
    ("/proc/interrupts", "File"),
    ("/proc/cpuinfo", "File"),
    ("/proc/meminfo", "File"),
    ("/proc/version", "File"),
    ("/etc/machine-id", "File"),
    ("/etc/os-release", "File"),
    ("/etc/systemd", "Directory"),
    ("/etc/tmpfiles.d", "Directory"),
    ("/etc/sysctl.d", "Directory"),
    ("/etc/udev", "Directory"),
    ("/etc/default", "Directory"),
    ("/etc/tuned", "DirectoryOrCreate"),
    ("/etc/hostknob", "DirectoryOrCreate"),
    ("/usr", "Directory"),
    ("/lib", "Directory"),
    ("/run/systemd/system", "Directory"),
    ("/run/systemd/system.conf.d", "DirectoryOrCreate"),
    ("/run/systemd/network", "DirectoryOrCreate"),
    ("/run/sysctl.d", "DirectoryOrCreate"),
    ("/run/tmpfiles.d", "DirectoryOrCreate"),
    ("/run/udev/rules.d", "DirectoryOrCreate"),
    ("/boot", "Directory"),
    ("/var/lib/hostknob", "DirectoryOrCreate"),
    ("/var/lib/power-profiles-daemon", "DirectoryOrCreate"),
];

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
    assert_eq!(containers.len(), 2, "audit and publish");
    for c in containers {
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
    }
    // Issue 47 item 6: the container that reads the node is not root, so the
    // node's own modes keep its 0600/0640 secrets (WireGuard keys in
    // /etc/systemd/network, drop-ins' credentials) from the pod.
    let c = container(&ds, "audit");
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], Value::Bool(true));
    assert!(sc["runAsUser"].as_u64().unwrap() > 0, "{sc:?}");
    assert!(sc["runAsGroup"].as_u64().unwrap() > 0, "{sc:?}");
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        Value::from("RuntimeDefault")
    );
    // Issue 35 item 1: the pod mounted the whole host /etc and /proc (shadow,
    // kubelet keys, process environments). Now exactly what the audit reads,
    // each at /host<path>, read-only; only the textfile directory writable.
    let volumes: Vec<(String, String, String)> = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|v| v.get("hostPath").is_some())
        .map(|v| {
            (
                s(&v["name"]).to_string(),
                s(&v["hostPath"]["path"]).to_string(),
                s(&v["hostPath"]["type"]).to_string(),
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
    let mut read_only = Vec::new();
    for (name, path, kind) in volumes.iter().filter(|v| v.0 != "textfile") {
        assert_eq!(mount(name)["readOnly"], Value::Bool(true), "{name}");
        assert_eq!(s(&mount(name)["mountPath"]), format!("/host{path}"));
        read_only.push((path.as_str(), kind.as_str()));
    }
    read_only.sort();
    let mut want = AUDIT_READS.to_vec();
    want.sort();
    assert_eq!(read_only, want);
    // The node's textfile directory is the publish container's alone: it
    // reads nothing of the node, and writes as root (the directory's owner).
    assert!(mounts.iter().all(|m| m["name"] != "textfile"));
    let textfile = volumes.iter().find(|v| v.0 == "textfile").unwrap();
    assert_eq!(textfile.1, "/var/lib/prometheus/node-exporter");
    let publish = container(&ds, "publish");
    let publish_mounts: Vec<(&str, bool)> = publish["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| (s(&m["name"]), m["readOnly"] == Value::Bool(true)))
        .collect();
    assert_eq!(publish_mounts, [("out", true), ("textfile", false)]);
    let out_volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "out")
        .unwrap();
    assert!(out_volume.get("emptyDir").is_some(), "{out_volume:?}");
    assert_eq!(s(&mount("out")["mountPath"]), "/out");
    let env = c["env"].as_sequence().unwrap();
    let textfile_dir = env.iter().find(|e| e["name"] == "TEXTFILE_DIR").unwrap();
    assert_eq!(s(&textfile_dir["value"]), "/out");
    for secret in [
        "/etc",
        "/proc",
        "/etc/shadow",
        "/etc/kubernetes",
        "/root",
        "/var/lib/kubelet",
    ] {
        assert!(
            !read_only.iter().any(|(p, _)| *p == secret),
            "{secret} is mounted"
        );
    }
    // No host network, and the pod names no process namespace of the host.
    assert_eq!(pod["hostNetwork"], Value::Bool(false));
    assert!(pod.get("hostPID").is_none() && pod.get("hostIPC").is_none());
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

/// One round of the pod's loop on `host` (a corpus copy laid out as the pod
/// sees it), ended by SIGTERM once it sleeps, then one round of the publish
/// container: (stdout, stderr, textfile dir). The audit runs as the chart's
/// `runAsUser`/`runAsGroup` where the test runs as root.
pub(crate) fn one_round(host: &Path, pod: &Path) -> (String, String, PathBuf) {
    one_round_with(host, pod, &[])
}

/// The container of the audit DaemonSet named `name`.
pub(crate) fn container<'a>(ds: &'a Value, name: &str) -> &'a Value {
    ds["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// Makes `dir` passable for every user, or world-writable (sticky, as
/// /tmp) where `writable`: this test's pod volumes and the corpus copy's
/// temporary directory, used by the chart's non-root uid.
fn open_to_all(dir: &Path, writable: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if writable { 0o1777 } else { 0o755 };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// [`one_round`] with `extra` variables added to the container's.
pub(crate) fn one_round_with(
    host: &Path,
    pod: &Path,
    extra: &[(&str, &Path)],
) -> (String, String, PathBuf) {
    let (cm, ds) = rendered();
    let c = container(&ds, "audit");
    // The uid and gid the chart reads the node as; a test not run as root
    // cannot take them and runs as itself.
    let sc = &c["securityContext"];
    let ids = (unsafe { libc::geteuid() } == 0).then(|| {
        (
            sc["runAsUser"].as_u64().expect("runAsUser") as u32,
            sc["runAsGroup"].as_u64().expect("runAsGroup") as u32,
        )
    });
    open_to_all(pod, true);
    if let Some(top) = host.parent() {
        open_to_all(top, false);
    }
    let manifest = pod.join("manifest");
    configmap_volume(&manifest, cm["data"].as_mapping().unwrap());
    // The pod's emptyDir between the containers, and the node's directory.
    let out_dir = pod.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    open_to_all(&out_dir, true);
    let textfile = pod.join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let (audit_bin, slept) = loop_bin(pod, "audit", true);
    let mut cmd = pod_command(c, &audit_bin, host, &manifest);
    cmd.env("TEXTFILE_DIR", &out_dir);
    for (name, value) in extra {
        cmd.env(name, value);
    }
    if let Some((uid, gid)) = ids {
        // std drops the supplementary groups when root sets a uid.
        std::os::unix::process::CommandExt::uid(&mut cmd, uid);
        std::os::unix::process::CommandExt::gid(&mut cmd, gid);
    }
    let (stdout, stderr) = run_until_it_sleeps(cmd.current_dir(pod), &slept);
    // The publish container: the pod's volume to the node's directory.
    let p = container(&ds, "publish");
    let (publish_bin, published) = loop_bin(pod, "publish", false);
    let publish = s(&p["args"][0])
        .replace("/out/", &format!("{}/", out_dir.display()))
        .replace("/textfile/", &format!("{}/", textfile.display()));
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(publish).env_clear();
    cmd.env("PATH", format!("{}:/usr/bin:/bin", publish_bin.display()));
    let (pout, perr) = run_until_it_sleeps(cmd.current_dir(pod), &published);
    assert!(pout.is_empty() && perr.is_empty(), "publish: {pout}{perr}");
    (stdout, stderr, textfile)
}

/// A PATH directory for one container's loop in `pod`: hostknob (a copy
/// the chart's uid may run, where `copy`) and a `sleep` that marks the end
/// of the round before it sleeps as the image's would: (dir, mark).
fn loop_bin(pod: &Path, name: &str, copy: bool) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = pod.join(format!("bin-{name}"));
    std::fs::create_dir(&dir).unwrap();
    if copy {
        std::fs::copy(bin(), dir.join("hostknob")).unwrap();
        std::fs::set_permissions(dir.join("hostknob"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let mark = pod.join(format!("{name}-slept"));
    std::fs::write(
        dir.join("sleep"),
        format!(
            "#!/bin/sh\ntouch '{}'\nexec /bin/sleep \"$@\"\n",
            mark.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(dir.join("sleep"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, mark)
}

/// Runs a container's loop until its `sleep` marks `mark`, then ends it
/// with SIGTERM (its trap exits 0): (stdout, stderr).
fn run_until_it_sleeps(cmd: &mut Command, mark: &Path) -> (String, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !mark.exists() && start.elapsed() < std::time::Duration::from_secs(120) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

/// Container `c`'s loop script as `/bin/sh -c` runs it, with the
/// container's environment, its paths moved to this test's: `bin_dir`
/// first on PATH, `host` the node (adl0), `manifest` the manifest volume.
pub(crate) fn pod_command(c: &Value, bin_dir: &Path, host: &Path, manifest: &Path) -> Command {
    assert_eq!(
        c["command"].as_sequence().unwrap(),
        &vec![Value::from("/bin/sh"), Value::from("-c")]
    );
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(s(&c["args"][0])).env_clear();
    cmd.env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()));
    for e in c["env"].as_sequence().unwrap() {
        let name = s(&e["name"]);
        let value = match name {
            "HOSTKNOB_ROOT" => host.display().to_string(),
            "HOSTKNOB_MANIFEST" => manifest.display().to_string(),
            "HOSTKNOB_HOST" => {
                assert_eq!(s(&e["valueFrom"]["fieldRef"]["fieldPath"]), "spec.nodeName");
                "adl0".to_string()
            }
            _ => s(&e["value"]).to_string(),
        };
        cmd.env(name, value);
    }
    cmd
}

#[test]
fn the_pods_loop_audits_a_corpus_copy_into_the_textfile_and_changes_nothing() {
    let (_keep, host) = copy_host("adl0");
    let before = tree(&host);
    let pod = tempfile::tempdir().unwrap();
    let (stdout, stderr, textfile) = one_round(&host, pod.path());
    let prom = textfile.join("hostknob.prom");
    let metrics = std::fs::read_to_string(&prom).expect("the loop wrote the textfile");
    assert!(
        metrics.contains(
            "hostknob_knob_status{knob=\"cpufreq-governor-performance\",\
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
fn where_the_nodes_timer_writes_the_textfile_the_pod_does_not() {
    // Issue 35 item 1: the DaemonSet and hostknob-audit.timer both wrote
    // hostknob.prom, each replacing the other's figures.
    let (_keep, host) = copy_host("adl0");
    let wants = host.join("etc/systemd/system/timers.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    // As systemctl enable makes it: an absolute link the pod cannot follow.
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/hostknob-audit.timer",
        wants.join("hostknob-audit.timer"),
    )
    .unwrap();
    let before = tree(&host);
    let pod = tempfile::tempdir().unwrap();
    let (stdout, stderr, textfile) = one_round(&host, pod.path());
    assert_eq!(std::fs::read_dir(&textfile).unwrap().count(), 0);
    assert!(stdout.contains(" drift"), "the pod still audits: {stdout}");
    assert!(
        stderr.contains("hostknob-audit.timer is enabled on this node"),
        "{stderr}"
    );
    assert_tree(&before, &host, "the pod's audit");
}

#[test]
fn the_image_recipe_values_yaml_names_builds_a_static_binary_on_busybox() {
    let values = std::fs::read_to_string(repo().join("deploy/helm/hostknob/values.yaml")).unwrap();
    assert!(
        values.contains("deploy/container/Containerfile"),
        "{values}"
    );
    assert!(values.contains("imagePullSecrets: []"), "{values}");
    let template =
        std::fs::read_to_string(repo().join("deploy/helm/hostknob/templates/daemonset.yaml"))
            .unwrap();
    assert!(template.contains("with .Values.imagePullSecrets"));
    let recipe = std::fs::read_to_string(repo().join("deploy/container/Containerfile")).unwrap();
    let stages: Vec<&str> = recipe.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "{recipe}");
    assert_eq!(stages[1], "FROM ${BASE_IMAGE}", "{recipe}");
    assert!(
        recipe.contains("ARG BASE_IMAGE=docker.io/library/busybox:"),
        "{recipe}"
    );
    assert!(
        recipe.contains("cargo build --release --locked"),
        "{recipe}"
    );
    assert!(recipe.contains("COPY --from=build /out/hostknob /usr/local/bin/hostknob"));
    // The binary the recipe copies is what this build makes: no interpreter,
    // nothing NEEDED, so busybox's image runs it.
    let o = Command::new("readelf")
        .arg("-ld")
        .arg(bin())
        .output()
        .unwrap();
    assert!(o.status.success());
    let elf = out(&o);
    assert!(
        !elf.contains("INTERP") && !elf.contains("(NEEDED)"),
        "{elf}"
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

/// Issue 47 item 7: defaults for a latency fleet. Dedicated pools carry
/// NoSchedule taints: tolerated by default (NoExecute, a node unreachable or
/// evicting, is not); a priority class as the Node Tuning Operator's tuned
/// DaemonSet; maxUnavailable as a percentage (NTO: 10%); a liveness probe on
/// the textfile's age, run here on a fresh and a stale file; requests and
/// limits for CPU and memory.
#[test]
fn the_daemonset_defaults_fit_a_latency_fleet() {
    let (_, ds) = rendered();
    let pod = &ds["spec"]["template"]["spec"];
    let tolerations = pod["tolerations"].as_sequence().expect("tolerations");
    assert!(
        tolerations.iter().any(|t| t["operator"] == "Exists"
            && t["effect"] == "NoSchedule"
            && t.get("key").is_none()),
        "{tolerations:?}"
    );
    assert!(
        !tolerations
            .iter()
            .any(|t| t.get("effect").is_none() || t["effect"] == "NoExecute"),
        "NoExecute is tolerated: {tolerations:?}"
    );
    assert_eq!(
        pod["priorityClassName"],
        Value::from("system-node-critical")
    );
    let max = s(&ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"]);
    assert_eq!(max, "10%");
    let c = container(&ds, "audit");
    for (kind, key) in [
        ("requests", "cpu"),
        ("requests", "memory"),
        ("limits", "cpu"),
        ("limits", "memory"),
    ] {
        assert!(c["resources"][kind].get(key).is_some(), "no {kind}.{key}");
    }
    let probe = c["livenessProbe"]["exec"]["command"]
        .as_sequence()
        .expect("a liveness probe");
    assert_eq!(s(&probe[0]), "/bin/sh");
    let script = s(&probe[2]);
    // The mark of the loop's last round (the textfile itself is not
    // written where the node's timer writes it).
    assert!(script.contains("/out/.round"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".round");
    let run = || {
        Command::new("/bin/sh")
            .args(["-c", &script.replace("/out", dir.path().to_str().unwrap())])
            .status()
            .unwrap()
            .success()
    };
    assert!(!run(), "no round yet: not alive");
    std::fs::write(&file, "").unwrap();
    assert!(run(), "a fresh round");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert!(!run(), "a round two hours ago");
}

/// Issue 47 item 6: the pod read the node as uid 0, so every root-owned file
/// under its mounts (/etc/systemd, /etc/default, /boot) was readable,
/// secrets included. As the chart's uid it reads what any local user may:
/// a root-only knob file is `unreadable` (not drift, not absent), the rest
/// of the node is still audited, and a 0640 key beside the .link files is
/// out of its reach.
#[test]
fn the_pod_reads_the_node_as_any_local_user_and_a_root_only_file_is_unreadable() {
    use std::os::unix::fs::PermissionsExt;
    if unsafe { libc::geteuid() } != 0 {
        println!("not root: the chart's uid cannot be taken, so this test has nothing to show");
        return;
    }
    let (_keep, host) = copy_host("adl0");
    let cpus = host.join("sys/devices/system/cpu");
    let mut governors = 0;
    for e in std::fs::read_dir(&cpus).unwrap().flatten() {
        let g = e.path().join("cpufreq/scaling_governor");
        if g.is_file() {
            std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o600)).unwrap();
            governors += 1;
        }
    }
    assert!(governors > 0, "adl0 has cpufreq");
    let network = host.join("etc/systemd/network");
    std::fs::create_dir_all(&network).unwrap();
    let key = network.join("50-wg0.netdev");
    std::fs::write(
        &key,
        "[WireGuard]\nPrivateKey=c2VjcmV0LWtleS1vZi10aGUtbm9kZQ==\n",
    )
    .unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let pod = tempfile::tempdir().unwrap();
    let (stdout, _stderr, textfile) = one_round(&host, pod.path());
    let metrics = std::fs::read_to_string(textfile.join("hostknob.prom"))
        .expect("the publish container put the textfile on the node");
    assert!(
        metrics.contains(
            "hostknob_knob_status{knob=\"cpufreq-governor-performance\",\
             kind=\"cpufreq-governor\",status=\"unreadable\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("hostknob_audit_success 1"), "{metrics}");
    // The rest of the node is audited: the energy preference beside the
    // governor files is read (drift), and only the governor is unreadable.
    assert!(
        metrics.contains(
            "hostknob_knob_status{knob=\"cpufreq-epp-performance\",\
             kind=\"cpufreq-epp\",status=\"drift\"} 1"
        ),
        "{metrics}"
    );
    let statuses: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("hostknob_knob_status{") && l.ends_with(" 1"))
        .collect();
    assert!(statuses.len() >= 10, "{metrics}");
    assert_eq!(
        statuses.iter().filter(|l| l.contains("unreadable")).count(),
        1,
        "{metrics}"
    );
    assert!(stdout.contains("unreadable"), "{stdout}");
    // What protects the key is the uid the chart gives the container.
    let (_, ds) = rendered();
    let sc = &container(&ds, "audit")["securityContext"];
    let mut cat = Command::new("/bin/cat");
    cat.arg(&key);
    std::os::unix::process::CommandExt::uid(&mut cat, sc["runAsUser"].as_u64().unwrap() as u32);
    std::os::unix::process::CommandExt::gid(&mut cat, sc["runAsGroup"].as_u64().unwrap() as u32);
    let o = cat.current_dir("/").output().unwrap();
    assert!(
        !o.status.success() && o.stdout.is_empty(),
        "the chart's uid read the key"
    );
}
