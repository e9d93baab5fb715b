//! A network interface's ethtool state: driver information, channels,
//! coalescing, rings and offload features, as `ethtool -i/-l/-c/-g/-k`
//! show them.
//!
//! On the live host they come from the `SIOCETHTOOL` ioctl ([`ioctl`]; why
//! not netlink: CONTRIBUTING.md). A capture holds them as one YAML file per
//! interface, [`state_path`], which `capture` writes and the NIC knob kinds
//! change under `--root`, so inventory, audit, apply and revert work offline.
//!
//! One value is addressed by a locator of its own, [`Field::path`]
//! (`ethtool:eth0/channels/combined`, no file: `ethtool -l eth0` shows it):
//! apply's write layer reads and writes it through [`content`] and [`set`].

pub mod channels;
pub mod ioctl;
pub mod queues;

use std::collections::BTreeMap;
use std::io;

use serde::{Deserialize, Serialize};

use crate::root::{Root, is_absent};

/// Where a capture keeps the ethtool state of its interfaces.
pub const CAPTURE_DIR: &str = "/hostknob-capture/ethtool";

/// The state file of `ifname` in a captured tree.
pub fn state_path(ifname: &str) -> String {
    format!("{CAPTURE_DIR}/{ifname}.yaml")
}

/// A current value and the driver's pre-set maximum (`ethtool -l`, `-g`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub current: u32,
    pub max: u32,
}

/// `ethtool -l`: queues (channels) per type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Channels {
    pub rx: Pair,
    pub tx: Pair,
    pub other: Pair,
    pub combined: Pair,
}

/// `ethtool -g`: descriptors per ring.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Rings {
    pub rx: Pair,
    pub rx_mini: Pair,
    pub rx_jumbo: Pair,
    pub tx: Pair,
}

/// One interface's ethtool state. `None` in a section: the driver does not
/// support it (the ioctl's `EOPNOTSUPP`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct State {
    /// `ethtool -i`; `None` for an interface without driver information (`lo`).
    pub driver: Option<String>,
    pub version: Option<String>,
    pub firmware_version: Option<String>,
    pub bus_info: Option<String>,
    pub channels: Option<Channels>,
    /// `ethtool -c` by its names (`rx-usecs`, `adaptive-rx` as 0 or 1).
    /// The ioctl cannot tell a field the driver ignores from a 0.
    pub coalesce: Option<BTreeMap<String, u32>>,
    pub rings: Option<Rings>,
    /// `ethtool -k` by the kernel's feature names, in its words: `on`,
    /// `off [fixed]` (the driver cannot change it), `on [requested off]`.
    pub features: Option<BTreeMap<String, String>>,
    /// `ethtool -P` (`ETHTOOL_GPERMADDR`) as the kernel prints a MAC; absent
    /// where the driver set none, and in captures older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permanent_address: Option<String>,
}

/// `struct ethtool_coalesce` after `cmd`, by `ethtool -c`'s names.
pub const COALESCE_FIELDS: [&str; 22] = [
    "rx-usecs",
    "rx-frames",
    "rx-usecs-irq",
    "rx-frames-irq",
    "tx-usecs",
    "tx-frames",
    "tx-usecs-irq",
    "tx-frames-irq",
    "stats-block-usecs",
    "adaptive-rx",
    "adaptive-tx",
    "pkt-rate-low",
    "rx-usecs-low",
    "rx-frame-low",
    "tx-usecs-low",
    "tx-frame-low",
    "pkt-rate-high",
    "rx-usecs-high",
    "rx-frame-high",
    "tx-usecs-high",
    "tx-frame-high",
    "sample-interval",
];

/// The channel types of `struct ethtool_channels`, in its order.
pub const CHANNEL_FIELDS: [&str; 4] = ["rx", "tx", "other", "combined"];
/// The rings of `struct ethtool_ringparam`, in its order.
pub const RING_FIELDS: [&str; 4] = ["rx", "rx-mini", "rx-jumbo", "tx"];

