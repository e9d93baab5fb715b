//! Packaging (issue 35 item 2): the released binaries need no C library of
//! the host, so the .deb and the RPM depend on none and install on any
//! distribution; one version across the crate, the packages, the Ansible
//! collection and the chart (item 10). `dist/ci-fleet.sh` builds the real
//! package, checks its metadata and payload with dpkg-deb, readelf and
//! lintian, installs it and removes it.

use std::process::Command;

use crate::support::*;

/// The C library's NSS lookups. A static glibc binary that calls any of them
/// loads the host's `libnss_*.so` modules at run time, which must match the
/// glibc it was built with: the reason the packages used to depend on one.
const NSS_LOOKUPS: &[&str] = &[
    "getpwnam",
    "getpwnam_r",
    "getpwuid",
    "getpwuid_r",
    "getpwent_r",
    "getgrnam_r",
    "getgrgid_r",
    "getgrouplist",
    "initgroups",
    "getaddrinfo",
    "getnameinfo",
    "gethostbyname",
    "gethostbyname_r",
    "gethostbyname2_r",
    "gethostbyaddr_r",
    "getservbyname_r",
    "__nss_lookup_function",
    "__nss_next2",
    "__nss_passwd_lookup2",
    "__nss_group_lookup2",
    "__nss_hosts_lookup2",
];

fn jemalloc_bin() -> &'static str {
    env!("CARGO_BIN_EXE_hostknob-jemalloc")
}

/// Functions `nm` lists as defined in `path` (text symbols), glibc's
/// internal `__` and `__new_` spellings folded onto the public name.
fn defined_functions(path: &str) -> Vec<String> {
    let o = Command::new("nm")
        .arg(path)
        .output()
        .expect("nm (binutils)");
    assert!(o.status.success(), "nm {path}: {}", err(&o));
    out(&o)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let name = f.next()?;
            let kind = f.next()?;
            matches!(kind, "T" | "t" | "W" | "i").then(|| {
                let public = name.strip_prefix("__new_").unwrap_or(name);
                public.trim_start_matches("__").to_string()
            })
        })
        .collect()
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn the_released_binaries_are_static_and_make_no_nss_lookup() {
    for path in [bin(), jemalloc_bin()] {
        let o = Command::new("readelf")
            .arg("-ld")
            .arg(path)
            .output()
            .unwrap();
        assert!(o.status.success(), "readelf {path}: {}", err(&o));
        let elf = out(&o);
        assert!(
            !elf.contains("INTERP") && !elf.contains("(NEEDED)"),
            "{path} names an interpreter or a shared library:\n{elf}"
        );
        let defined = defined_functions(path);
        assert!(
            defined.iter().any(|f| f == "main"),
            "{path}: nm lists no main; the symbol table is not what this test reads"
        );
        let lookups: Vec<&str> = NSS_LOOKUPS
            .iter()
            .map(|l| l.trim_start_matches("__"))
            .filter(|l| defined.iter().any(|f| f == l))
            .collect();
        assert!(
            lookups.is_empty(),
            "{path} links NSS lookups {lookups:?}: it would load the host's libnss modules"
        );
    }
}

/// The first `version` of a YAML file's top level.
fn yaml_version(rel: &str, key: &str) -> String {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap();
    let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{rel}: no {key}"))
        .to_string()
}

#[test]
fn the_binary_the_packages_the_collection_and_the_chart_carry_one_version() {
    let crate_version = env!("CARGO_PKG_VERSION");
    let o = Command::new(bin()).arg("--version").output().unwrap();
    assert_eq!(out(&o).trim(), format!("hostknob {crate_version}"));
    let galaxy = "ansible/ansible_collections/hostknob/hostknob/galaxy.yml";
    assert_eq!(yaml_version(galaxy, "version"), crate_version, "{galaxy}");
    let chart = "deploy/helm/hostknob/Chart.yaml";
    assert_eq!(yaml_version(chart, "appVersion"), crate_version, "{chart}");
    // The rendered DaemonSet runs the image of that version.
    let ds = std::fs::read_to_string(repo().join("deploy/kubernetes/daemonset.yaml")).unwrap();
    assert!(
        ds.contains(&format!("image: \"hostknob:{crate_version}\"")),
        "deploy/kubernetes/daemonset.yaml"
    );
    // cargo deb names the package VERSION-1; its changelog's newest entry must
    // be that revision (lintian).
    let changelog = std::fs::read_to_string(repo().join("dist/debian/changelog")).unwrap();
    let first = changelog.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("hostknob ({crate_version}-1) ")),
        "dist/debian/changelog: {first}"
    );
}
