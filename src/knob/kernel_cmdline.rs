//! `kernel-cmdline`: parameters added to or removed from the kernel command
//! line, written where this host's boot loader keeps it (see `bootloader`:
//! BLS entries and `/etc/kernel/cmdline`, or a GRUB drop-in on Debian and
//! Ubuntu). The change is for the next boot: what runs is `/proc/cmdline`;
//! configured and not running yet is `pending-reboot`.

use std::os::fd::AsFd;

use serde::Deserialize;

use super::bootloader::{self, Edit, Param};
use super::{
    Blocker, FieldError, HostCtx, KindName, KnobKind, Spec, Survey, Target,
    WriteMode,
};
use crate::schema::Persistence;

/// Where BLS type 1 entries live: `/boot` (GRUB's blscfg, XBOOTLDR) and the
/// ESP at `/efi` or `/boot/efi` (systemd-boot).
const ENTRY_DIRS: [&str; 3] = [
    "/boot/loader/entries",
    "/efi/loader/entries",
    "/boot/efi/loader/entries",
];
const KERNEL_CMDLINE: &str = "/etc/kernel/cmdline";
const GRUB_DEFAULT: &str = "/etc/default/grub";
const GRUB_CFG: &str = "/boot/grub/grub.cfg";
const GRUB_D: &str = "/etc/default/grub.d";
/// GRUB's environment block, whose variables (`$tuned_params`) BLS
/// `options` lines may name: RHEL/Fedora's, then Debian's place.
const GRUBENV: [&str; 2] = ["/boot/grub2/grubenv", "/boot/grub/grubenv"];

/// GRUB's environment block as `name=value` pairs (grub-editenv(1); the
/// `#` padding after them is skipped), and its path.
fn grubenv(host: &HostCtx) -> Option<(String, Vec<(String, String)>)> {
    GRUBENV.iter().find_map(|path| {
        let text = host.root.read_string(path).ok()?;
        let vars = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some((path.to_string(), vars))
    })
}

/// The words of an `options` line as the kernel gets them: each `$name` or
/// `${name}` replaced by the words of that GRUB environment variable (kept
/// as is when the block lacks it), with where each expanded word came from.
fn expand(words: &[&str], env: Option<&(String, Vec<(String, String)>)>) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for w in words {
        let name = w
            .strip_prefix("${")
            .and_then(|n| n.strip_suffix('}'))
            .or_else(|| w.strip_prefix('$'));
        let value = name.and_then(|n| {
            let (path, vars) = env?;
            vars.iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| (v, format!("${n} of {path}")))
        });
        match value {
            Some((v, from)) => {
                out.extend(v.split_whitespace().map(|x| (x.to_string(), Some(from.clone()))));
            }
            None => out.push((w.to_string(), None)),
        }
    }
    out
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetDoc {
    #[serde(default)]
    add: Vec<String>,
    #[serde(default)]
    remove: Vec<String>,
}

#[derive(Debug)]
pub struct KernelCmdline {
    edit: Edit,
    id: String,
}

impl Spec for KernelCmdline {
    type Target = TargetDoc;
    type Set = SetDoc;

    fn new(_target: Option<TargetDoc>, set: SetDoc) -> Result<Self, FieldError> {
        if set.add.is_empty() && set.remove.is_empty() {
            return Err(FieldError::new(
                "set",
                "nothing to change: give set.add and/or set.remove, lists of kernel parameters \
                 (add: [\"nohz_full=2-3\"], remove: [\"quiet\"])",
            ));
        }
        let mut seen: Vec<(Param, String)> = Vec::new();
        let mut lists = (Vec::new(), Vec::new());
        for (list, texts) in [("add", &set.add), ("remove", &set.remove)] {
            for (i, text) in texts.iter().enumerate() {
                let field = format!("set.{list}[{i}]");
                let p = Param::parse(text.trim()).map_err(|m| FieldError::new(&field, m))?;
                if let Some(why) = p.order_dependent() {
                    return Err(FieldError::new(&field, why));
                }
                if list == "remove" && p.repeatable() && p.value.is_none() {
                    return Err(FieldError::new(
                        &field,
                        format!(
                            "{} is given several times on a command line (console=tty0 \
                             console=ttyS0,115200): remove one word, {}=VALUE, not every one",
                            p.key, p.key
                        ),
                    ));
                }
                // A repeatable key may be given with several values, each once.
                let clash = |q: &Param| match p.repeatable() {
                    true => q.same_key(&p.key) && (q.value.is_none() || q.value == p.value),
                    false => q.same_key(&p.key),
                };
                if let Some((_, first)) = seen.iter().find(|(q, _)| clash(q)) {
                    return Err(FieldError::new(
                        &field,
                        format!(
                            "{} is given twice (first at {first}): a parameter is added once or \
                             removed, not both",
                            p.key
                        ),
                    ));
                }
                seen.push((p.clone(), field));
                match list {
                    "add" => lists.0.push(p),
                    _ => lists.1.push(p),
                }
            }
        }
        Ok(KernelCmdline {
            edit: Edit {
                add: lists.0,
                remove: lists.1,
            },
            id: String::new(),
        })
    }

