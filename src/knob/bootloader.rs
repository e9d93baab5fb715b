//! The kernel command line as boot loaders keep it: the parameters a
//! `kernel-cmdline` knob adds or removes, the files that carry them (found by
//! their presence under the root) and how each is edited.
//!
//! - BLS type 1 entries (`loader/entries/*.conf`, the Boot Loader
//!   Specification): GRUB's `blscfg` (Fedora, RHEL 9) and systemd-boot read
//!   their `options` lines (several are joined); kernel-install writes new
//!   entries from `/etc/kernel/cmdline` (kernel-install(8)).
//! - GRUB on Debian/Ubuntu: `grub-mkconfig` sources `/etc/default/grub` and then
//!   `/etc/default/grub.d/*.cfg` as shell, and writes `GRUB_CMDLINE_LINUX`
//!   (every entry) and `GRUB_CMDLINE_LINUX_DEFAULT` (normal entries) into
//!   `/boot/grub/grub.cfg`, the file GRUB boots from.

use std::fmt;

/// One parameter: `key` or `key=value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub key: String,
    pub value: Option<String>,
}

/// Keys the boot loader or the distribution owns: changing them can leave a
/// host that does not boot.
const OWNED_KEYS: [&str; 4] = ["BOOT_IMAGE", "initrd", "root", "rootflags"];

/// Keys the kernel takes several times, each word adding one more
/// (Documentation/admin-guide/kernel-parameters.txt: `console=` "can be
/// given multiple times", `memmap=` one region each): `add` appends the exact
/// word when absent and leaves the key's other words; `remove` names a value.
const REPEATABLE: [&str; 2] = ["console", "memmap"];

/// Keys whose meaning depends on the words before them (`hugepages=N` sizes
/// the pool of the last `hugepagesz=` before it): an edit that moves or drops
/// one word changes another pool, so they are refused.
const ORDER_DEPENDENT: [&str; 2] = ["hugepagesz", "hugepages"];

impl Param {
    /// Whether the key is taken several times (see [`REPEATABLE`]).
    pub fn repeatable(&self) -> bool {
        REPEATABLE.iter().any(|k| same_name(k, &self.key))
    }

    /// Why a knob cannot set this key, for an order-dependent one.
    pub fn order_dependent(&self) -> Option<String> {
        ORDER_DEPENDENT
            .iter()
            .any(|k| same_name(k, &self.key))
            .then(|| {
                format!(
                    "{}: hugepagesz= and hugepages= are read in order (each hugepages= sizes the \
                     pool of the hugepagesz= before it), so adding or removing one word changes \
                     another pool: edit the boot configuration by hand, or set the pools at run \
                     time (/sys/kernel/mm/hugepages/hugepages-SIZEkB/nr_hugepages)",
                    self.key
                )
            })
    }

    /// Whether an added `self` makes `word` leave the line: any word of its
    /// key, but only the same word for a repeatable key.
    fn displaces(&self, word: &str) -> bool {
        if self.repeatable() {
            self.is(word)
        } else {
            self.same_key(word)
        }
    }

