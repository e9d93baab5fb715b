//! saptune's notes beside hostknob: per knob, each active note's line that
//! sets the same file (agreeing or not), the notes as `peers::saptune` reads
//! them. hostknob never refuses over a note.

use serde::Serialize;

use crate::knob::Target;
use crate::manifest::Knob;
use crate::peers::saptune::Notes;

/// An active note's line that sets a knob's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SaptuneSetting {
    pub note: String,
    pub file: String,
    pub line: usize,
    pub section: String,
    pub key: String,
    pub value: String,
    /// The knob's file the line sets.
    pub path: String,
    /// Whether the note sets what the knob sets there.
    pub agrees: bool,
}

/// Every active note's line that sets one of the knob's files.
pub fn settings(notes: &Notes, knob: &Knob, targets: &[Target]) -> Vec<SaptuneSetting> {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: Vec<SaptuneSetting> = Vec::new();
    for l in &notes.lines {
        let Some(t) = targets
            .iter()
            .find(|t| t.blocker.is_none() && l.sets(&t.path))
        else {
            continue;
        };
        let want = words(&t.desired);
        out.push(SaptuneSetting {
            note: l.note.clone(),
            file: l.file.clone(),
            line: l.line,
            section: l.section.clone(),
            key: l.key.clone(),
            value: l.value.clone(),
            path: t.path.clone(),
            agrees: words(&l.value) == want || words(&knob.spec.normalize(&l.value)) == want,
        });
    }
    out
}
