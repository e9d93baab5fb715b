//! The devices tuned's device plugins would tune on a host (read once with
//! the other facts; `devices` turns them into knobs). Apart from `devices`
//! so that `facts` imports nothing that imports it back.

use crate::root::Root;

/// The devices tuned's plugins would tune here.
#[derive(Debug, Default)]
pub struct Devices {
    /// SCSI hosts with `link_power_management_policy` (AHCI's ALPM).
    pub alpm_hosts: Vec<String>,
    /// (module, has `power_save_controller`) of each module driving a
    /// sound card that tuned tunes (`snd_hda_intel`, `snd_ac97_codec`).
    pub audio: Vec<(String, bool)>,
    /// (card, its `power_method`) of DRM cards with that file (radeon).
    pub radeon: Vec<(String, String)>,
    /// selinuxfs with `avc/cache_threshold`.
    pub selinux: bool,
    /// The running release's modules.dep and modules.builtin (tuned's
    /// plugin_modules.py asks `modinfo`); `None` where the tree has neither.
    pub modules: Option<ModuleIndex>,
}

/// The module names `/lib/modules/RELEASE` lists (`-` as `_`).
#[derive(Debug, Default)]
pub struct ModuleIndex {
    pub release: String,
    pub loadable: std::collections::BTreeSet<String>,
    pub builtin: std::collections::BTreeSet<String>,
}

fn module_index(root: &Root) -> Option<ModuleIndex> {
    let release = root.read_trimmed("/proc/sys/kernel/osrelease").ok()??;
    let names = |f: &str| {
        let text = root
            .read_string(&format!("/lib/modules/{release}/{f}"))
            .ok()?;
        Some(
            text.lines()
                .filter_map(|l| crate::kmod::file_module(l.split(':').next().unwrap_or("")))
                .collect(),
        )
    };
    let loadable = names("modules.dep")?;
    Some(ModuleIndex {
        builtin: names("modules.builtin").unwrap_or_default(),
        loadable,
        release,
    })
}

pub fn read(root: &Root) -> Devices {
    let names = |dir: &str| root.read_dir(dir).unwrap_or_default();
    let has = |p: &str| root.exists(p);
    let scsi = "/sys/class/scsi_host";
    let alpm_hosts = names(scsi)
        .into_iter()
        .filter(|h| has(&format!("{scsi}/{h}/link_power_management_policy")))
        .collect();
    // plugin_audio.py `_init_devices`: sound `card*` whose parent's driver
    // is one of the two, named by the module.
    let mut audio: Vec<(String, bool)> = Vec::new();
    for card in names("/sys/class/sound") {
        if !card.starts_with("card") {
            continue;
        }
        let Ok(link) = root.read_link(&format!("/sys/class/sound/{card}/device/driver")) else {
            continue;
        };
        let driver = link.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(m) = driver.filter(|d| AUDIO_MODULES.contains(&d.as_str()))
            && !audio.iter().any(|(a, _)| *a == m)
        {
            let ctl = has(&format!("/sys/module/{m}/parameters/power_save_controller"));
            audio.push((m, ctl));
        }
    }
    // plugin_video.py: `card*` minors; the option needs device/power_method.
    let radeon = names("/sys/class/drm")
        .into_iter()
        .filter(|c| {
            c.strip_prefix("card")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|c| {
            let m = root
                .read_trimmed(&format!("/sys/class/drm/{c}/device/power_method"))
                .ok()
                .flatten()?;
            Some((c, m))
        })
        .collect();
    Devices {
        alpm_hosts,
        audio,
        radeon,
        selinux: has(SELINUX_THRESHOLD),
        modules: module_index(root),
    }
}

const AUDIO_MODULES: [&str; 2] = ["snd_hda_intel", "snd_ac97_codec"];
pub const SELINUX_THRESHOLD: &str = "/sys/fs/selinux/avc/cache_threshold";
