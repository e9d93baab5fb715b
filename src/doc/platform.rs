//! The document's platform section: MSR-level power controls, each with the
//! `rdmsr` command (msr-tools) that reads it without hostknob.

use super::DocInput;
use crate::render::NOT_EXPOSED;
use crate::render::markdown::{code, table};

pub fn section(d: &DocInput) -> String {
    let Some(p) = &d.inv.platform else {
        return String::new();
    };
    let mut o = String::from("## Platform power controls (MSRs)\n\n");
    if let Some(why) = &p.unavailable {
        o += &format!("Model-specific registers are {NOT_EXPOSED}: {why}.\n\n");
        return o;
    }
    if let Some(m) = &p.model {
        o += &format!("Decoded per the model table's entry {}.\n\n", code(m));
    }
    let mut rows = Vec::new();
    for f in &p.facts {
        let place = match f.bits.as_str() {
            "" => f.register.clone(),
            bits => format!("{} [{bits}]", f.register),
        };
        if let Some(why) = &f.unavailable {
            rows.push(vec![
                f.label.clone(),
                place,
                "-".into(),
                format!("{NOT_EXPOSED}: {why}"),
                "-".into(),
            ]);
            continue;
        }
        let all = f.groups.len() == 1;
        for g in &f.groups {
            let value = match (&g.value, &g.unavailable) {
                (Some(v), _) => v.clone(),
                (None, why) => format!("{NOT_EXPOSED}: {}", why.as_deref().unwrap_or("unread")),
            };
            rows.push(vec![
                f.label.clone(),
                place.clone(),
                if all {
                    "all".into()
                } else {
                    g.cpus.to_string()
                },
                value,
                code(&g.command),
            ]);
        }
    }
    o += &table(&["fact", "MSR [bits]", "CPUs", "value", "command"], &rows);
    o += "\n";
    o
}

/// The uncore floor and ceiling per die (TPMI: per power domain), from sysfs
/// with the `cat` that reads them.
pub fn uncore(d: &DocInput) -> String {
    let Some(p) = &d.inv.platform else {
        return String::new();
    };
    let u = &p.uncore;
    let mut o = String::from("## Uncore frequency per die\n\n");
    if let Some(why) = &u.unavailable {
        o += &format!("The uncore frequency limits are {NOT_EXPOSED}: {why}.\n\n");
        return o;
    }
    let tpmi = u.layout.as_deref() == Some("tpmi");
    if tpmi {
        o += "TPMI sets the limits per power domain (`uncoreNN/`); the \
              `package_XX_die_YY/` directories are then root domains standing for \
              their whole package, not listed.\n\n";
    }
    let mhz =
        |k: Option<u64>| k.map_or_else(|| NOT_EXPOSED.to_string(), |k| format!("{} MHz", k / 1000));
    let rows: Vec<Vec<String>> = u
        .domains
        .iter()
        .map(|x| {
            vec![
                x.package.to_string(),
                x.die.to_string(),
                mhz(x.min_khz),
                mhz(x.max_khz),
                format!("{}..{}", mhz(x.initial_min_khz), mhz(x.initial_max_khz)),
                code(&x.command),
            ]
        })
        .collect();
    let die = if tpmi { "domain" } else { "die" };
    o += &table(
        &[
            "package",
            die,
            "floor",
            "ceiling",
            "hardware range",
            "command",
        ],
        &rows,
    );
    o += "\n";
    o
}