    fn named(mut self, id: &str) -> Self {
        self.id = id.to_string();
        self
    }
}

/// How this host boots, as its files show.
enum Layout {
    /// BLS entries (and `/etc/kernel/cmdline` when present).
    Bls {
        loader: &'static str,
        entries: Vec<String>,
        kernel_cmdline: bool,
    },
    /// GRUB on Debian and Ubuntu.
    Grub,
}

fn detect(host: &HostCtx) -> Result<Layout, String> {
    let mut entries = Vec::new();
    for dir in ENTRY_DIRS {
        let mut names: Vec<String> = host
            .list(dir)
            .into_iter()
            .filter(|n| n.ends_with(".conf"))
            .collect();
        names.sort();
        entries.extend(names.into_iter().map(|n| format!("{dir}/{n}")));
    }
    let kernel_cmdline = host.root.exists(KERNEL_CMDLINE);
    let sd_boot = ENTRY_DIRS.iter().any(|d| {
        let parent = d.strip_suffix("/entries").unwrap_or(d);
        host.root.exists(&format!("{parent}/loader.conf"))
    });
    if !entries.is_empty() {
        let loader = if sd_boot { "systemd-boot" } else { "GRUB (BLS entries)" };
        return Ok(Layout::Bls {
            loader,
            entries,
            kernel_cmdline,
        });
    }
    if host.root.exists(GRUB_DEFAULT) && host.root.exists(GRUB_CFG) {
        return Ok(Layout::Grub);
    }
    let mut why = String::from(
        "no boot loader configuration this knob can write was found: looked for BLS entries \
         (/boot/loader/entries/*.conf, /efi/loader/entries/*.conf, /boot/efi/loader/entries/*.conf; \
         GRUB's blscfg, systemd-boot) and GRUB on Debian/Ubuntu (/etc/default/grub with \
         /boot/grub/grub.cfg)",
    );
    if kernel_cmdline {
        why.push_str(
            "; /etc/kernel/cmdline alone is not enough: it is read when a kernel is installed, \
             and no entry here boots from it",
        );
    }
    Err(why)
}

/// A directory on a read-only file system (a `/boot` mounted `ro`): the
/// reason, or `None` when it is writable or its file system cannot be asked.
fn read_only(host: &HostCtx, dir: &str) -> Option<String> {
    let fd = host
        .root
        .open_raw(dir, libc::O_PATH | libc::O_DIRECTORY, 0)
        .ok()?;
    let st = nix::sys::statvfs::fstatvfs(fd.as_fd()).ok()?;
    st.flags()
        .contains(nix::sys::statvfs::FsFlags::ST_RDONLY)
        .then(|| {
            format!(
                "{dir} is on a read-only file system: remount it read-write (mount -o remount,rw \
                 MOUNTPOINT) to change the boot configuration, and read-only again after"
            )
        })
}

fn exact(host: &HostCtx, path: &str) -> Result<Option<String>, String> {
    match host.root.read_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(super::ctx::describe_io(&e)),
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("/", |(d, _)| if d.is_empty() { "/" } else { d })
}

/// One file of the boot configuration as the knob sees it.
struct BootFile {
    path: String,
    label: &'static str,
    /// The file's bytes (`None`: absent).
    text: Option<String>,
    /// What apply writes (`None`: observed only, as grub.cfg).
    write: Option<String>,
    /// Whether the file configures the knob, and the line that does.
    holds: bool,
    line: usize,
    /// The knob's keys as the file has them.
    current: String,
    blocker: Option<Blocker>,
}

