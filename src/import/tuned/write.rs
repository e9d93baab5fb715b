//! The manifest directory an import writes: one knob file per setting,
//! IMPORTED.md and NOT-IMPORTED.md accounting for every option line.

use serde::Serialize;
use serde_yaml::Value;

use crate::peers::tuned::ini::{Opt, option_lines};
use crate::peers::tuned::load::Profile;
use crate::peers::tuned::out::{Fate, KnobOut, Out};

#[derive(Serialize)]
struct Doc<'a> {
    id: &'a str,
    title: String,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: &'a Option<Value>,
    set: &'a Value,
    hosts: &'static str,
    persistence: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    caveats: Vec<String>,
    why: String,
    history: Vec<History>,
}

#[derive(Serialize)]
struct History {
    date: String,
    action: &'static str,
    hosts: &'static str,
    note: String,
}

pub struct Context<'a> {
    pub host: &'a str,
    /// The import's date (`YYYY-MM-DD`), as every writer of history dates it.
    pub date: &'a str,
    /// The profile file read last, and its modification date, for the note.
    pub profile_file: &'a str,
    pub profile_date: &'a str,
    pub summary: &'a str,
    /// tuned on the importing host (`peers::tuned::presence`): the caveat
    /// that it reapplies its profile is said only where it is there.
    pub tuned: Option<(bool, String)>,
}

/// The caveat about tuned itself, where it is on the host.
fn tuned_caveat(cx: &Context) -> Option<String> {
    let (active, how) = cx.tuned.as_ref()?;
    Some(if *active {
        format!(
            "tuned is {how} on {} and reapplies its profile at every start: stop tuned (or drop \
             this setting from its profile) before hostknob owns it",
            cx.host
        )
    } else {
        format!(
            "tuned is {how} on {}: once started it reapplies its profile; drop this setting \
             from its profile before starting it",
            cx.host
        )
    })
}

/// The longest value a `why` quotes whole; the line it cites has the rest.
const QUOTED: usize = 200;

fn cite(o: &Opt) -> String {
    let value = match o.value.char_indices().nth(QUOTED) {
        Some((cut, _)) => format!(
            "{} ... ({} more bytes)",
            &o.value[..cut],
            o.value.len() - cut
        ),
        None => o.value.clone(),
    };
    format!("tuned [{}] {} = {value} ({})", o.section, o.key, o.at())
}

pub fn knob_file(k: &KnobOut, p: &Profile, cx: &Context) -> String {
    let first = &k.lines[0];
    let title = format!("tuned {}: [{}] {}", p.name, first.section, first.key);
    let lines: Vec<String> = k.lines.iter().map(cite).collect();
    let why = format!(
        "Imported from the tuned profile {} ({}): {}. {}. Resolved on host {}.",
        p.name,
        cx.summary,
        lines.join("; "),
        k.note,
        cx.host
    );
    let doc = Doc {
        id: &k.id,
        title,
        kind: k.kind,
        target: &k.target,
        set: &k.set,
        hosts: "*",
        persistence: k.persistence,
        caveats: tuned_caveat(cx).into_iter().collect(),
        why,
        history: vec![History {
            date: cx.date.to_string(),
            action: "noted",
            hosts: "*",
            note: format!(
                "imported by `hostknob import tuned {}` on {} from {} (modified {})",
                p.name, cx.host, cx.profile_file, cx.profile_date
            ),
        }],
    };
    let body = serde_yaml::to_string(&doc).unwrap_or_default();
    format!(
        "# Written by `hostknob import tuned {}`; review before applying.\n{body}",
        p.name
    )
}

#[derive(Serialize)]
struct ProfileDoc<'a> {
    why: String,
    knobs: Vec<&'a str>,
}

/// `profiles/<profile>.yaml`: the imported knobs as one profile, for
/// `apply --profile NAME`.
pub fn profile_file(knobs: &[KnobOut], p: &Profile, cx: &Context) -> String {
    let doc = ProfileDoc {
        why: format!(
            "The tuned profile {} ({}), imported from {} on host {}.",
            p.name,
            cx.summary,
            p.files.join(", "),
            cx.host
        ),
        knobs: knobs.iter().map(|k| k.id.as_str()).collect(),
    };
    let body = serde_yaml::to_string(&doc).unwrap_or_default();
    format!(
        "# Written by `hostknob import tuned {}`; review before applying.\n{body}",
        p.name
    )
}

/// (IMPORTED.md, NOT-IMPORTED.md, the not-imported lines for stderr,
/// imported count, total count).
pub fn accounting(p: &Profile, out: &Out) -> (String, String, Vec<String>, usize, usize) {
    let mut imp = format!(
        "# Imported from tuned profile `{}`\n\nEvery option line of the profile and its includes, and what became of it.\n\n\
         | line | option | became |\n|---|---|---|\n",
        p.name
    );
    let mut not = format!(
        "# Not imported from tuned profile `{}`\n\nEach option line below has no hostknob form here; the reason says why.\n\n\
         | line | option | reason |\n|---|---|---|\n",
        p.name
    );
    let (mut stderr, mut n_imp, mut total) = (Vec::new(), 0, 0);
    let fates: std::collections::HashMap<(&str, usize), &Fate> = out
        .fates
        .iter()
        .map(|(file, line, f)| ((&**file, *line), f))
        .collect();
    for (file, text) in &p.texts {
        for (line, key) in option_lines(text) {
            total += 1;
            let at = format!("{file}:{line}");
            let fate = fates.get(&(file.as_str(), line)).copied().cloned().unwrap_or_else(|| {
                if key == "summary" || key == "description" {
                    return Fate::Used("an included profile's description, replaced by the profile's own".into());
                }
                Fate::Not("overridden: a later line or profile sets the same option (tuned keeps the last)".into())
            });
            match fate {
                Fate::Knob(id) => {
                    n_imp += 1;
                    imp += &format!("| {at} | `{key}` | knob `{id}` |\n");
                }
                Fate::Used(what) => {
                    n_imp += 1;
                    imp += &format!("| {at} | `{key}` | {} |\n", what.replace('|', "\\|"));
                }
                Fate::Not(why) => {
                    not += &format!("| {at} | `{key}` | {} |\n", why.replace('|', "\\|"));
                    stderr.push(format!("{at}: {key}: {why}"));
                }
            }
        }
    }
    (imp, not, stderr, n_imp, total)
}