    /// Checks a parameter's syntax: letters, digits and `_ - .` in the key; no
    /// space, quote or shell character in the value (GRUB's drop-in is shell).
    pub fn parse(text: &str) -> Result<Param, String> {
        let (key, value) = match text.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (text, None),
        };
        let key_ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !key.starts_with(['-', '.']);
        if !key_ok {
            return Err(format!(
                "{text:?} is not a kernel parameter: give key or key=value, the key of letters, \
                 digits and _ - . (such as nohz_full=2-3 or nosoftlockup)"
            ));
        }
        if OWNED_KEYS.contains(&key) {
            return Err(format!(
                "{key} is set by the boot loader or the installer, not by a knob: a wrong one \
                 leaves a host that does not boot"
            ));
        }
        if let Some(v) = value {
            let bad = v.chars().find(|c| {
                !(c.is_ascii_alphanumeric()
                    || matches!(
                        c,
                        '_' | '-' | '.' | ',' | ':' | '/' | '+' | '@' | '=' | '%' | '^'
                    ))
            });
            if v.is_empty() {
                return Err(format!(
                    "{text:?} has an empty value: give {key}=VALUE, or {key} alone for a flag"
                ));
            }
            if let Some(c) = bad {
                return Err(format!(
                    "{text:?}: {c:?} is not taken in a value (spaces, quotes and shell characters \
                     would need quoting in a boot loader's file; letters, digits and _ - . , : / + @ = % ^ are)"
                ));
            }
        }
        Ok(Param {
            key: key.to_string(),
            value: value.map(str::to_string),
        })
    }

    /// Whether `word` sets this parameter's key (`-` and `_` alike, as the
    /// kernel's `parameq` compares them).
    pub fn same_key(&self, word: &str) -> bool {
        same_name(word.split_once('=').map_or(word, |(k, _)| k), &self.key)
    }

    /// Whether `word` is this parameter, value included (CPU lists and
    /// `isolcpus=` flags as sets, `rules::cmdline::same_value`).
    pub fn is(&self, word: &str) -> bool {
        let value = word.split_once('=').map(|(_, v)| v);
        self.same_key(word)
            && match (value, self.value.as_deref()) {
                (Some(a), Some(b)) => super::rules::cmdline::same_value(&self.key, a, b),
                (a, b) => a == b,
            }
    }

    /// Whether the kernel keeps the first word of this key, not the last
    /// (`rules::cmdline::FIRST_WINS`).
    pub fn first_wins(&self) -> bool {
        super::rules::cmdline::FIRST_WINS
            .iter()
            .any(|k| same_name(k, &self.key))
    }

    /// The word of this key the kernel uses among `words`: the first for a
    /// first-wins key, else the last.
    pub fn counted<'w>(&self, words: &[&'w str]) -> Option<&'w str> {
        let mut of_key = words.iter().copied().filter(|w| self.same_key(w));
        match self.first_wins() {
            true => of_key.next(),
            false => of_key.next_back(),
        }
    }
}

fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (matches!(x, b'-' | b'_') && matches!(y, b'-' | b'_')))
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={v}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

/// What a knob does to a command line: every `add` present (the word of its
/// key the kernel uses is it: the last, or the first for `isolcpus=` and
/// `nohz_full=`), every `remove` absent (a key
/// alone removes every value of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub add: Vec<Param>,
    pub remove: Vec<Param>,
}

/// The kernel's own words of a command line: those after `--` go to init.
fn kernel_part<'w>(words: &'w [&'w str]) -> &'w [&'w str] {
    let end = words.iter().position(|w| *w == "--").unwrap_or(words.len());
    &words[..end]
}

impl Edit {
    fn removes(&self, word: &str) -> bool {
        self.add.iter().any(|p| p.displaces(word))
            || self.remove.iter().any(|r| match r.value {
                Some(_) => r.is(word),
                None => r.same_key(word),
            })
    }

    /// Whether a command line (its words) is as the knob wants it.
    pub fn holds(&self, words: &[&str]) -> bool {
        let words = kernel_part(words);
        let added = self.add.iter().all(|p| {
            if p.repeatable() {
                return words.iter().any(|w| p.is(w));
            }
            p.counted(words).is_some_and(|w| p.is(w))
        });
        let removed = self.remove.iter().all(|r| {
            !words.iter().any(|w| match r.value {
                Some(_) => r.is(w),
                None => r.same_key(w),
            })
        });
        added && removed
    }

    /// The command line with every word of a key the knob sets or removes
    /// dropped and the added ones appended (before any `--`).
    pub fn apply(&self, words: &[&str]) -> Vec<String> {
        let kernel = kernel_part(words);
        // A repeatable key's word already there stays where it is.
        let kept = |w: &str| self.add.iter().any(|p| p.repeatable() && p.is(w));
        let mut out: Vec<String> = kernel
            .iter()
            .filter(|w| kept(w) || !self.removes(w))
            .map(|w| w.to_string())
            .collect();
        for p in &self.add {
            if !(p.repeatable() && out.iter().any(|w| p.is(w))) {
                out.push(p.to_string());
            }
        }
        out.extend(words[kernel.len()..].iter().map(|w| w.to_string()));
        out
    }

    /// The words of the knob's keys, in the same words as `desired`.
    pub fn relevant(&self, words: &[&str]) -> String {
        let mine: Vec<&str> = kernel_part(words)
            .iter()
            .copied()
            .filter(|w| {
                self.add.iter().any(|p| p.same_key(w)) || self.remove.iter().any(|r| r.same_key(w))
            })
            .collect();
        if mine.is_empty() {
            "(none)".into()
        } else {
            mine.join(" ")
        }
    }

    /// `case` patterns (POSIX shell) of the words the knob drops.
    fn shell_patterns(&self) -> String {
        let mut pats: Vec<String> = Vec::new();
        for p in self.add.iter().chain(&self.remove) {
            let whole_key = p.value.is_none() || (self.add.contains(p) && !p.repeatable());
            // `-` and `_` alike, as the kernel compares names: `[-_]` matches either.
            let key = p.key.replace(['-', '_'], "[-_]");
            let ps = if whole_key {
                vec![key.clone(), format!("{key}=*")]
            } else {
                match &p.value {
                    Some(v) => vec![format!("{key}={v}")],
                    None => vec![key],
                }
            };
            for x in ps {
                if !pats.contains(&x) {
                    pats.push(x);
                }
            }
        }
        pats.join("|")
    }
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let add: Vec<String> = self.add.iter().map(Param::to_string).collect();
        let remove: Vec<String> = self.remove.iter().map(Param::to_string).collect();
        match (add.is_empty(), remove.is_empty()) {
            (false, true) => write!(f, "{}", add.join(" ")),
            (true, false) => write!(f, "without {}", remove.join(" ")),
            _ => write!(f, "{}; without {}", add.join(" "), remove.join(" ")),
        }
    }
}

