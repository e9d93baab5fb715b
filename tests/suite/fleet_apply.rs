//! Issue 47 item 8: the chart's apply mode. Rendered with
//! deploy/helm/hostknob/ci/apply-values.yaml into
//! deploy/kubernetes/apply-example.yaml: a DaemonSet per labelled profile,
//! least privilege, schema-valid; its pod's own loop, run on a corpus copy
//! laid out as its mounts lay it, applies the profile's runtime knobs,
//! reports a kernel-command-line knob pending without touching the boot
//! loader, reverts a knob that left the profile, and on SIGTERM puts the
//! node back as it found it.

use crate::support::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hostknob::root::{POD_UNSEEN, entry_of};
use serde::Deserialize as _;
use serde_yaml::{Mapping, Value};

fn example() -> Vec<Value> {
    let text =
        std::fs::read_to_string(repo().join("deploy/kubernetes/apply-example.yaml")).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// The example's documents of `kind` named `name`.
fn doc<'a>(all: &'a [Value], kind: &str, name: &str) -> &'a Value {
    all.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn the_apply_mode_renders_one_least_privileged_daemonset_per_labelled_profile() {
    let all = example();
    let kinds: Vec<&str> = all.iter().map(|d| s(&d["kind"])).collect();
    assert_eq!(kinds, ["ConfigMap", "ConfigMap", "DaemonSet", "DaemonSet"]);
    // The audit DaemonSet is the default rendering's, unchanged.
    let (_, audit) = crate::fleet_k8s::rendered();
    assert_eq!(doc(&all, "DaemonSet", "hostknob"), &audit);
    let ds = doc(&all, "DaemonSet", "hostknob-apply-latency");
    // Its pods are not the audit DaemonSet's: neither selector takes the other's.
    let labels = ds["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .unwrap();
    let audit_sel = audit["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap();
    assert!(
        !audit_sel.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "the audit DaemonSet's selector takes the apply pods"
    );
    let sel = ds["spec"]["selector"]["matchLabels"].as_mapping().unwrap();
    assert!(sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
    // Rollout bounded as the audit's.
    assert_eq!(
        ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        audit["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"]
    );
    let pod = &ds["spec"]["template"]["spec"];
    // The values' label chooses the nodes.
    let terms = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(
        terms,
        &serde_yaml::from_str::<Value>(
            "[{matchExpressions: [{key: hostknob.example/role, operator: In, values: [rpc]}]}]"
        )
        .unwrap()
    );
    assert_eq!(pod["automountServiceAccountToken"], Value::Bool(false));
    assert!(pod.get("hostPID").is_none() && pod.get("hostIPC").is_none());
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], Value::Bool(false));
    assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
    assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(sc["capabilities"]["drop"][0], Value::from("ALL"));
    assert!(
        sc["capabilities"].get("add").is_none(),
        "no capability added"
    );
    // Writable: only the trees the runtime knobs and the journal live in.
    let volumes = pod["volumes"].as_sequence().unwrap();
    let host_path = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v.get("hostPath"))
            .map(|h| s(&h["path"]).to_string())
    };
    let mut writable: Vec<String> = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter(|m| m["readOnly"] != Value::Bool(true))
        .map(|m| {
            let p = host_path(s(&m["name"])).expect("a writable mount is a host path");
            assert_eq!(s(&m["mountPath"]), format!("/host{p}"));
            p
        })
        .collect();
    writable.sort();
    assert_eq!(
        writable,
        ["/proc/irq", "/proc/sys", "/sys", "/var/lib/hostknob"]
    );
    // The loop applies the profile as the pod does and reverts on SIGTERM.
    let script = s(&c["args"][0]);
    assert!(
        script.contains("hostknob apply --pod --profile \"$PROFILE\""),
        "{script}"
    );
    assert!(script.contains("trap stop TERM INT"), "{script}");
    // The profiles' ConfigMap holds the chart's profiles/, projected under
    // the manifest's profiles/.
    let cm = doc(&all, "ConfigMap", "hostknob-profiles");
    let chart = repo().join("deploy/helm/hostknob/profiles");
    let data = cm["data"].as_mapping().unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&chart)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(data.len(), files.len());
    for f in &files {
        assert_eq!(
            s(&data[&Value::from(f.as_str())]),
            std::fs::read_to_string(chart.join(f)).unwrap(),
            "{f}"
        );
    }
    let manifest = volumes.iter().find(|v| v["name"] == "manifest").unwrap();
    let sources = manifest["projected"]["sources"].as_sequence().unwrap();
    assert_eq!(s(&sources[0]["configMap"]["name"]), "hostknob-manifest");
    assert_eq!(s(&sources[1]["configMap"]["name"]), "hostknob-profiles");
    for item in sources[1]["configMap"]["items"].as_sequence().unwrap() {
        assert_eq!(s(&item["path"]), format!("profiles/{}", s(&item["key"])));
    }
}

