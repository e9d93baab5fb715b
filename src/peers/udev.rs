//! systemd-udevd's `.link` files: which one applies to a network device;
//! and its rules' `ATTR{...}=` assignments (another writer of a knob's file).
//!
//! udev reads every `*.link` in [`LINK_DIRS`]; a name in an earlier
//! directory hides the same name in later ones (a masked file, empty or a
//! link to /dev/null, hides it and matches nothing), and the files are taken
//! in lexical order of their names. "The first (in lexical order) of the
//! link files that matches a given device is applied. Note that a default
//! file 99-default.link is shipped by the system" (systemd.link(5)); the
//! rest are never read for that device. A file whose `[Match]` holds no
//! setting is ignored (src/udev/net/link-config.c `link_load_one`: "No valid
//! settings found in the [Match] section, ignoring file").
//!
//! Matching follows src/shared/net-condition.c `net_match_config`: every
//! key given must hold; a list key holds when one of its shell globs
//! matches, and a value starting with `!` inverts the whole list (a device
//! without the value then matches it); an empty assignment (`Path=`) resets
//! the list. Conditions (`Host=`, `Virtualization=`, `KernelCommandLine=`,
//! `Architecture=`) are systemd.unit(5)'s; one hostknob cannot decide from
//! the tree counts as holding, so a file is never wrongly thought not to
//! apply.

use std::collections::BTreeMap;

use crate::root::Root;

pub const LINK_DIRS: [&str; 4] = [
    "/etc/systemd/network",
    "/run/systemd/network",
    "/usr/lib/systemd/network",
    "/lib/systemd/network",
];

/// What udev knows of a network device when it reads the `.link` files.
#[derive(Clone, Debug, Default)]
pub struct Device {
    /// The interface name (`OriginalName=` compares the kernel's name at the
    /// `add` event; hostknob sees today's name).
    pub name: String,
    /// `address` as the kernel prints it, checked ([`parse_mac`]).
    pub mac: Option<String>,
    /// `ETHTOOL_GPERMADDR` (`ethtool -P`), live or from the capture.
    pub permanent_mac: Option<String>,
    /// udev's `ID_PATH` (src/udev/udev-builtin-path_id.c): `pci-0000:17:00.0`.
    pub path: Option<String>,
    /// The PCI function the device sits on (`0000:17:00.0`).
    pub pci: Option<String>,
    pub driver: Option<String>,
    /// `DEVTYPE` when the device has one (`vlan`, `bond`, `bridge`), else the
    /// ARPHRD name (`ether`): src/shared/net-condition.c `link_get_type_string`.
    pub iftype: String,
    /// Whether `DEVTYPE` named the type (a VLAN, bond or bridge: a child or a master).
    pub has_devtype: bool,
    /// The udev properties of its database entry and uevent file.
    pub properties: BTreeMap<String, String>,
}

/// A MAC address as the kernel prints it (net/core/net-sysfs.c `address_show`:
/// `%*phC`, lower-case hex pairs joined by `:`), `len` octets long when the
/// device says (`addr_len`); anything else is refused, naming the file.
pub fn parse_mac(text: &str, len: Option<usize>, file: &str) -> Result<String, String> {
    let t = text.strip_suffix('\n').unwrap_or(text);
    let octets: Vec<&str> = t.split(':').collect();
    let pairs = octets
        .iter()
        .all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()));
    let n_ok = len.is_none_or(|l| l == octets.len()) && (1..=32).contains(&octets.len());
    if !pairs || !n_ok || t.is_empty() {
        let shown: String = t.chars().take(64).collect();
        return Err(format!(
            "{file}: {shown:?} is not a hardware address as the kernel prints one (hex octet \
             pairs joined by `:`{})",
            len.map(|l| format!(", {l} of them")).unwrap_or_default()
        ));
    }
    Ok(t.to_ascii_lowercase())
}

/// The PCI function in a resolved sysfs path (`.../0000:17:00.0/net/ens2f0`).
fn pci_of(devpath: &str) -> Option<String> {
    let is_bdf = |c: &str| {
        let b = c.as_bytes();
        b.len() == 12
            && b[4] == b':'
            && b[7] == b':'
            && b[10] == b'.'
            && c.chars()
                .enumerate()
                .all(|(i, ch)| matches!(i, 4 | 7 | 10) || ch.is_ascii_hexdigit())
    };
    let before_net = devpath.rsplit_once("/net/")?.0;
    before_net
        .split('/')
        .rfind(|c| is_bdf(c))
        .map(str::to_string)
}

