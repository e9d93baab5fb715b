//! The shipped `manifest/` is an example anyone can ship (issue 38, item 6):
//! file names are ids, no knob is aimed at a real host by accident, and no
//! lab's history rides along.

use crate::support::*;
use hostknob::manifest::HostSel;
use std::path::Path;

fn shipped() -> hostknob::manifest::Manifest {
    hostknob::manifest::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("manifest"))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_shipped_file_is_named_after_its_knob() {
    let m = shipped();
    assert!(m.knobs.len() >= 5, "{} knobs", m.knobs.len());
    for k in &m.knobs {
        let name = k.source.file.file_name().unwrap().to_string_lossy();
        assert_eq!(
            name,
            format!("{}.yaml", k.id),
            "{}",
            k.source.file.display()
        );
        assert_eq!(k.source.first_line, 1, "{}: one knob per file", k.id);
    }
}

/// The names a real host here has: every corpus capture (its tarball name,
/// its hostname file and its capture metadata) and this machine.
fn real_host_names() -> Vec<String> {
    let mut names = vec!["vm".to_string()];
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        names.push(h.trim().to_string());
    }
    for host in corpus_hosts() {
        let tree = corpus_host(&host);
        if let Ok(h) = std::fs::read_to_string(tree.join("proc/sys/kernel/hostname")) {
            names.push(h.trim().to_string());
        }
        if let Ok(meta) = std::fs::read_to_string(tree.join("hostknob-capture.yaml")) {
            let v: serde_yaml::Value = serde_yaml::from_str(&meta).unwrap();
            if let Some(h) = v["host"].as_str() {
                names.push(h.to_string());
            }
        }
        names.push(host);
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn no_shipped_knob_names_a_real_host_or_carries_a_labs_history() {
    let names = real_host_names();
    assert!(names.len() > 40, "{names:?}");
    for k in &shipped().knobs {
        if let HostSel::Names(patterns) = &k.hosts {
            for n in &names {
                assert!(
                    !k.hosts.matches(n),
                    "{}: hosts {patterns:?} matches the real host {n:?}",
                    k.id
                );
            }
        }
        assert!(
            k.history.is_empty(),
            "{}: a lab's history in the shipped catalog",
            k.id
        );
        for lab in ["rpc-ap", "fc-haltpoll"] {
            assert!(!k.source.text.contains(lab), "{}: mentions {lab}", k.id);
        }
    }
}