impl KernelCmdline {
    fn dropin_path(&self) -> String {
        format!("{GRUB_D}/hostknob-{}.cfg", self.id)
    }

    fn running(&self, host: &HostCtx) -> (bool, String) {
        let words: Vec<&str> = host.cmdline().unwrap_or("").split_whitespace().collect();
        (self.edit.holds(&words), self.edit.relevant(&words))
    }

    /// Every file of this host's boot configuration the knob reads or writes.
    fn files(&self, host: &HostCtx) -> Result<(Vec<BootFile>, Vec<String>), String> {
        let mut out = Vec::new();
        let mut notes = Vec::new();
        match detect(host)? {
            Layout::Bls {
                loader,
                entries,
                kernel_cmdline,
            } => {
                notes.push(format!(
                    "boots with {loader}: every entry ({}) gets the change",
                    entries.len()
                ));
                for path in entries {
                    let entry = self.bls_entry(host, &path);
                    // A link that leads nowhere: the boot loader cannot read it either.
                    if entry.text.is_none()
                        && entry.blocker.is_none()
                        && let Ok(Some(to)) = host.root.link_target(&path)
                    {
                        notes.push(format!(
                            "{path} is a symbolic link to {}, which does not exist: skipped \
                             (not changed, and no boot loader reads it)",
                            to.display()
                        ));
                        continue;
                    }
                    out.push(entry);
                }
                if kernel_cmdline {
                    out.push(self.kernel_cmdline_file(host));
                } else {
                    notes.push(
                        "no /etc/kernel/cmdline: kernel-install takes a new kernel's options from \
                         /proc/cmdline, so a kernel installed before the reboot lacks the change"
                            .into(),
                    );
                }
            }
            Layout::Grub => {
                let dropin = self.grub_dropin(host);
                let mut cfg = self.grub_cfg(host);
                if cfg.holds
                    && dropin.text.is_none()
                    && dropin.blocker.is_none()
                    && !self.grub_files_hold(host)
                {
                    // Left by a drop-in since removed (a revert): the next boot
                    // still has it, the next update-grub drops it.
                    cfg.holds = false;
                    notes.push(format!(
                        "{GRUB_CFG}:{} still boots with {} but {} is absent: run `update-grub` (or \
                         `hostknob persist {} --remove`) to regenerate it from the files as they are",
                        cfg.line, cfg.current, dropin.path, self.id
                    ));
                    cfg.current = format!("{} (stale: its drop-in is gone)", cfg.current);
                }
                out.push(dropin);
                out.push(cfg);
                notes.push(format!(
                    "GRUB boots from {GRUB_CFG}: after apply, regenerate it with `update-grub` \
                     (or `grub-mkconfig -o {GRUB_CFG}`; `hostknob persist {} --install` runs it); \
                     until then the next boot does not have the change",
                    self.id
                ));
            }
        }
        for f in out.iter_mut().filter(|f| f.write.is_some()) {
            if f.blocker.is_none()
                && let Some(why) = read_only(host, parent(&f.path))
            {
                f.blocker = Some(Blocker::Unsupported(why));
            }
        }
        Ok((out, notes))
    }

    /// Whether GRUB's own files (without the drop-in) would give the change
    /// anyway, as far as their text shows: every added word there, no
    /// removed key.
    fn grub_files_hold(&self, host: &HostCtx) -> bool {
        let mut text = host.root.read_string(GRUB_DEFAULT).unwrap_or_default();
        for n in host.list(GRUB_D) {
            if n.ends_with(".cfg") {
                let path = format!("{GRUB_D}/{n}");
                text += &host.root.read_string(&path).unwrap_or_default();
            }
        }
        self.edit.add.iter().all(|p| text.contains(&p.to_string()))
            && !self.edit.remove.iter().any(|p| text.contains(&p.to_string()))
    }

    fn read_file(&self, host: &HostCtx, path: &str, label: &'static str) -> BootFile {
        let mut f = BootFile {
            path: path.to_string(),
            label,
            text: None,
            write: None,
            holds: false,
            line: 1,
            current: "absent".into(),
            blocker: None,
        };
        match exact(host, path) {
            Ok(t) => f.text = t,
            Err(e) => {
                f.blocker = Some(Blocker::Unreadable(format!("cannot read {path}: {e}")));
            }
        }
        f
    }