/// ARPHRD numbers (include/uapi/linux/if_arp.h) to systemd's names.
fn arphrd_name(t: &str) -> String {
    match t {
        "1" => "ether",
        "32" => "infiniband",
        "512" => "ppp",
        "768" => "tunnel",
        "772" => "loopback",
        "776" => "sit",
        "778" => "ipgre",
        "801" => "ieee80211",
        "65534" => "none",
        other => other,
    }
    .to_string()
}

impl Device {
    /// The device `ifname` as udev sees it, read through `root`.
    pub fn read(root: &Root, ifname: &str) -> Result<Device, String> {
        crate::name::check_ifname(ifname)?;
        let dir = format!("/sys/class/net/{ifname}");
        let text = |f: &str| root.read_trimmed(&format!("{dir}/{f}")).ok().flatten();
        let addr_len = text("addr_len").and_then(|l| l.parse().ok());
        let mac = match root.read_string(&format!("{dir}/address")) {
            Ok(t) => Some(parse_mac(&t, addr_len, &format!("{dir}/address"))?),
            Err(_) => None,
        };
        let devpath = root
            .read_link(&dir)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pci = pci_of(&devpath);
        let state = crate::ethtool::read(root, ifname).ok().flatten();
        let permanent_mac = match state.as_ref().and_then(|s| s.permanent_address.clone()) {
            Some(p) => Some(parse_mac(
                &p,
                addr_len,
                &crate::ethtool::state_path(ifname),
            )?),
            None => None,
        };
        let driver = state.and_then(|s| s.driver).or_else(|| {
            root.read_link(&format!("{dir}/device/driver"))
                .ok()
                .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        });
        let mut properties = BTreeMap::new();
        for line in text("uevent").unwrap_or_default().lines() {
            if let Some((k, v)) = line.split_once('=') {
                properties.insert(k.to_string(), v.to_string());
            }
        }
        if let Some(index) = text("ifindex") {
            let db = root
                .read_string(&format!("/run/udev/data/n{index}"))
                .unwrap_or_default();
            for line in db.lines() {
                if let Some((k, v)) = line.strip_prefix("E:").and_then(|l| l.split_once('=')) {
                    properties.insert(k.to_string(), v.to_string());
                }
            }
        }
        let devtype = properties.get("DEVTYPE").filter(|d| !d.is_empty()).cloned();
        Ok(Device {
            name: ifname.to_string(),
            mac,
            permanent_mac,
            path: pci.as_ref().map(|p| format!("pci-{p}")),
            pci,
            driver,
            has_devtype: devtype.is_some(),
            iftype: devtype.unwrap_or_else(|| arphrd_name(&text("type").unwrap_or_default())),
            properties,
        })
    }
}

/// One `.link` file as udev reads it.
#[derive(Clone, Debug)]
pub struct LinkFile {
    pub path: String,
    /// Its file name: what orders it.
    pub name: String,
    /// `[Match]` keys with their lists, the last assignment's `!` kept.
    matches: BTreeMap<String, (bool, Vec<String>)>,
    /// The lines of its `[Link]` section, comments left out.
    pub link: Vec<String>,
}

const MATCH_KEYS: [&str; 13] = [
    "MACAddress",
    "PermanentMACAddress",
    "OriginalName",
    "Path",
    "Driver",
    "Type",
    "Kind",
    "Property",
    "Host",
    "Virtualization",
    "KernelCommandLine",
    "KernelVersion",
    "Architecture",
];