impl Channels {
    fn from_words(w: [u32; 8]) -> Channels {
        let p = |i: usize| Pair {
            max: w[i],
            current: w[i + 4],
        };
        Channels {
            rx: p(0),
            tx: p(1),
            other: p(2),
            combined: p(3),
        }
    }

    pub fn get(&self, field: &str) -> Option<Pair> {
        match field {
            "rx" => Some(self.rx),
            "tx" => Some(self.tx),
            "other" => Some(self.other),
            "combined" => Some(self.combined),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, field: &str) -> Option<&mut Pair> {
        match field {
            "rx" => Some(&mut self.rx),
            "tx" => Some(&mut self.tx),
            "other" => Some(&mut self.other),
            "combined" => Some(&mut self.combined),
            _ => None,
        }
    }
}

impl Rings {
    fn from_words(w: [u32; 8]) -> Rings {
        let p = |i: usize| Pair {
            max: w[i],
            current: w[i + 4],
        };
        Rings {
            rx: p(0),
            rx_mini: p(1),
            rx_jumbo: p(2),
            tx: p(3),
        }
    }

    pub fn get(&self, field: &str) -> Option<Pair> {
        match field {
            "rx" => Some(self.rx),
            "rx-mini" => Some(self.rx_mini),
            "rx-jumbo" => Some(self.rx_jumbo),
            "tx" => Some(self.tx),
            _ => None,
        }
    }

    fn get_mut(&mut self, field: &str) -> Option<&mut Pair> {
        match field {
            "rx" => Some(&mut self.rx),
            "rx-mini" => Some(&mut self.rx_mini),
            "rx-jumbo" => Some(&mut self.rx_jumbo),
            "tx" => Some(&mut self.tx),
            _ => None,
        }
    }
}

impl State {
    /// The driver's name in messages.
    pub fn driver_name(&self, ifname: &str) -> String {
        self.driver
            .clone()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| format!("the driver of {ifname}"))
    }
}

/// Whether a feature's word says it is on.
pub fn feature_on(word: &str) -> bool {
    word.starts_with("on")
}

/// Whether the driver cannot change the feature (`[fixed]`).
pub fn feature_fixed(word: &str) -> bool {
    word.contains("[fixed]")
}

/// `None` for an unsupported section, the error otherwise.
fn supported<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The live state of `ifname` through the ioctl.
fn read_live(ifname: &str) -> io::Result<State> {
    let info = supported(ioctl::drvinfo(ifname))?;
    let [driver, version, firmware, bus] = match info {
        Some(i) => i.map(Some),
        None => [None, None, None, None],
    };
    let channels =
        supported(ioctl::words::<8>(ifname, ioctl::GCHANNELS))?.map(Channels::from_words);
    let rings = supported(ioctl::words::<8>(ifname, ioctl::GRINGPARAM))?.map(Rings::from_words);
    let coalesce = supported(ioctl::words::<22>(ifname, ioctl::GCOALESCE))?.map(|w| {
        COALESCE_FIELDS
            .iter()
            .zip(w)
            .map(|(n, v)| (n.to_string(), v))
            .collect()
    });
    let features = supported(ioctl::features(ifname))?.map(|bits| {
        bits.into_iter()
            .filter(|(n, _)| !n.is_empty())
            .map(|(n, b)| {
                let onoff = |on: bool| if on { "on" } else { "off" };
                let mut word = onoff(b.active).to_string();
                if !b.available || b.never_changed {
                    word += " [fixed]";
                } else if b.requested != b.active {
                    word += &format!(" [requested {}]", onoff(b.requested));
                }
                (n, word)
            })
            .collect()
    });
    let permanent_address = match ioctl::perm_addr(ifname) {
        Ok(a) => a.map(|a| {
            a.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        }),
        // Drivers without it answer EOPNOTSUPP; a short buffer ETOOSMALL.
        Err(_) => None,
    };
    Ok(State {
        driver,
        version,
        firmware_version: firmware,
        bus_info: bus,
        channels,
        coalesce,
        rings,
        features,
        permanent_address,
    })
}

