//! "Did you mean": the nearest known name to a mistyped id, kind, field or
//! value; shared by the manifest loader and the knob kinds.

/// The closest of `known` to `id` (at most a third of its letters changed),
/// as a sentence to append to an error, or "".
pub fn did_you_mean<'a>(id: &str, known: impl Iterator<Item = &'a str>) -> String {
    let limit = (id.chars().count() / 3).max(2);
    let mut best: Vec<(usize, &str)> = known
        .map(|k| (edit_distance(id, k), k))
        .filter(|&(d, _)| d <= limit)
        .collect();
    best.sort();
    best.dedup();
    let Some(&(d, _)) = best.first() else {
        return String::new();
    };
    let names: Vec<String> = best
        .iter()
        .take_while(|b| b.0 == d)
        .map(|b| format!("{:?}", b.1))
        .collect();
    format!("; did you mean {}?", names.join(" or "))
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_id_gets_the_closest_ids() {
        let ids = ["cpuidle-no-deep-state", "thp-madvise", "thp-never"];
        let m = |id| did_you_mean(id, ids.iter().copied());
        assert_eq!(
            m("cpuidle-no-deep-stat"),
            "; did you mean \"cpuidle-no-deep-state\"?"
        );
        assert_eq!(m("thp-nevr"), "; did you mean \"thp-never\"?");
        assert_eq!(m("thp-xxxx"), "");
        assert_eq!(m("zzz"), "");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