/// A BLS entry's `options` lines: their words (joined, as the loaders join
/// them) and line numbers (1-based).
pub fn bls_options(text: &str) -> (Vec<&str>, Vec<usize>) {
    let mut words = Vec::new();
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = bls_options_rest(line) {
            words.extend(rest.split_whitespace());
            lines.push(i + 1);
        }
    }
    (words, lines)
}

fn bls_options_rest(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t.strip_prefix("options")?;
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
}

/// The entry with the knob's edit: words the knob drops leave every
/// `options` line, the added ones end the last (one is appended when the
/// entry has none); every other line keeps its bytes.
pub fn edit_bls_entry(text: &str, edit: &Edit) -> String {
    let (_, lines) = bls_options(text);
    let last = lines.last().copied();
    let mut out = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let Some(rest) = bls_options_rest(body) else {
            out.push_str(line);
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let kept: Vec<String> = if Some(i + 1) == last {
            edit.apply(&words)
        } else {
            let drop_only = Edit {
                add: Vec::new(),
                remove: edit.add.iter().chain(&edit.remove).cloned().collect(),
            };
            drop_only.apply(&words)
        };
        out.push_str(&format!("options {}", kept.join(" ")));
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    if last.is_none() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("options {}\n", edit.apply(&[]).join(" ")));
    }
    out
}

/// `/etc/kernel/cmdline` with the knob's edit: one line.
pub fn edit_kernel_cmdline(text: &str, edit: &Edit) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    format!("{}\n", edit.apply(&words).join(" "))
}

/// The GRUB drop-in: sourced by grub-mkconfig after `/etc/default/grub`, it
/// drops the knob's keys from both variables (a drop-in cannot edit the
/// file before it, so it rewrites the variables it set), then appends the
/// added parameters to `GRUB_CMDLINE_LINUX`, which every entry gets.
pub fn grub_dropin(id: &str, edit: &Edit) -> String {
    let pats = edit.shell_patterns();
    let add: Vec<String> = edit.add.iter().map(Param::to_string).collect();
    let mut s = format!(
        "# Written by hostknob: kernel-cmdline knob {id} ({edit}).\n\
         # Sourced by grub-mkconfig after /etc/default/grub; `hostknob revert {id}` removes it.\n\
         # Takes effect once update-grub regenerates /boot/grub/grub.cfg, at the next boot.\n\
         case $- in *f*) _hostknob_f= ;; *) _hostknob_f=1; set -f ;; esac\n"
    );
    for var in ["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"] {
        let tail = if var == "GRUB_CMDLINE_LINUX" && !add.is_empty() {
            format!("${{_hostknob:+ }}{}", add.join(" "))
        } else {
            String::new()
        };
        s.push_str(&format!(
            "_hostknob=; for _hostknob_w in ${var}; do case \"$_hostknob_w\" in {pats}) ;; \
             *) _hostknob=\"$_hostknob $_hostknob_w\" ;; esac; done; _hostknob=\"${{_hostknob# }}\"\n\
             {var}=\"$_hostknob{tail}\"\n"
        ));
    }
    // Globbing was off for the loops (a word such as `a*` stays a word); back as found.
    s.push_str(
        "if [ -n \"$_hostknob_f\" ]; then set +f; fi\nunset _hostknob _hostknob_w _hostknob_f\n",
    );
    s
}