/// The ethtool state of `ifname`: live through the ioctl, in a tree from
/// its state file (`Ok(None)`: the capture holds none).
pub fn read(root: &Root, ifname: &str) -> Result<Option<State>, String> {
    if root.is_live() {
        return read_live(ifname)
            .map(Some)
            .map_err(|e| format!("ethtool ioctl on {ifname}: {e}"));
    }
    let path = state_path(ifname);
    match root.read_string(&path) {
        Ok(text) => serde_yaml::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", root.host_path(&path).display())),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(format!("{}: {e}", root.host_path(&path).display())),
    }
}

/// The text of a state file (what `capture` writes).
pub fn to_text(state: &State) -> String {
    serde_yaml::to_string(state).expect("plain data serializes")
}

/// Which settable value a [`Field`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Channels,
    Coalesce,
    Rings,
    Features,
}

impl Section {
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Channels => "channels",
            Section::Coalesce => "coalesce",
            Section::Rings => "rings",
            Section::Features => "features",
        }
    }
}

/// One settable value of one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub ifname: String,
    pub section: Section,
    pub name: String,
}

/// How plans, journals and audit name a value: not a file, so not a path.
const PREFIX: &str = "ethtool:";
/// The pseudo-path older journals hold
/// (`/sys/class/net/IF@ethtool/SECTION/FIELD`): still read, so they revert.
const OLD_MARK: &str = "@ethtool/";

/// An interface name the kernel could have ([`crate::name::check_ifname`]),
/// so a journal line cannot name a file through the locator.
fn dev_valid_name(name: &str) -> bool {
    crate::name::check_ifname(name).is_ok()
}

impl Field {
    pub fn new(ifname: &str, section: Section, name: &str) -> Field {
        Field {
            ifname: ifname.to_string(),
            section,
            name: name.to_string(),
        }
    }

    /// Its locator in plans, journals and messages (`ethtool:eth0/channels/combined`).
    pub fn path(&self) -> String {
        format!(
            "{PREFIX}{}/{}/{}",
            self.ifname,
            self.section.as_str(),
            self.name
        )
    }

    /// The field a locator names, if it is one; the old pseudo-path too.
    pub fn parse(path: &str) -> Option<Field> {
        let (ifname, rest) = match path.strip_prefix(PREFIX) {
            Some(rest) => rest.split_once('/')?,
            None => path.strip_prefix("/sys/class/net/")?.split_once(OLD_MARK)?,
        };
        let (section, name) = rest.split_once('/')?;
        let section = [
            Section::Channels,
            Section::Coalesce,
            Section::Rings,
            Section::Features,
        ]
        .into_iter()
        .find(|s| s.as_str() == section)?;
        (dev_valid_name(ifname) && !name.is_empty() && !name.contains('/'))
            .then(|| Field::new(ifname, section, name))
    }

    /// Its value in `state`, in the words it is written in (`4`, `on`);
    /// `None` when the driver does not have it.
    pub fn value(&self, state: &State) -> Option<String> {
        let n = self.name.as_str();
        match self.section {
            Section::Channels => channels::value(state.channels.as_ref()?, n),
            Section::Rings => state.rings.as_ref()?.get(n).map(|p| p.current.to_string()),
            Section::Coalesce => state.coalesce.as_ref()?.get(n).map(|&v| {
                if n.starts_with("adaptive-") {
                    if v != 0 { "on" } else { "off" }.to_string()
                } else {
                    v.to_string()
                }
            }),
            Section::Features => state
                .features
                .as_ref()?
                .get(n)
                .map(|w| if feature_on(w) { "on" } else { "off" }.to_string()),
        }
    }