impl LinkFile {
    pub fn parse(path: &str, text: &str) -> LinkFile {
        let mut matches: BTreeMap<String, (bool, Vec<String>)> = BTreeMap::new();
        let mut link = Vec::new();
        let mut section = String::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with(['#', ';']) {
                continue;
            }
            if line.starts_with('[') {
                section = line.to_string();
                continue;
            }
            match section.as_str() {
                "[Link]" => link.push(line.to_string()),
                "[Match]" => {
                    let Some((k, v)) = line.split_once('=') else {
                        continue;
                    };
                    let (k, v) = (k.trim(), v.trim());
                    if !MATCH_KEYS.contains(&k) {
                        continue;
                    }
                    if v.is_empty() {
                        matches.remove(k);
                        continue;
                    }
                    let (invert, v) = match v.strip_prefix('!') {
                        Some(rest) => (true, rest),
                        None => (false, v),
                    };
                    let entry = matches.entry(k.to_string()).or_default();
                    entry.0 = invert;
                    entry.1.extend(v.split_whitespace().map(str::to_string));
                }
                _ => {}
            }
        }
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        LinkFile {
            path: path.to_string(),
            name,
            matches,
            link,
        }
    }

    /// Whether its `[Match]` holds for `dev` on the host `facts` describes.
    pub fn matches(&self, dev: &Device, facts: &Facts) -> bool {
        if self.matches.is_empty() {
            return false;
        }
        self.matches
            .iter()
            .all(|(key, (invert, list))| key_holds(key, *invert, list, dev, facts))
    }

    /// The `[Match]` keys it uses, for messages: `PermanentMACAddress=…`.
    pub fn match_summary(&self) -> String {
        self.matches
            .iter()
            .map(|(k, (inv, l))| format!("{k}={}{}", if *inv { "!" } else { "" }, l.join(" ")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// fnmatch(3) without flags: `*`, `?` and `[...]` (with `!` or `^`).
pub fn glob(pattern: &str, text: &str) -> bool {
    fn rec(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|i| rec(&p[1..], &t[i..])),
            Some('?') => !t.is_empty() && rec(&p[1..], &t[1..]),
            Some('[') => {
                let Some(end) = p.iter().skip(2).position(|&c| c == ']').map(|e| e + 2) else {
                    return !t.is_empty() && t[0] == '[' && rec(&p[1..], &t[1..]);
                };
                let Some(&c) = t.first() else { return false };
                let (neg, set) = match p[1] {
                    '!' | '^' => (true, &p[2..end]),
                    _ => (false, &p[1..end]),
                };
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= c && c <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == c;
                        i += 1;
                    }
                }
                hit != neg && rec(&p[end + 1..], &t[1..])
            }
            Some('\\') if p.len() > 1 => !t.is_empty() && t[0] == p[1] && rec(&p[2..], &t[1..]),
            Some(&c) => !t.is_empty() && t[0] == c && rec(&p[1..], &t[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    rec(&p, &t)
}

/// `net_condition_test_strv`: a glob of the list matches (none inverted),
/// or none matches (inverted); a device without the value fails a plain
/// list and passes an inverted one.
fn strv(invert: bool, list: &[String], value: Option<&str>) -> bool {
    let hit = value.is_some_and(|v| list.iter().any(|p| glob(p, v)));
    hit != invert
}

fn key_holds(key: &str, invert: bool, list: &[String], dev: &Device, facts: &Facts) -> bool {
    let mac_in = |mac: &Option<String>| {
        mac.as_ref()
            .is_some_and(|m| list.iter().any(|l| l.eq_ignore_ascii_case(m)))
    };
    match key {
        "MACAddress" => mac_in(&dev.mac),
        "PermanentMACAddress" => mac_in(&dev.permanent_mac),
        "OriginalName" => strv(invert, list, Some(&dev.name)),
        "Path" => strv(invert, list, dev.path.as_deref()),
        "Driver" => strv(invert, list, dev.driver.as_deref()),
        "Type" => strv(invert, list, Some(&dev.iftype)),
        // IFLA_INFO_KIND: a physical NIC has none; VLAN, bond and bridge
        // devices carry their DEVTYPE as kind too.
        "Kind" => strv(invert, list, dev.has_devtype.then_some(dev.iftype.as_str())),
        "Property" => list.iter().all(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, "*"));
            let hit = dev.properties.get(k).is_some_and(|have| glob(v, have));
            hit != invert
        }),
        _ => facts.condition(key, invert, list),
    }
}

/// What the conditions of a `.link` file ask about the host.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub hostname: Option<String>,
    pub machine_id: Option<String>,
    pub cmdline: Option<String>,
    /// `Some(true)` in a virtual machine (the CPU's `hypervisor` flag).
    pub virtualized: Option<bool>,
    /// systemd's architecture name (`x86-64`, `arm64`).
    pub architecture: Option<String>,
}

impl Facts {
    pub fn read(root: &Root) -> Facts {
        let text = |p: &str| root.read_trimmed(p).ok().flatten();
        let cpuinfo = text("/proc/cpuinfo");
        let virtualized = cpuinfo.as_deref().map(|c| {
            c.lines()
                .any(|l| l.starts_with("flags") && l.contains(" hypervisor"))
        });
        let architecture = cpuinfo.as_deref().and_then(|c| {
            if c.contains("vendor_id") {
                Some("x86-64".to_string())
            } else if c.contains("CPU implementer") {
                Some("arm64".to_string())
            } else {
                None
            }
        });
        Facts {
            hostname: text("/proc/sys/kernel/hostname"),
            machine_id: text("/etc/machine-id"),
            cmdline: text("/proc/cmdline"),
            virtualized,
            architecture,
        }
    }