#[test]
fn the_apply_example_passes_the_kubernetes_schema() {
    let path = repo().join("deploy/kubernetes/apply-example.yaml");
    let o = Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(&path)
        .output();
    let Ok(o) = o else {
        println!("kubernetes-validate not installed (pip install kubernetes-validate): skipped");
        return;
    };
    assert!(o.status.success(), "{}{}", out(&o), err(&o));
    // The check means something here too: a misspelt affinity field is refused.
    let text = std::fs::read_to_string(&path).unwrap();
    let bad = tempfile::NamedTempFile::new().unwrap();
    assert!(text.contains("nodeSelectorTerms:"));
    std::fs::write(
        bad.path(),
        text.replace("nodeSelectorTerms:", "nodeSelectorTerm:"),
    )
    .unwrap();
    let o = Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(bad.path())
        .output()
        .unwrap();
    assert!(!o.status.success(), "a misspelt field passed");
    // Where helm is installed (it is not packaged for this machine's
    // registries), the example is what the chart renders with the CI values.
    let chart = repo().join("deploy/helm/hostknob");
    let Ok(t) = Command::new("helm")
        .args(["template", "hostknob", "--namespace", "hostknob", "-f"])
        .arg(chart.join("ci/apply-values.yaml"))
        .arg(&chart)
        .output()
    else {
        println!("helm not installed: the rendered example checked alone");
        return;
    };
    assert!(t.status.success(), "{}", err(&t));
    let docs = |text: &str| -> Vec<Value> {
        serde_yaml::Deserializer::from_str(text)
            .map(|d| Value::deserialize(d).unwrap())
            .filter(|v| !v.is_null())
            .collect()
    };
    assert_eq!(
        docs(&out(&t)),
        example(),
        "apply-example.yaml is not what the chart renders"
    );
}

/// A projected volume as the kubelet lays it out: the files in a dated
/// directory, `..data` linking to it, each top-level name a link through
/// `..data`. Called again, it swaps `..data` to a new dated directory, as
/// an update of the ConfigMap does.
fn projected(dir: &Path, files: &[(String, String)], generation: u32) {
    let dated = dir.join(format!("..2026_12_01_00_00_0{generation}.000000001"));
    for (k, v) in files {
        let p = dated.join(k);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    }
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(dated.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for (k, _) in files {
        let top = k.split('/').next().unwrap();
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(top), link).unwrap();
        }
    }
}

/// The pod's loop, started on `host` with its `manifest` volume; `bin/sleep`
/// counts rounds in `rounds` and waits for `go` before the next.
struct PodLoop {
    child: std::process::Child,
    dir: PathBuf,
}

