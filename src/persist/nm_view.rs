//! NetworkManager's view of a NIC knob persisted by a `.link` file: the
//! `nmcli` command that sets the same values in the connection that manages
//! the interface, and a keyfile line that disagrees with them.

use crate::ethtool::{Field, Section};
use crate::knob::HostCtx;
use crate::peers::network_manager::{self as nm, Keyfile};
use crate::peers::udev::Device;

pub struct View {
    /// `nmcli connection modify ID ethtool.PROP VALUE ...`, every word
    /// shell-quoted; `None` when NetworkManager has no property for any value.
    pub command: Option<String>,
    /// A keyfile line setting one of the properties to another value.
    pub clash: Option<String>,
    /// The values NetworkManager has no property for, said, never printed.
    pub missing: Vec<String>,
    /// The oldest NetworkManager whose nmcli takes every property of `command`.
    pub needs: Option<&'static str>,
}

/// The keyfile of the connection bound to `dev` (by name, current or
/// permanent MAC).
pub fn connection(host: &HostCtx, dev: &Device) -> Option<Keyfile> {
    let macs: Vec<&str> = [&dev.mac, &dev.permanent_mac]
        .into_iter()
        .filter_map(|m| m.as_deref())
        .collect();
    nm::connection(host.root, &dev.name, &macs)
}

/// `on`/`off`/a number as nmcli takes it, and as a keyfile holds it.
fn values(f: &Field, v: &str) -> (String, String) {
    let nmcli = match (f.section, v) {
        (Section::Features, "on") => "on".to_string(),
        (Section::Features, _) => "off".to_string(),
        (_, "on") => "1".to_string(),
        (_, "off") => "0".to_string(),
        (_, n) => n.to_string(),
    };
    let keyfile = match nmcli.as_str() {
        "on" => "true".to_string(),
        "off" => "false".to_string(),
        n => n.to_string(),
    };
    (nmcli, keyfile)
}

pub fn view(host: &HostCtx, dev: &Device, fields: &[(Field, String)]) -> Option<View> {
    let keyfile = connection(host, dev)?;
    let (path, id) = (&keyfile.path, &keyfile.id);
    let mut args: Vec<String> = Vec::new();
    let mut clash = None;
    let mut missing = Vec::new();
    let mut needs: Option<&'static str> = None;
    for (f, v) in fields {
        let prop = match nm::property(f.section.as_str(), &f.name) {
            Ok(p) => p,
            Err(e) => {
                missing.push(format!(
                    "{e}: the .link file alone keeps {} {}, and NetworkManager leaves it alone",
                    f.ifname, f.name
                ));
                continue;
            }
        };
        let (nmcli, want) = values(f, v);
        for (i, line) in keyfile.text.lines().enumerate() {
            if let Some(set) = line.trim().strip_prefix(&format!("{prop}="))
                && set != want
                && clash.is_none()
            {
                clash = Some(format!(
                    "{path}:{}: NetworkManager's connection {id} sets {prop}={set}, not {want}, \
                     and applies it when the connection activates, after udev's .link file",
                    i + 1
                ));
            }
        }
        if let Some(v) = nm::since(&prop)
            && needs.is_none_or(|n| version(v) > version(n))
        {
            needs = Some(v);
        }
        args.push(format!("ethtool.{prop}"));
        args.push(nmcli);
    }
    let command = (!args.is_empty()).then(|| {
        let mut words = vec!["nmcli", "connection", "modify", id.as_str()];
        words.extend(args.iter().map(String::as_str));
        crate::name::shell_command(&words)
    });
    Some(View {
        command,
        clash,
        missing,
        needs,
    })
}

/// `1.46` as (1, 46), for comparing releases.
fn version(v: &str) -> (u32, u32) {
    let (a, b) = v.split_once('.').unwrap_or((v, "0"));
    (a.parse().unwrap_or(0), b.parse().unwrap_or(0))
}