    /// The command a person runs to see it without hostknob.
    pub fn check_command(&self) -> String {
        let opt = match self.section {
            Section::Channels => "-l",
            Section::Coalesce => "-c",
            Section::Rings => "-g",
            Section::Features => "-k",
        };
        format!("ethtool {opt} {}", self.ifname)
    }
}

/// The value of `path` (a [`Field::path`]) now; `None` when the interface
/// or the value is gone.
pub fn content(root: &Root, path: &str) -> io::Result<Option<String>> {
    let f = Field::parse(path).ok_or_else(|| invalid(format!("{path} is not an ethtool value")))?;
    let state = match read(root, &f.ifname) {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(None),
        Err(_) if !root.exists(&format!("/sys/class/net/{}", f.ifname)) => return Ok(None),
        Err(e) => return Err(io::Error::other(e)),
    };
    Ok(f.value(&state))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn number(text: &str) -> io::Result<u32> {
    text.trim()
        .parse()
        .map_err(|_| invalid(format!("{text:?} is not a number")))
}

fn onoff(text: &str) -> io::Result<bool> {
    match text.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        t => Err(invalid(format!("{t:?} is not on or off"))),
    }
}

/// A coalescing value as the struct holds it: `adaptive-*` on/off as 1/0.
fn coalesce_number(name: &str, text: &str) -> io::Result<u32> {
    if name.starts_with("adaptive-") {
        return onoff(text).map(u32::from);
    }
    number(text)
}

/// A write of an ethtool value that failed.
#[derive(Debug)]
pub struct SetError {
    pub error: io::Error,
    /// Whether it changed something first: in a tree, the state file was
    /// replaced and the queue directories' sync failed. It must be rolled back.
    pub changed: bool,
}

impl From<io::Error> for SetError {
    fn from(error: io::Error) -> SetError {
        SetError {
            error,
            changed: false,
        }
    }
}

/// Writes `text` to the value `path` names: the ioctl live, the state file
/// in a tree (and, for channels, the queue directories: checked before the
/// state file changes, synced after it).
pub fn set(root: &Root, path: &str, text: &str) -> Result<(), SetError> {
    let f = Field::parse(path).ok_or_else(|| invalid(format!("{path} is not an ethtool value")))?;
    if root.is_live() {
        return Ok(set_live(&f, text)?);
    }
    let file = state_path(&f.ifname);
    let mut state: State = serde_yaml::from_str(&root.read_string(&file)?)
        .map_err(|e| invalid(format!("{file}: {e}")))?;
    let missing = || io::Error::from_raw_os_error(libc::EOPNOTSUPP);
    let n = f.name.as_str();
    let channels_before = state.channels.clone();
    match f.section {
        Section::Channels => {
            let request = channels::parse(n, text)?;
            let from = state.channels.as_ref().ok_or_else(missing)?;
            if request.iter().any(|(k, _)| from.get(k).is_none()) {
                return Err(missing().into());
            }
            let to = channels::with(from, &request);
            if channels::refused(&to).is_some() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL).into());
            }
            state.channels = Some(to);
        }
        Section::Rings => {
            let p = state
                .rings
                .as_mut()
                .and_then(|r| r.get_mut(n))
                .ok_or_else(missing)?;
            p.current = within(number(text)?, p.max)?;
        }
        Section::Coalesce => {
            let v = state
                .coalesce
                .as_mut()
                .and_then(|c| c.get_mut(n))
                .ok_or_else(missing)?;
            *v = coalesce_number(n, text)?;
        }
        Section::Features => {
            let w = state
                .features
                .as_mut()
                .and_then(|m| m.get_mut(n))
                .ok_or_else(missing)?;
            if feature_fixed(w) {
                return Err(missing().into());
            }
            *w = if onoff(text)? { "on" } else { "off" }.to_string();
        }
    }
    // The kernel adds or removes the queues with the channels.
    let sync = match (&channels_before, &state.channels) {
        (Some(from), Some(to)) if from != to => {
            queues::Queues::open(root, &f.ifname)?.zip(Some(to))
        }
        _ => None,
    };
    root.replace_file(&file, to_text(&state).as_bytes())?;
    if let Some((q, to)) = sync {
        q.sync(to).map_err(|error| SetError {
            error,
            changed: true,
        })?;
    }
    Ok(())
}

