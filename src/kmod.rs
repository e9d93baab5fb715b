//! kmod's text formats, below both the module kinds (`knob::rules::module`)
//! and tuned's import (`peers::tuned`, which may not ask `knob`): a module
//! name in depmod's modules.dep / modules.builtin lines (depmod(8)), and the
//! words of a modprobe.d `options` line (kmod modprobe.d(5); the kernel's
//! `next_arg` splits them: blanks separate, double quotes keep blanks).

/// The module name of an index line's file (`kernel/x/foo-bar.ko.zst` -> `foo_bar`).
pub fn file_module(file: &str) -> Option<String> {
    let base = file.rsplit('/').next()?;
    let stem = base.split_once(".ko").map(|(s, _)| s)?;
    Some(stem.replace('-', "_"))
}

/// A value as one `options` word: in double quotes when it holds blanks;
/// a double quote or newline cannot be written (the parser has no escape).
pub fn option_word(param: &str, value: &str) -> Result<String, String> {
    if value.contains(['"', '\n', '\r']) {
        return Err(format!(
            "{param}={value:?}: a modprobe.d option value cannot hold a double quote or a newline \
             (kmod's parser has no escape for them)"
        ));
    }
    Ok(if value.contains(char::is_whitespace) || value.is_empty() {
        format!("{param}=\"{value}\"")
    } else {
        format!("{param}={value}")
    })
}

/// Splits an `options` line's words as the kernel's `next_arg` does:
/// blanks separate, double quotes keep blanks in a value and are dropped.
pub fn split_options(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut push = |w: &mut String| {
        if !w.is_empty() {
            let (k, v) = w.split_once('=').unwrap_or((w.as_str(), ""));
            out.push((k.to_string(), v.to_string()));
            w.clear();
        }
    };
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => push(&mut word),
            c => word.push(c),
        }
    }
    push(&mut word);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_and_option_words() {
        assert_eq!(
            file_module("kernel/drivers/cpufreq/cpufreq-conservative.ko.zst").as_deref(),
            Some("cpufreq_conservative")
        );
        assert_eq!(file_module("kernel/foo.o"), None);
        assert_eq!(option_word("a", "1").unwrap(), "a=1");
        assert_eq!(option_word("a", "x y").unwrap(), "a=\"x y\"");
        assert!(option_word("a", "x\"y").is_err());
        assert_eq!(
            split_options("a=1  b=\"x y\" c"),
            [
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("c".into(), String::new())
            ]
        );
    }
}