    /// A condition's verdict; one it cannot decide holds.
    fn condition(&self, key: &str, invert: bool, list: &[String]) -> bool {
        let decided = match key {
            "Host" => self.hostname.as_ref().map(|h| {
                list.iter().any(|p| {
                    glob(p, h) || self.machine_id.as_deref().is_some_and(|m| p.as_str() == m)
                })
            }),
            "KernelCommandLine" => self.cmdline.as_ref().map(|c| {
                list.iter().any(|p| {
                    c.split_whitespace().any(|w| {
                        w == p
                            || (!p.contains('=') && w.split_once('=').is_some_and(|(k, _)| k == p))
                    })
                })
            }),
            "Virtualization" => self.virtualized.and_then(|vm| {
                list.iter()
                    .map(|p| match p.as_str() {
                        "yes" | "true" | "1" | "vm" => Some(vm),
                        "no" | "false" | "0" => Some(!vm),
                        _ => None,
                    })
                    .try_fold(false, |acc, v| v.map(|v| acc || v))
            }),
            "Architecture" => self
                .architecture
                .as_ref()
                .map(|a| list.iter().any(|p| p == a)),
            _ => None,
        };
        decided.is_none_or(|d| d != invert)
    }
}

/// The files of `dirs` ending in `suffix`, in lexical order of their names,
/// a name in an earlier directory hiding the same name in later ones (as
/// udev reads both its rules and its `.link` files).
pub(crate) fn by_name(root: &Root, dirs: &[&str], suffix: &str) -> Vec<String> {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    for dir in dirs {
        for name in root.read_dir(dir).unwrap_or_default() {
            if name.ends_with(suffix) {
                by_name
                    .entry(name.clone())
                    .or_insert_with(|| format!("{dir}/{name}"));
            }
        }
    }
    by_name.into_values().collect()
}

/// Every `.link` file of the host in udev's order, hidden and masked ones
/// left out.
pub fn link_files(root: &Root) -> Vec<LinkFile> {
    by_name(root, &LINK_DIRS, ".link")
        .into_iter()
        .filter_map(|path| {
            let text = root.read_string(&path).ok()?;
            (!text.trim().is_empty()).then(|| LinkFile::parse(&path, &text))
        })
        .collect()
}

/// udev's rules directories (udev(7)), earlier ones first.
pub const RULES_DIRS: [&str; 4] = [
    "/etc/udev/rules.d",
    "/run/udev/rules.d",
    "/usr/lib/udev/rules.d",
    "/lib/udev/rules.d",
];

/// An `ATTR{...}=` assignment of a udev rule: udev writes that attribute
/// of the device when the rule matches (another manager of a knob's file).
pub struct AttrAssignment {
    pub file: String,
    pub line: usize,
    pub attr: String,
    pub value: String,
}

/// Every `ATTR{...}=` assignment of the host's udev rules.
pub fn attr_assignments(root: &Root) -> Vec<AttrAssignment> {
    let mut out = Vec::new();
    for file in by_name(root, &RULES_DIRS, ".rules") {
        let Ok(text) = root.read_string(&file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            for (attr, value) in rule_assignments(line) {
                out.push(AttrAssignment {
                    file: file.clone(),
                    line: i + 1,
                    attr,
                    value,
                });
            }
        }
    }
    out
}

/// `ATTR{power/control}="on"` assignments in a udev rule line (not `==` matches).
fn rule_assignments(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("ATTR{") {
        let after = &rest[i + 5..];
        let Some(end) = after.find('}') else { break };
        let attr = &after[..end];
        let tail = after[end + 1..].trim_start();
        rest = &after[end + 1..];
        let tail = tail.strip_prefix(':').unwrap_or(tail);
        if let Some(v) = tail.strip_prefix('=')
            && !v.starts_with('=')
        {
            let v = v.trim_start();
            let value = v
                .strip_prefix('"')
                .and_then(|q| q.split('"').next())
                .unwrap_or(v.split([',', ' ']).next().unwrap_or(""));
            out.push((attr.to_string(), value.to_string()));
        }
    }
    out
}