    fn bls_entry(&self, host: &HostCtx, path: &str) -> BootFile {
        let mut f = self.read_file(host, path, "BLS entry");
        let Some(text) = f.text.take() else {
            return f;
        };
        if let Some(b) = super::too_large_to_rewrite(path, &text) {
            f.blocker = Some(b);
            f.text = Some(text);
            return f;
        }
        let env = grubenv(host);
        let (words, lines) = bootloader::bls_options(&text);
        // Judged as the kernel gets them: GRUB variables expanded.
        let now = expand(&words, env.as_ref());
        let now: Vec<&str> = now.iter().map(|(w, _)| w.as_str()).collect();
        f.holds = self.edit.holds(&now);
        f.line = lines.last().copied().unwrap_or(1);
        f.current = self.edit.relevant(&now);
        let new = bootloader::edit_bls_entry(&text, &self.edit);
        let after = expand(&bootloader::bls_options(&new).0, env.as_ref());
        f.blocker = self.first_elsewhere(&after, path, f.line).or_else(|| {
            let line: Vec<&str> = after.iter().map(|(w, _)| w.as_str()).collect();
            self.too_long(host, &line, &format!("{path}:{}", f.line))
        });
        f.write = Some(new);
        let kernelopts = words.contains(&"$kernelopts");
        f.text = Some(text);
        if kernelopts {
            f.blocker = Some(Blocker::Unsupported(format!(
                "{path}:{}: options take $kernelopts from GRUB's environment block \
                 (/boot/grub2/grubenv, RHEL 8's layout), which hostknob does not edit: use \
                 `grubby --update-kernel=ALL`, or put the options in the entries",
                f.line
            )));
        }
        f
    }

    fn kernel_cmdline_file(&self, host: &HostCtx) -> BootFile {
        let mut f = self.read_file(host, KERNEL_CMDLINE, "kernel-install");
        if let Some(b) = f
            .text
            .as_deref()
            .and_then(|t| super::too_large_to_rewrite(KERNEL_CMDLINE, t))
        {
            f.blocker = Some(b);
            return f;
        }
        if let Some(text) = f.text.clone() {
            let words: Vec<&str> = text.split_whitespace().collect();
            f.holds = self.edit.holds(&words);
            f.current = self.edit.relevant(&words);
            let new = bootloader::edit_kernel_cmdline(&text, &self.edit);
            let after: Vec<&str> = new.split_whitespace().collect();
            if f.blocker.is_none() {
                f.blocker = self.too_long(host, &after, &format!("{KERNEL_CMDLINE}:1"));
            }
            f.write = Some(new);
        }
        f
    }

    /// A resulting command line the kernel would cut: longer than its
    /// architecture's `COMMAND_LINE_SIZE` less the closing NUL
    /// (`rules::cmdline::COMMAND_LINE_SIZE`).
    fn too_long(&self, host: &HostCtx, words: &[&str], at: &str) -> Option<Blocker> {
        let len = words.join(" ").len();
        let facts = crate::inventory::facts::Facts::new(host.root);
        let arch = match facts.get("arch") {
            crate::inventory::facts::Value::Text(a) => Some(a),
            _ => None,
        };
        let (size, source) = super::rules::cmdline::command_line_size(arch.as_deref());
        (len >= size).then(|| {
            Blocker::Unsupported(format!(
                "{at}: the resulting command line is {len} characters; the kernel keeps the \
                 first {} ({source}: {size} with the closing NUL) and silently drops the rest: \
                 shorten it (CPU lists as ranges, 1-4 not 1,2,3,4)",
                size - 1
            ))
        })
    }

    /// An added first-wins parameter (`isolcpus=`, `nohz_full=`) whose key
    /// a GRUB variable already sets earlier on the line with another value:
    /// the kernel would keep that one and ignore the knob's.
    fn first_elsewhere(&self, after: &[(String, Option<String>)], path: &str, line: usize) -> Option<Blocker> {
        self.edit.add.iter().filter(|p| p.first_wins()).find_map(|p| {
            let (first, from) = after.iter().find(|(w, _)| p.same_key(w))?;
            if p.is(first) {
                return None;
            }
            let from = from.as_deref().unwrap_or("this line");
            Some(Blocker::Unsupported(format!(
                "{path}:{line}: {first} (from {from}) comes before {p}, and the kernel keeps the \
                 first {}= mask and ignores a later different one (kernel/sched/isolation.c, \
                 housekeeping_setup): remove it there (tuned's [bootloader] cmdline; \
                 `grub2-editenv - unset` it) or set the same mask",
                p.key
            )))
        })
    }

