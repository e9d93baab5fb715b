//! Packaging (issue 20 item 16): the .deb of a static hostknob declares the
//! glibc it was built with. `dist/package.sh` needs cargo-deb (dist/ci-fleet.sh
//! builds, checks and installs the real package); here `dist/deb-depends.sh`
//! runs on packages made with dpkg-deb the way cargo-deb lays them out.

use std::path::Path;
use std::process::Command;

use crate::support::*;

fn dpkg_deb(args: &[&str]) -> String {
    let o = Command::new("dpkg-deb")
        .args(args)
        .output()
        .expect("dpkg-deb (Debian package dpkg)");
    assert!(o.status.success(), "dpkg-deb {args:?}: {}", err(&o));
    out(&o)
}

/// A package as cargo-deb writes one for a static binary: `Depends:` empty,
/// an /etc file as a conffile.
fn package(dir: &Path, depends: &str) -> std::path::PathBuf {
    let pkg = dir.join("pkg");
    std::fs::create_dir_all(pkg.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(pkg.join("usr/bin")).unwrap();
    std::fs::create_dir_all(pkg.join("etc/hostknob/manifest")).unwrap();
    std::fs::write(pkg.join("usr/bin/hostknob"), "binary").unwrap();
    std::fs::write(pkg.join("etc/hostknob/manifest/README"), "readme").unwrap();
    std::fs::write(
        pkg.join("DEBIAN/control"),
        format!(
            "Package: hostknob\nVersion: 0.1.0-1\nArchitecture: amd64\n\
             Maintainer: hostknob developers <hostknob@example.invalid>\n\
             Installed-Size: 1\nDepends: {depends}\nSection: admin\n\
             Description: Inventory, audit, tune and verify\n hostknob inventories a host.\n"
        ),
    )
    .unwrap();
    std::fs::write(
        pkg.join("DEBIAN/conffiles"),
        "/etc/hostknob/manifest/README\n",
    )
    .unwrap();
    let deb = dir.join("hostknob_0.1.0-1_amd64.deb");
    dpkg_deb(&[
        "--root-owner-group",
        "--build",
        pkg.to_str().unwrap(),
        deb.to_str().unwrap(),
    ]);
    deb
}

fn deb_depends(deb: &Path, glibc: Option<&str>) -> std::process::Output {
    let mut c = Command::new("bash");
    c.arg(repo().join("dist/deb-depends.sh")).arg(deb);
    c.args(glibc);
    c.output().unwrap()
}

fn this_glibc() -> String {
    let o = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .unwrap();
    out(&o).trim().strip_prefix("glibc ").unwrap().to_string()
}

#[test]
fn the_deb_of_a_static_binary_depends_on_the_glibc_it_was_built_with() {
    let dir = tempfile::tempdir().unwrap();
    let deb = package(dir.path(), "");
    assert_eq!(dpkg_deb(&["-f", deb.to_str().unwrap(), "Depends"]), "\n");
    let o = deb_depends(&deb, None);
    assert!(o.status.success(), "{}", err(&o));
    let glibc = this_glibc();
    assert_eq!(
        dpkg_deb(&["-f", deb.to_str().unwrap(), "Depends"]).trim(),
        format!("libc6 (>= {glibc})")
    );
    // The rest of the package is as it was: fields, payload, conffiles.
    let info = dpkg_deb(&["-I", deb.to_str().unwrap()]);
    assert!(
        info.contains(
            " Description: Inventory, audit, tune and verify\n  hostknob inventories a host.\n"
        ) && info.contains(" Section: admin\n")
            && info.contains(" conffiles"),
        "{info}"
    );
    let files = dpkg_deb(&["-c", deb.to_str().unwrap()]);
    assert!(
        files.contains("root/root") && files.contains("./usr/bin/hostknob"),
        "{files}"
    );
    // Run again, or on a dynamic build's package that names libc6: unchanged.
    let before = std::fs::read(&deb).unwrap();
    assert!(deb_depends(&deb, None).status.success());
    assert_eq!(std::fs::read(&deb).unwrap(), before);

    let dir = tempfile::tempdir().unwrap();
    let deb = package(dir.path(), "libgcc-s1 (>= 4.2)");
    assert!(deb_depends(&deb, Some("2.41")).status.success());
    assert_eq!(
        dpkg_deb(&["-f", deb.to_str().unwrap(), "Depends"]).trim(),
        "libgcc-s1 (>= 4.2), libc6 (>= 2.41)"
    );
    // No version to declare: refused, the package untouched.
    let before = std::fs::read(&deb).unwrap();
    let o = deb_depends(&deb, Some("unknown"));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("nothing was changed"), "{}", err(&o));
    assert_eq!(std::fs::read(&deb).unwrap(), before);
}
