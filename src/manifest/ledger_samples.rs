//! Per-round samples beside the ledger. A `verified` entry keeps its
//! summary (verdict, ratio, interval, medians of the legs, decision ...) in
//! the ledger and its per-round and per-CPU detail in a file beside it,
//! `samples/<entry id>.json`, so that the ledger stays a readable history
//! (issue 49: 4 verifies and 3 applies made a 126 KB ledger). The file is
//! written atomically before the entry that names it; an entry whose file is
//! missing (a ledger copied without it) still reads as its summary.
//!
//! Entries written before the split hold their detail inline and are read
//! as they are.

use serde_json::{Map, Value};

/// The directory beside the ledger that holds the samples files.
pub const SAMPLES_DIR: &str = "samples";

/// The most a samples file may hold before it is not read.
pub const SAMPLES_CAP: usize = 16 << 20;

/// The longest id that names a file.
const ID_MAX: usize = 64;

/// The evidence that grows with the rounds or the CPUs: each round's ratio,
/// each leg's per-round medians, the idle counters per CPU and state, the
/// command's values per round, the noise attribution per round and CPU.
const DETAIL: &[&[&str]] = &[
    &["ratios"],
    &["baseline", "round_p50_ns"],
    &["applied", "round_p50_ns"],
    &["idle"],
    &["command", "values"],
    &["noise", "rounds"],
];

/// Whether `id` can name a samples file: 1 to 64 of `A-Z a-z 0-9 _ -` (the
/// writer's ids are 32 hex digits). Anything else (`../x`, `/etc/passwd`, a
/// dot, a very long id from a hand-edited or hostile ledger) names none.
pub fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The file's name relative to the ledger's directory (`samples/<id>.json`);
/// `None` for an id that cannot name a file.
pub fn file_name(id: &str) -> Option<String> {
    safe_id(id).then(|| format!("{SAMPLES_DIR}/{id}.json"))
}

/// Takes the per-round detail out of `evidence`, leaving the summary; the
/// detail as a partial evidence object (the same keys where they were), or
/// `None` when there is none.
pub fn split(evidence: &mut Value) -> Option<Value> {
    let mut detail = Value::Object(Map::new());
    let mut any = false;
    for path in DETAIL {
        let (last, parents) = path.split_last().expect("a path has a key");
        let mut at = Some(&mut *evidence);
        for p in parents {
            at = at.and_then(|v| v.get_mut(*p));
        }
        let Some(taken) = at
            .and_then(Value::as_object_mut)
            .and_then(|o| o.remove(*last))
        else {
            continue;
        };
        if taken.is_null() {
            continue;
        }
        let mut into = &mut detail;
        for p in parents {
            into = into
                .as_object_mut()
                .expect("built of objects")
                .entry(p.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        into.as_object_mut()
            .expect("built of objects")
            .insert(last.to_string(), taken);
        any = true;
    }
    any.then_some(detail)
}

/// The summary with its detail put back: the evidence as verify had it.
pub fn join(summary: &Value, detail: &Value) -> Value {
    let mut out = summary.clone();
    merge(&mut out, detail);
    out
}

fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// Whether evidence still holds its detail inline (an entry written before
/// the split).
pub fn inline(evidence: &Value) -> bool {
    DETAIL.iter().any(|path| {
        let mut at = evidence;
        for p in *path {
            match at.get(*p) {
                Some(v) => at = v,
                None => return false,
            }
        }
        !at.is_null()
    })
}

/// The samples file's text: which entry it belongs to and its detail.
pub fn document(id: &str, knob: &str, timestamp: &str, detail: &Value) -> Vec<u8> {
    let doc = serde_json::json!({
        "id": id,
        "knob": knob,
        "timestamp": timestamp,
        "evidence": detail,
    });
    let mut bytes = serde_json::to_vec(&doc).expect("JSON values serialize");
    bytes.push(b'\n');
    bytes
}

/// The detail in a samples file's bytes, checked to belong to entry `id`.
pub fn parse(bytes: &[u8], id: &str) -> Result<Value, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if doc["id"].as_str() != Some(id) {
        return Err(format!(
            "it belongs to entry {}, not {id}",
            doc["id"].as_str().unwrap_or("(none)")
        ));
    }
    match doc.get("evidence") {
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        _ => Err("it holds no `evidence` object".into()),
    }
}

/// What a reader found for an entry's per-round samples.
#[derive(Clone, Debug, PartialEq)]
pub enum Samples {
    /// The entry names no samples file: its evidence is whole (written
    /// before the split) or has no per-round detail.
    Inline,
    /// Read from `path`: the detail to join to the summary.
    Present { path: String, detail: Value },
    /// Named but not readable here; the words say why (missing: a ledger
    /// copied without its samples; refused: an id that cannot name a file).
    Missing { path: Option<String>, words: String },
}

impl Samples {
    /// The entry's evidence, whole when its samples were found.
    pub fn evidence(&self, summary: Option<&Value>) -> Option<Value> {
        let summary = summary?;
        Some(match self {
            Samples::Present { detail, .. } => join(summary, detail),
            _ => summary.clone(),
        })
    }
}

/// How audit reports an entry's samples file.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct SamplesState {
    /// `present` or `missing` (also for an entry whose id cannot name a file).
    pub status: String,
    /// Where the file was found, or where it was looked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// For `missing`: why, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
}

