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