/// The kernel line of GRUB's default entry (the first `linux` line of
/// grub.cfg): its words after the kernel's path, and its line number.
pub fn grub_cfg_default(text: &str) -> Option<(Vec<&str>, usize)> {
    text.lines().enumerate().find_map(|(i, line)| {
        let mut words = line.split_whitespace();
        let cmd = words.next()?;
        matches!(cmd, "linux" | "linuxefi" | "linux16").then(|| {
            words.next();
            (words.collect(), i + 1)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(add: &[&str], remove: &[&str]) -> Edit {
        Edit {
            add: add.iter().map(|t| Param::parse(t).unwrap()).collect(),
            remove: remove.iter().map(|t| Param::parse(t).unwrap()).collect(),
        }
    }

    #[test]
    fn the_last_word_of_a_key_counts_and_init_arguments_are_left_alone() {
        let last = edit(&["irqaffinity=0-1"], &[]);
        assert!(last.holds(&["ro", "irqaffinity=1", "irqaffinity=0-1"]));
        assert!(!last.holds(&["ro", "irqaffinity=0-1", "irqaffinity=1"]));
        // isolcpus= and nohz_full=: the kernel keeps the first mask.
        let e = edit(&["isolcpus=2-3"], &["quiet"]);
        assert!(!e.holds(&["ro", "isolcpus=1", "isolcpus=2-3"]));
        assert!(e.holds(&["ro", "isolcpus=2,3", "isolcpus=1"]));
        assert!(!e.holds(&["isolcpus=2-3", "quiet=1"]));
        assert!(e.holds(&["isolcpus=2-3", "--", "quiet"]));
        assert_eq!(
            e.apply(&["quiet", "isolcpus=1", "ro", "--", "single"]),
            ["ro", "isolcpus=2-3", "--", "single"]
        );
        let only = edit(&[], &["console=ttyS0"]);
        assert_eq!(
            only.apply(&["console=tty0", "console=ttyS0"]),
            ["console=tty0"]
        );
        assert!(edit(&["nohz-full=2"], &[]).holds(&["nohz_full=2"]));
    }

    #[test]
    fn a_repeatable_key_gets_the_word_appended_and_keeps_its_others() {
        let e = edit(&["console=ttyS0,115200"], &[]);
        assert_eq!(
            e.apply(&["console=tty0", "quiet"]),
            ["console=tty0", "quiet", "console=ttyS0,115200"]
        );
        assert!(e.holds(&["console=ttyS0,115200", "console=tty0"]));
        assert!(!e.holds(&["console=tty0"]));
        assert_eq!(
            e.apply(&["console=ttyS0,115200", "console=tty0"]),
            ["console=ttyS0,115200", "console=tty0"]
        );
        assert_eq!(e.shell_patterns(), "console=ttyS0,115200");
        assert!(
            Param::parse("hugepages=32")
                .unwrap()
                .order_dependent()
                .is_some()
        );
        assert!(
            Param::parse("default_hugepagesz=1G")
                .unwrap()
                .order_dependent()
                .is_none()
        );
    }

    #[test]
    fn syntax_is_checked() {
        for bad in [
            "",
            "=1",
            "a b",
            "x=\"1\"",
            "x=$y",
            "x=",
            "root=/dev/sda1",
            "-x",
        ] {
            assert!(Param::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Param::parse("isolcpus=managed_irq,domain,4-11").is_ok());
    }

    #[test]
    fn bls_entries_keep_every_other_byte() {
        let text = "title Fedora\nversion 6.5\noptions root=UUID=1 ro quiet\noptions rhgb\ngrub_users $grub_users\n";
        let e = edit(&["isolcpus=2-3"], &["rhgb", "quiet"]);
        assert_eq!(
            edit_bls_entry(text, &e),
            "title Fedora\nversion 6.5\noptions root=UUID=1 ro\noptions isolcpus=2-3\ngrub_users $grub_users\n"
        );
        assert_eq!(
            edit_bls_entry("title x", &e),
            "title x\noptions isolcpus=2-3\n"
        );
    }
}