impl Samples {
    /// `None` for an entry without a samples file.
    pub fn state(&self) -> Option<SamplesState> {
        match self {
            Samples::Inline => None,
            Samples::Present { path, .. } => Some(SamplesState {
                status: "present".into(),
                path: Some(path.clone()),
                words: None,
            }),
            Samples::Missing { path, words } => Some(SamplesState {
                status: "missing".into(),
                path: path.clone(),
                words: Some(words.clone()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence() -> Value {
        serde_json::json!({
            "probe": "noise",
            "rounds": 2,
            "ratio": 0.9,
            "ratios": [0.8, 1.0],
            "baseline": {"p50_ns": 10.0, "round_p50_ns": [9.0, 11.0]},
            "applied": {"p50_ns": 9.0, "round_p50_ns": [8.0, 10.0]},
            "idle": [[], []],
            "command": null,
            "noise": {"attribution": "counts", "lost_us_per_s": [1.0, 2.0], "rounds": [[{"cpus": [{"cpu": 1}]}], []]},
        })
    }

    #[test]
    fn splitting_keeps_the_summary_and_joining_gives_the_whole_back() {
        let whole = evidence();
        let mut summary = whole.clone();
        let detail = split(&mut summary).unwrap();
        assert!(!inline(&summary), "{summary}");
        assert!(inline(&whole));
        assert_eq!(
            (&summary["ratio"], &summary["rounds"]),
            (&0.9.into(), &2.into())
        );
        assert_eq!(summary["baseline"]["p50_ns"], 10.0);
        assert!(summary["baseline"].get("round_p50_ns").is_none());
        assert!(summary["noise"].get("rounds").is_none());
        assert_eq!(summary["noise"]["lost_us_per_s"][1], 2.0);
        assert_eq!(detail["noise"]["rounds"][0][0]["cpus"][0]["cpu"], 1);
        assert_eq!(join(&summary, &detail), whole);
        // Nothing per round: nothing to write.
        // `rounds` (the count) stays: only `noise.rounds` is per round.
        let mut small = serde_json::json!({"probe": "wakeup", "rounds": 5, "sweep": [1]});
        assert_eq!(split(&mut small), None);
        assert_eq!(small["rounds"], 5);
    }

    #[test]
    fn only_plain_ids_name_a_file() {
        assert_eq!(
            file_name("3f9c1e0b7a5d4c2e8f6a1b3c5d7e9f01").as_deref(),
            Some("samples/3f9c1e0b7a5d4c2e8f6a1b3c5d7e9f01.json")
        );
        let long = "a".repeat(65);
        for bad in [
            "",
            "../x",
            "/etc/passwd",
            "a/b",
            "..",
            ".",
            "x.json",
            "a\0b",
            &long,
        ] {
            assert_eq!(file_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_samples_file_of_another_entry_is_not_used() {
        let d = serde_json::json!({"ratios": [1.0]});
        let bytes = document("aa", "k", "2026-07-10T09:14:03Z", &d);
        assert_eq!(parse(&bytes, "aa").unwrap(), d);
        assert!(
            parse(&bytes, "bb")
                .unwrap_err()
                .contains("belongs to entry aa")
        );
        assert!(parse(b"{", "aa").unwrap_err().contains("not JSON"));
    }
}