/// The file udev applies to `dev`: the first in order whose `[Match]`
/// holds, `except` one name (a file hostknob would replace) left out.
pub fn applying<'a>(
    files: &'a [LinkFile],
    dev: &Device,
    facts: &Facts,
    except: Option<&str>,
) -> Option<&'a LinkFile> {
    files
        .iter()
        .filter(|f| Some(f.name.as_str()) != except)
        .find(|f| f.matches(dev, facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic() -> Device {
        Device {
            name: "ens2f0".into(),
            mac: Some("02:00:00:00:00:01".into()),
            permanent_mac: Some("b4:96:91:17:00:00".into()),
            path: Some("pci-0000:17:00.0".into()),
            pci: Some("0000:17:00.0".into()),
            driver: Some("ice".into()),
            iftype: "ether".into(),
            ..Device::default()
        }
    }

    fn m(text: &str) -> bool {
        LinkFile::parse(
            "/x/10-a.link",
            &format!("[Match]\n{text}\n[Link]\nName=x\n"),
        )
        .matches(&nic(), &Facts::default())
    }

    #[test]
    fn match_keys_as_systemd_evaluates_them() {
        assert!(m("PermanentMACAddress=B4:96:91:17:00:00"));
        assert!(
            !m("MACAddress=b4:96:91:17:00:00"),
            "the current MAC differs"
        );
        assert!(m("MACAddress=aa:bb:cc:dd:ee:ff 02:00:00:00:00:01"));
        assert!(m("OriginalName=ens*"));
        assert!(!m("OriginalName=!ens*"));
        assert!(m("Path=pci-0000:17:*"));
        assert!(m("Driver=ice i40e\nType=ether"));
        assert!(!m("Type=vlan"));
        assert!(m("Kind=!vlan bond bridge"), "a NIC has no kind");
        assert!(!m("Kind=vlan"));
        assert!(
            m("Driver=mlx5*\nDriver=\nType=ether"),
            "an empty assignment resets"
        );
        assert!(
            !m("Driver=mlx5*\nDriver="),
            "and a [Match] left empty is ignored"
        );
        assert!(!m("Driver=mlx5* ice\nPath=pci-0000:3b:*"));
        assert!(m("Virtualization=no"), "undecidable conditions hold");
        assert!(
            !LinkFile::parse("/x/a.link", "[Match]\n[Link]\nName=y\n")
                .matches(&nic(), &Facts::default())
        );
        let vm = Facts {
            virtualized: Some(true),
            cmdline: Some("ro net.ifnames=0 quiet".into()),
            ..Facts::default()
        };
        let f = |t: &str| LinkFile::parse("/x/a.link", &format!("[Match]\n{t}\n"));
        assert!(!f("Virtualization=no").matches(&nic(), &vm));
        assert!(f("Virtualization=yes").matches(&nic(), &vm));
        assert!(f("KernelCommandLine=net.ifnames").matches(&nic(), &vm));
        assert!(!f("KernelCommandLine=!net.ifnames=0").matches(&nic(), &vm));
    }

    #[test]
    fn globs_as_fnmatch() {
        assert!(glob("en[a-z]?f*", "ens2f0"));
        assert!(!glob("en[!s]*", "ens2f0"));
        assert!(glob("*", ""));
        assert!(!glob("eth?", "eth10"));
    }

    #[test]
    fn macs_as_the_kernel_prints_them() {
        assert_eq!(
            parse_mac("B4:96:91:17:00:00\n", Some(6), "f").unwrap(),
            "b4:96:91:17:00:00"
        );
        for bad in [
            "b4:96:91:17:00:00\", RUN+=\"/bin/sh\"",
            "b4:96:91:17:00:00\n[Link]\nName=x",
            "b4:96:91:17:00",
            "b4-96-91-17-00-00",
            "",
            "b4:96:91:17:00:0g",
        ] {
            let e = parse_mac(bad, Some(6), "/sys/class/net/x/address").unwrap_err();
            assert!(e.starts_with("/sys/class/net/x/address: "), "{e}");
        }
    }

    #[test]
    fn rule_assignments_only() {
        let l = r#"SUBSYSTEM=="cpu", ATTR{online}=="1", ATTR{power/pm_qos_resume_latency_us}="20", ATTR{cpufreq/scaling_governor}:="performance""#;
        assert_eq!(
            rule_assignments(l),
            vec![
                (
                    "power/pm_qos_resume_latency_us".to_string(),
                    "20".to_string()
                ),
                (
                    "cpufreq/scaling_governor".to_string(),
                    "performance".to_string()
                )
            ]
        );
    }
}
