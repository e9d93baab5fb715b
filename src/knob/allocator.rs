//! `allocator`: jemalloc settings of a systemd service, through `MALLOC_CONF`
//! (or `_RJEM_MALLOC_CONF` for a Rust program using tikv-jemallocator's
//! prefixed symbols). The setting lives in a drop-in `Environment=` line and
//! takes effect when the service starts, so two things are read: the unit's
//! effective environment (unit file plus drop-ins) and each running process's
//! `/proc/PID/environ`. Only the drop-in can be written.

use serde::Deserialize;

use super::{FieldError, HostCtx, KindName, KnobKind, Spec, Survey, Target, WriteMode, check_name};
use crate::peers::systemd;
use crate::schema::Persistence;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    service: String,
    #[serde(default)]
    variable: Option<String>,
    /// Process name (`comm`) of the service's processes when they are not
    /// found through the service's cgroup.
    #[serde(default)]
    process: Option<String>,
}

#[derive(Debug)]
pub struct Allocator {
    pub service: String,
    pub variable: String,
    pub process: Option<String>,
    pub settings: Vec<(String, String)>,
}

/// `background_thread:true,dirty_decay_ms:1000` as ordered pairs.
pub fn parse_conf(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in text.split(',') {
        let Some((k, v)) = part.split_once(':') else {
            return Err(format!("{part:?} is not key:value"));
        };
        let key_ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let value_ok = !v.is_empty() && !v.contains(|c: char| c.is_whitespace() || c == '"');
        if !key_ok || !value_ok {
            return Err(format!("{part:?} is not a jemalloc option (key:value)"));
        }
        out.retain(|(ok, _)| ok != k);
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

fn render_conf(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// An `Environment=` assignment in double quotes, escaped for systemd: `%`
/// starts a specifier (systemd.unit(5): `%n` is the unit's name), and `\`
/// and `"` are C escapes inside quotes.
fn env_assignment(var: &str, value: &str) -> String {
    let mut out = String::from("\"");
    for c in format!("{var}={value}").chars() {
        match c {
            '%' => out.push_str("%%"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Words of an `Environment=` value, honouring double and single quotes,
/// backslash escapes and `%%` (a literal `%`).
fn env_words(value: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && let Some(next) = chars.next() {
            cur.push(next);
            any = true;
            continue;
        }
        if c == '%' && chars.peek() == Some(&'%') {
            chars.next();
            cur.push('%');
            any = true;
            continue;
        }
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// Applies one unit file's `Environment=` lines in `[Service]` to `env`.
fn apply_unit_text(text: &str, variable: &str, env: &mut Option<String>, files: &mut Vec<String>) {
    let mut in_service = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_service = line == "[Service]";
            continue;
        }
        if !in_service {
            continue;
        }
        if let Some(value) = line.strip_prefix("EnvironmentFile=") {
            match value.trim() {
                "" => files.clear(),
                f => files.push(f.to_string()),
            }
            continue;
        }
        let Some(value) = line.strip_prefix("Environment=") else {
            continue;
        };
        if value.trim().is_empty() {
            *env = None;
            continue;
        }
        for w in env_words(value) {
            if let Some(v) = w.strip_prefix(variable).and_then(|r| r.strip_prefix('=')) {
                *env = Some(v.to_string());
            }
        }
    }
}

/// The variable's value in an environment file (`KEY=VALUE` lines, `#` and
/// `;` comments, optional quotes), the last assignment winning.
fn env_file_value(text: &str, variable: &str) -> Option<String> {
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=')
            && k.trim() == variable
        {
            let v = v.trim();
            let unquoted = ['"', '\'']
                .iter()
                .find_map(|q| v.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)))
                .unwrap_or(v);
            found = Some(unquoted.to_string());
        }
    }
    found
}

impl Spec for Allocator {
    type Target = TargetDoc;
    type Set = String;

    fn new(target: Option<TargetDoc>, set: String) -> Result<Self, FieldError> {
        let t = target.ok_or_else(|| {
            FieldError::new(
                "target",
                "missing: give target.service (e.g. rpc-node.service)",
            )
        })?;
        super::check_service_name("target.service", &t.service)?;
        let variable = t.variable.unwrap_or_else(|| "MALLOC_CONF".into());
        let var_ok = variable.ends_with("MALLOC_CONF")
            && variable
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !var_ok {
            return Err(FieldError::new(
                "target.variable",
                format!(
                    "{variable:?}: expected MALLOC_CONF or a prefixed form such as _RJEM_MALLOC_CONF"
                ),
            ));
        }
        if let Some(p) = &t.process {
            check_name("target.process", p, "process")?;
        }
        let settings = parse_conf(set.trim()).map_err(|m| FieldError::new("set", m))?;
        Ok(Allocator {
            service: t.service,
            variable,
            process: t.process,
            settings,
        })
    }
}

impl Allocator {
    /// systemd.unit(5): drop-ins apply in file-name order across the
    /// directories, a later one overriding an earlier `Environment=`; `zz-`
    /// sorts after `override.conf` (systemctl edit) and numbered files.
    fn dropin_path(&self) -> String {
        format!(
            "/etc/systemd/system/{}.d/zz-hostknob-{}.conf",
            self.service,
            self.variable.to_ascii_lowercase().trim_start_matches('_')
        )
    }

    /// Whether every desired option is set to the desired value in `conf`.
    fn satisfied(&self, conf: Option<&str>) -> bool {
        let Some(have) = conf.and_then(|c| parse_conf(c).ok()) else {
            return false;
        };
        self.settings
            .iter()
            .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
    }

    /// The unit's effective value: unit file, then drop-ins by file name
    /// (a name in /etc hides the same name in /run and /usr/lib), then the
    /// `EnvironmentFile=` files, whose variables override `Environment=`
    /// (systemd.exec(5); a leading `-` lets a file be missing).
    fn unit_value(&self, host: &HostCtx) -> (bool, Option<String>) {
        let mut env = None;
        let mut files = Vec::new();
        let mut found = false;
        if let Some(path) = systemd::unit_file(host.root, &self.service) {
            found = true;
            if let Some(text) = host.text(&path) {
                apply_unit_text(&text, &self.variable, &mut env, &mut files);
            }
        }
        for path in systemd::dropins(host.root, &self.service) {
            found = true;
            if let Some(text) = host.text(&path) {
                apply_unit_text(&text, &self.variable, &mut env, &mut files);
            }
        }
        for f in &files {
            let path = f.strip_prefix('-').unwrap_or(f);
            if let Some(v) = host
                .text(path)
                .and_then(|t| env_file_value(&t, &self.variable))
            {
                env = Some(v);
            }
        }
        (found, env)
    }

    fn service_pids(&self, host: &HostCtx) -> Vec<u32> {
        let suffix = format!("/{}", self.service);
        host.processes()
            .iter()
            .filter(|p| {
                self.process.as_deref() == Some(p.comm.as_str())
                    || host
                        .text(&format!("/proc/{}/cgroup", p.pid))
                        .is_some_and(|c| c.lines().any(|l| l.trim_end().ends_with(&suffix)))
            })
            .map(|p| p.pid)
            .collect()
    }
}

impl KnobKind for Allocator {
    /// Our drop-in reads back only when the unit's effective environment
    /// (every drop-in in order) carries the setting: a file that another
    /// drop-in overrides did not take.
    fn read_back(&self, host: &HostCtx, path: &str) -> std::io::Result<Option<String>> {
        let own = host.root.read_trimmed(path)?;
        if path != self.dropin_path() || own.is_none() {
            return Ok(own);
        }
        let (_, effective) = self.unit_value(host);
        Ok(if self.satisfied(effective.as_deref()) {
            own
        } else {
            Some(format!(
                "the unit's effective {}={} (a drop-in sorting after {path}, or an EnvironmentFile=, overrides it)",
                self.variable,
                effective.as_deref().unwrap_or("(unset)")
            ))
        })
    }

    fn kind(&self) -> KindName {
        KindName::Allocator
    }

    fn desired(&self) -> String {
        render_conf(&self.settings)
    }

    fn target_summary(&self) -> String {
        format!("{} of {}", self.variable, self.service)
    }

    fn persistence_allowed(&self) -> &'static [Persistence] {
        &[Persistence::SystemdDropin]
    }

    fn survey(&self, host: &HostCtx) -> Result<Survey, FieldError> {
        let desired = self.desired();
        let mut survey = Survey::default();
        let (unit_found, unit_value) = self.unit_value(host);
        let pids = self.service_pids(host);
        if !unit_found && pids.is_empty() {
            survey.targets.push(Target::absent(
                format!("/etc/systemd/system/{}", self.service),
                None,
                &desired,
                format!("no unit {} and no such process on this host", self.service),
            ));
            return Ok(survey);
        }
        let path = self.dropin_path();
        let mut merged = unit_value
            .as_deref()
            .and_then(|c| parse_conf(c).ok())
            .unwrap_or_default();
        for (k, v) in &self.settings {
            merged.retain(|(mk, _)| mk != k);
            merged.push((k.clone(), v.clone()));
        }
        let content = format!(
            "# Written by hostknob: jemalloc settings for {svc}.\n[Service]\nEnvironment={assignment}\n",
            svc = self.service,
            assignment = env_assignment(&self.variable, &render_conf(&merged))
        );
        survey.targets.push(Target {
            in_effect: self.satisfied(unit_value.as_deref()),
            path: path.clone(),
            cpus: None,
            label: Some("unit".into()),
            current: Some(unit_value.unwrap_or_else(|| "(unset)".into())),
            desired: desired.clone(),
            write: Some(content),
            restore: host.text(&path).map(|t| t + "\n"),
            mode: WriteMode::File,
            blocker: None,
        });
        let mut stale = Vec::new();
        for pid in &pids {
            let environ = format!("/proc/{pid}/environ");
            let target = match host.root.read(&environ) {
                Ok(bytes) => {
                    let prefix = format!("{}=", self.variable);
                    let value = bytes
                        .split(|b| *b == 0)
                        .filter_map(|kv| std::str::from_utf8(kv).ok())
                        .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_string));
                    let in_effect = self.satisfied(value.as_deref());
                    if !in_effect {
                        stale.push(*pid);
                    }
                    Target {
                        in_effect,
                        path: environ,
                        cpus: None,
                        label: Some(format!("pid {pid}")),
                        current: Some(value.unwrap_or_else(|| "(unset)".into())),
                        desired: desired.clone(),
                        write: None,
                        restore: None,
                        mode: WriteMode::File,
                        blocker: None,
                    }
                }
                Err(e) => Target::absent(
                    environ.clone(),
                    None,
                    &desired,
                    format!("cannot read {environ}: {}", super::ctx::describe_io(&e)),
                ),
            };
            survey.targets.push(target);
        }
        if pids.is_empty() {
            survey.notes.push(format!(
                "{} is not running here: the setting takes effect when it starts",
                self.service
            ));
        } else if !stale.is_empty() {
            survey.notes.push(format!(
                "restart {} for running processes to pick the setting up (PIDs without it: {})",
                self.service,
                stale
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(survey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_and_backslash_are_escaped_for_systemd_and_read_back() {
        let line = env_assignment("_RJEM_MALLOC_CONF", "a:%n,b:x\\y\"z");
        assert_eq!(line, r#""_RJEM_MALLOC_CONF=a:%%n,b:x\\y\"z""#);
        let mut env = None;
        apply_unit_text(
            &format!("[Service]\nEnvironment={line}\n"),
            "_RJEM_MALLOC_CONF",
            &mut env,
            &mut Vec::new(),
        );
        assert_eq!(env.as_deref(), Some("a:%n,b:x\\y\"z"));
    }

    #[test]
    fn reads_environment_lines() {
        let mut env = None;
        apply_unit_text(
            "[Unit]\nEnvironment=MALLOC_CONF=x:1\n[Service]\nEnvironment=\"A=b c\" MALLOC_CONF=background_thread:true\n",
            "MALLOC_CONF",
            &mut env,
            &mut Vec::new(),
        );
        assert_eq!(env.as_deref(), Some("background_thread:true"));
        apply_unit_text(
            "[Service]\nEnvironment=\n",
            "MALLOC_CONF",
            &mut env,
            &mut Vec::new(),
        );
        assert_eq!(env, None);
        assert_eq!(env_words("'A=1 2' B=3"), vec!["A=1 2", "B=3"]);
    }

    #[test]
    fn environment_files_are_listed_reset_and_read() {
        let mut env = None;
        let mut files = Vec::new();
        apply_unit_text(
            "[Service]\nEnvironmentFile=-/etc/default/a\nEnvironmentFile=/etc/b\n",
            "MALLOC_CONF",
            &mut env,
            &mut files,
        );
        assert_eq!(files, ["-/etc/default/a", "/etc/b"]);
        apply_unit_text("[Service]\nEnvironmentFile=\n", "MALLOC_CONF", &mut env, &mut files);
        assert!(files.is_empty());
        let text = "# c\n; c\nMALLOC_CONF=narenas:1\nOTHER=1\nMALLOC_CONF=\"narenas:2\"\n";
        assert_eq!(env_file_value(text, "MALLOC_CONF").as_deref(), Some("narenas:2"));
        assert_eq!(env_file_value(text, "MALLOC"), None);
    }

    #[test]
    fn conf_subset() {
        let a = Allocator::new(
            Some(TargetDoc {
                service: "x.service".into(),
                variable: None,
                process: None,
            }),
            "background_thread:true".into(),
        )
        .unwrap();
        assert!(a.satisfied(Some("dirty_decay_ms:1000,background_thread:true")));
        assert!(!a.satisfied(Some("background_thread:false")));
        assert!(!a.satisfied(None));
        assert!(parse_conf("background_thread").is_err());
        assert!(parse_conf("a:1,,b:2").is_err());
    }
}