/// The kernel's check (net/ethtool/channels.c, rings.c): above the
/// reported maximum is `EINVAL`.
fn within(v: u32, max: u32) -> io::Result<u32> {
    if v > max {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(v)
}

fn set_live(f: &Field, text: &str) -> io::Result<()> {
    let ifname = f.ifname.as_str();
    let index = |names: &[&str]| {
        names
            .iter()
            .position(|n| *n == f.name)
            .ok_or_else(|| invalid(format!("{ifname}: no ethtool value {}", f.name)))
    };
    match f.section {
        // Every field of the request in one ETHTOOL_SCHANNELS: the kernel
        // checks the counts together (channels::refused).
        Section::Channels => {
            let mut w = ioctl::words::<8>(ifname, ioctl::GCHANNELS)?;
            for (k, v) in channels::parse(&f.name, text)? {
                let i = CHANNEL_FIELDS
                    .iter()
                    .position(|n| *n == k)
                    .expect("parse checks the names");
                w[4 + i] = v;
            }
            ioctl::set_words(ifname, ioctl::SCHANNELS, &w)
        }
        Section::Rings => {
            let i = index(&RING_FIELDS)?;
            let mut w = ioctl::words::<8>(ifname, ioctl::GRINGPARAM)?;
            w[4 + i] = number(text)?;
            ioctl::set_words(ifname, ioctl::SRINGPARAM, &w)
        }
        Section::Coalesce => {
            let i = index(&COALESCE_FIELDS)?;
            let mut w = ioctl::words::<22>(ifname, ioctl::GCOALESCE)?;
            w[i] = coalesce_number(&f.name, text)?;
            ioctl::set_words(ifname, ioctl::SCOALESCE, &w)
        }
        Section::Features => ioctl::set_feature(ifname, &f.name, onoff(text)?),
    }
}

/// Whether `path`'s value can be written: root live (`CAP_NET_ADMIN`), the
/// state file in a tree.
pub fn probe_write(root: &Root, path: &str) -> io::Result<()> {
    let f = Field::parse(path).ok_or_else(|| invalid(format!("{path} is not an ethtool value")))?;
    if root.is_live() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        return Ok(());
    }
    // A tree's queue directories are checked before the first write.
    if f.section == Section::Channels {
        queues::Queues::open(root, &f.ifname)?;
    }
    root.probe_write(&state_path(&f.ifname))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_path_round_trips_and_other_paths_are_not_fields() {
        let f = Field::new("ens1f0", Section::Features, "rx-gro");
        assert_eq!(f.path(), "ethtool:ens1f0/features/rx-gro");
        assert_eq!(Field::parse(&f.path()), Some(f.clone()));
        // Journals written before the locator hold the old pseudo-path.
        assert_eq!(
            Field::parse("/sys/class/net/ens1f0@ethtool/features/rx-gro"),
            Some(f)
        );
        assert_eq!(Field::parse("ethtool:eth0/bogus/x"), None);
        assert_eq!(Field::parse("ethtool:/channels/rx"), None);
        assert_eq!(Field::parse("ethtool:eth0/channels/rx/x"), None);
        for bad in ["..", "a:b", "a b", "sixteen-chars-xx"] {
            assert_eq!(
                Field::parse(&format!("ethtool:{bad}/channels/rx")),
                None,
                "{bad}"
            );
        }
        assert_eq!(Field::parse("/sys/class/net/eth0/mtu"), None);
        assert_eq!(Field::parse("/sys/class/net/eth0@ethtool/bogus/x"), None);
        assert_eq!(Field::parse("/sys/class/net/@ethtool/channels/rx"), None);
    }
}