    fn grub_dropin(&self, host: &HostCtx) -> BootFile {
        let path = self.dropin_path();
        let mut f = self.read_file(host, &path, "GRUB drop-in");
        let ours = bootloader::grub_dropin(&self.id, &self.edit);
        f.holds = f.text.as_deref() == Some(ours.as_str());
        f.current = match &f.text {
            None => "absent".into(),
            Some(_) if f.holds => self.edit.to_string(),
            Some(_) => "another content".into(),
        };
        f.line = 4;
        f.write = Some(ours);
        f
    }

    fn grub_cfg(&self, host: &HostCtx) -> BootFile {
        let mut f = self.read_file(host, GRUB_CFG, "GRUB's default entry");
        if let Some(text) = f.text.clone() {
            match bootloader::grub_cfg_default(&text) {
                Some((words, line)) => {
                    f.holds = self.edit.holds(&words);
                    f.line = line;
                    f.current = self.edit.relevant(&words);
                    // What update-grub would write there with the drop-in.
                    let after = self.edit.apply(&words);
                    let after: Vec<&str> = after.iter().map(String::as_str).collect();
                    f.blocker = self.too_long(host, &after, &format!("{GRUB_CFG}:{line}"));
                }
                None => f.current = "no linux line".into(),
            }
        }
        f
    }
}

impl KnobKind for KernelCmdline {
    fn kind(&self) -> KindName {
        KindName::KernelCmdline
    }

    fn desired(&self) -> String {
        self.edit.to_string()
    }

    fn target_summary(&self) -> String {
        "kernel command line (next boot)".into()
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::Cmdline]
    }

    /// The added parameters: the knob is its own command-line form.
    fn cmdline_args(&self) -> Option<Vec<String>> {
        Some(self.edit.add.iter().map(Param::to_string).collect())
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let (running, now) = self.running(host);
        let mut survey = Survey::default();
        let proc_target = Target {
            path: "/proc/cmdline".into(),
            cpus: None,
            label: Some("running".into()),
            current: host.cmdline().map(|_| now),
            desired: desired.clone(),
            in_effect: running,
            write: None,
            restore: None,
            mode: WriteMode::Attribute,
            blocker: None,
        };
        let (files, notes) = match self.files(host) {
            Ok(x) => x,
            Err(why) => {
                survey.targets.push(Target {
                    blocker: Some(Blocker::Unsupported(why)),
                    ..Target::absent("/boot".into(), None, &desired, String::new())
                });
                survey.targets.push(proc_target);
                return Ok(survey);
            }
        };
        survey.notes = notes;
        for f in files {
            survey.targets.push(Target {
                path: f.path,
                cpus: None,
                label: Some(f.label.into()),
                current: Some(f.current),
                desired: desired.clone(),
                // Running, or configured for the next boot: audit tells them apart.
                in_effect: running || f.holds,
                write: f.write,
                restore: f.text,
                mode: WriteMode::File,
                blocker: f.blocker,
            });
        }
        survey.targets.push(proc_target);
        Ok(survey)
    }

    /// Writes every file whose content is not yet the knob's, running or not.
    fn needs_write(&self, target: &Target, after: &str) -> bool {
        target.restore.as_deref() != Some(after)
    }

    fn boot_config(&self, host: &HostCtx) -> Option<Result<String, String>> {
        let files = match self.files(host) {
            Ok((files, _)) => files,
            Err(why) => return Some(Err(why)),
        };
        let lacking: Vec<String> = files
            .iter()
            .filter(|f| !f.holds)
            .map(|f| format!("{} has {}", f.path, f.current))
            .collect();
        if !lacking.is_empty() {
            return Some(Err(format!(
                "the next boot lacks {}: {}",
                self.edit,
                lacking.join(", ")
            )));
        }
        let places: Vec<String> = files
            .iter()
            .map(|f| format!("{}:{}", f.path, f.line))
            .collect();
        Some(Ok(format!("configured in {}", places.join(", "))))
    }

    fn pending_reboot(&self, host: &HostCtx) -> Option<String> {
        let (running, now) = self.running(host);
        if running {
            return None;
        }
        let at = self.boot_config(host)?.ok()?;
        Some(format!(
            "{at}; running (/proc/cmdline): {now}; takes effect at the next boot"
        ))
    }
}