impl PodLoop {
    fn start(ds: &Value, host: &Path, manifest: &Path, dir: &Path) -> PodLoop {
        let c = &ds["spec"]["template"]["spec"]["containers"][0];
        let bin_dir = dir.join("bin");
        std::fs::create_dir(&bin_dir).unwrap();
        std::os::unix::fs::symlink(bin(), bin_dir.join("hostknob")).unwrap();
        let sleep = format!(
            "#!/bin/sh\necho x >> '{d}/rounds'\nwhile [ ! -e '{d}/go' ]; do /bin/sleep 0.05; done\nrm '{d}/go'\n",
            d = dir.display()
        );
        std::fs::write(bin_dir.join("sleep"), sleep).unwrap();
        std::fs::set_permissions(
            bin_dir.join("sleep"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let mut cmd = crate::fleet_k8s::pod_command(c, &bin_dir, host, manifest);
        cmd.env("HOSTKNOB_TEST_OPEN_LOG", dir.join("opened"));
        let out = std::fs::File::create(dir.join("stdout")).unwrap();
        let errf = std::fs::File::create(dir.join("stderr")).unwrap();
        let child = cmd
            .current_dir(fresh_cwd())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(errf)
            .spawn()
            .unwrap();
        PodLoop {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// Waits until `n` rounds have ended; (stdout, stderr) so far.
    fn rounds(&self, n: usize) -> (String, String) {
        let start = Instant::now();
        let done =
            || std::fs::read_to_string(self.dir.join("rounds")).map_or(0, |t| t.lines().count());
        while done() < n && start.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(done(), n, "round {n} did not end: {:?}", self.output());
        self.output()
    }

    fn output(&self) -> (String, String) {
        let r = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        (r("stdout"), r("stderr"))
    }

    fn next(&self) {
        std::fs::write(self.dir.join("go"), "").unwrap();
    }

    /// SIGTERM, as the kubelet sends it; the exit status and output.
    fn stop(mut self) -> (std::process::ExitStatus, String, String) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        let (o, e) = self.output();
        (status, o, e)
    }
}

fn governors(host: &Path) -> Vec<(String, String)> {
    let dir = host.join("sys/devices/system/cpu/cpufreq");
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("scaling_governor").exists())
        .map(|p| {
            let r = |f: &str| {
                std::fs::read_to_string(p.join(f))
                    .unwrap()
                    .trim()
                    .to_string()
            };
            (r("scaling_governor"), r("energy_performance_preference"))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn the_apply_pods_loop_applies_the_profile_leaves_the_cmdline_pending_and_reverts() {
    let all = example();
    let ds = doc(&all, "DaemonSet", "hostknob-apply-latency");
    let (_keep, host) = copy_host("adl0");
    give_debian_grub(&host);
    let before = tree(&host);
    assert_eq!(
        governors(&host),
        [("powersave".into(), "balance_performance".into())]
    );
    // The volume as the projected ConfigMaps lay it, with a kernel-cmdline
    // knob added to the manifest and to the chart's profile.
    let cmdline = "id: nohz-full\ntitle: No timer tick on the isolated CPUs\nwhy: w\n\
                   kind: kernel-cmdline\nset: {add: [\"nohz_full=2-3\"]}\nhosts: \"*\"\npersistence: cmdline\n";
    let map = |v: &Value| -> Mapping { v["data"].as_mapping().unwrap().clone() };
    let mut files: Vec<(String, String)> = map(doc(&all, "ConfigMap", "hostknob-manifest"))
        .iter()
        .map(|(k, v)| (s(k).to_string(), s(v).to_string()))
        .collect();
    files.push(("nohz-full.yaml".into(), cmdline.into()));
    let profile =
        s(&map(doc(&all, "ConfigMap", "hostknob-profiles"))[&Value::from("latency.yaml")])
            .to_string();
    assert!(
        profile.contains("  - cpufreq-governor-performance\n"),
        "{profile}"
    );
    let with_cmdline = format!("{profile}  - nohz-full\n");
    let pod = tempfile::tempdir().unwrap();
    let manifest = pod.path().join("manifest");
    let mut first = files.clone();
    first.push(("profiles/latency.yaml".into(), with_cmdline.clone()));
    projected(&manifest, &first, 1);

    let run = PodLoop::start(ds, &host, &manifest, pod.path());
    let (stdout, stderr) = run.rounds(1);
    assert_eq!(
        governors(&host),
        [("performance".into(), "performance".into())],
        "{stdout}{stderr}"
    );
    assert!(
        stdout.contains("nohz-full: not applied by the pod: pending reboot"),
        "{stdout}"
    );
    assert!(!stderr.contains("exited"), "{stderr}");
    // The boot loader's files are as they were: only /sys changed.
    let now = tree(&host);
    let changed: Vec<&PathBuf> = now
        .iter()
        .filter(|(p, n)| before.get(*p) != Some(*n))
        .map(|(p, _)| p)
        .collect();
    assert!(!changed.is_empty());
    assert!(
        changed
            .iter()
            .all(|p| p.starts_with("sys/devices/system/cpu/cpufreq")),
        "{changed:?}"
    );

    // The ConfigMap's update drops the governor from the profile: the next
    // round reverts it (EPP stays, as the profile still asks).
    let mut second = files.clone();
    second.push((
        "profiles/latency.yaml".into(),
        with_cmdline.replace("  - cpufreq-governor-performance\n", ""),
    ));
    projected(&manifest, &second, 2);
    run.next();
    let (stdout, stderr) = run.rounds(2);
    assert_eq!(
        governors(&host),
        [("powersave".into(), "performance".into())],
        "{stdout}{stderr}"
    );
    assert!(
        stdout.contains("cpufreq-governor-performance: reverted: no longer in the profile"),
        "{stdout}"
    );

    // SIGTERM (the label or the values' entry gone): every change reverted.
    let (status, stdout, stderr) = run.stop();
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    assert_tree(&before, &host, "the apply pod after SIGTERM");
    assert!(
        apply::journal(&host).is_empty(),
        "the journal is empty again"
    );
    // Every host path the loop asked for is mounted, or declared unseen.
    let mounts: Vec<String> = ds["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.get("hostPath"))
        .map(|h| s(&h["path"]).to_string())
        .collect();
    let opened = std::fs::read_to_string(pod.path().join("opened")).unwrap();
    let stray: Vec<&str> = opened
        .lines()
        .filter(|p| !crate::fleet_pod::shown(&mounts, p) && entry_of(POD_UNSEEN, p).is_none())
        .collect();
    assert!(
        stray.is_empty(),
        "read by the apply pod, neither mounted nor in root::POD_UNSEEN: {stray:#?}"
    );
}
