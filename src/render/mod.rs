//! Renderers: tables for people, YAML/JSON for machines (stable field names,
//! documented in the README).

pub mod apply;
pub mod audit;
pub mod inventory;
pub mod markdown;
pub mod network;
pub mod noise;
pub mod probe;
pub mod prometheus;
pub mod svg;
pub mod sweep;
pub mod tune;
pub mod verify;

use anyhow::Result;
use serde::Serialize;
use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Modify, Style, Width};

/// Long values (command lines, mitigation texts) wrap instead of widening every row.
const VALUE_WIDTH: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Yaml,
    Json,
    /// Markdown tables (`report`).
    Markdown,
    /// Prometheus text exposition (`audit`).
    Prometheus,
}

/// Serializes for machines, with the output's `schema` first; `None` for
/// the table format (the caller renders).
pub fn machine<T: Serialize + crate::contract::Contract>(
    format: Format,
    value: &T,
) -> Result<Option<String>> {
    let value = crate::contract::Versioned::new(value);
    if matches!(format, Format::Json | Format::Yaml) {
        crate::contract::DOCUMENT_RENDERED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(match format {
        Format::Table => None,
        Format::Json => Some(serde_json::to_string_pretty(&value)? + "\n"),
        Format::Yaml => Some(serde_yaml::to_string(&value)?),
        Format::Markdown | Format::Prometheus => anyhow::bail!(
            "--format {}: only {} renders it; use table, yaml or json here",
            if format == Format::Markdown {
                "markdown"
            } else {
                "prometheus"
            },
            if format == Format::Markdown {
                "`report`"
            } else {
                "`audit`"
            }
        ),
    })
}

/// The width tables must fit: `COLUMNS`, else the terminal's, else none (a
/// pipe or a file gets whole lines).
pub fn width_limit() -> Option<usize> {
    *WIDTH_LIMIT.get_or_init(read_width_limit)
}

static WIDTH_LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();

/// `--wide`: tables at their natural width for the rest of the run.
pub fn no_width_limit() {
    let _ = WIDTH_LIMIT.set(None);
}

fn read_width_limit() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|n| *n >= 20)
    {
        return Some(n);
    }
    terminal_width()
}

fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize; stdout is a terminal.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col >= 20).then_some(ws.ws_col as usize)
}

/// Whether statuses get colour: stdout a terminal and `NO_COLOR` unset.
pub fn colour() -> bool {
    use std::io::IsTerminal;
    static COLOUR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COLOUR.get_or_init(|| {
        std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
    })
}

/// Whether `c` is a control character a terminal could act on: C0 (but
/// newline and tab, which lay text out), DEL and C1.
fn is_control(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}')
}

/// Text from a tree, a manifest or an audit JSON made safe for a terminal:
/// every control character (ESC, CR, BEL, C1 CSI...) but newline and tab is
/// written as a visible escape (`\x1b`, `\u{9b}`), so a CPU model name or a
/// sysfs value cannot recolour, move the cursor or retitle the terminal.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if (c as u32) < 0x80 && is_control(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Text for a person: control characters escaped ([`escape_controls`]);
/// lines outside tables wrapped at word boundaries to the width limit
/// (continuations indented under the first word), no trailing spaces.
/// Colour, when any, is added after this.
pub fn wrap_prose(text: &str) -> String {
    let text = &*escape_controls(text);
    let Some(width) = width_limit() else {
        return trim_lines(text) + if text.ends_with('\n') { "\n" } else { "" };
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split('\n') {
        let line = line.trim_end();
        let is_table = line.contains(['│', '┌', '├', '└']);
        if is_table || line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let hang = " ".repeat((indent + 2).min(width / 2));
        let mut current = line[..indent].to_string();
        let mut empty = true;
        for word in line.split_whitespace() {
            let len = current.chars().count();
            if !empty && len + 1 + word.chars().count() > width {
                out.push_str(&current);
                out.push('\n');
                current = hang.clone();
                empty = true;
            }
            if !empty {
                current.push(' ');
            }
            current.push_str(word);
            empty = false;
            // A word longer than the line is cut, so no line exceeds the width.
            while current.chars().count() > width {
                let cut: String = current.chars().take(width).collect();
                out.push_str(&cut);
                out.push('\n');
                current = hang.clone() + &current.chars().skip(width).collect::<String>();
            }
        }
        out.push_str(&current);
        out.push('\n');
    }
    out.pop();
    out
}

pub fn trim_lines(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Colours status words in column `col` of a `Style::sharp()` table (ok green,
/// drift and errors red, the rest yellow), when `colour()` says so.
pub fn colour_statuses(text: String, col: usize) -> String {
    if !colour() {
        return text;
    }
    let paint = |word: &str| -> Option<&'static str> {
        Some(match word {
            "ok" | "applied" | "reverted" | "pass" | "met" | "current" | "unchanged" => "32",
            "drift" | "error" | "failed" | "fail" | "contradicted" | "missed" | "stale" => "31",
            "unknown" | "skipped" | "not exposed" | "unsupported" | "partial" | "warn" => "33",
            _ => return None,
        })
    };
    text.lines()
        .map(|line| {
            let cells: Vec<&str> = line.split('│').collect();
            if cells.len() <= col + 1 {
                return line.to_string();
            }
            let cell = cells[col + 1];
            let word = cell.trim();
            match paint(word) {
                Some(code) => {
                    let painted = cell.replacen(word, &format!("\x1b[{code}m{word}\x1b[0m"), 1);
                    let mut v: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
                    v[col + 1] = painted;
                    v.join("│")
                }
                None => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn text_width(s: &str) -> usize {
    s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

fn word_width(s: &str) -> usize {
    s.split_whitespace()
        .map(|w| w.chars().count())
        .max()
        .unwrap_or(0)
}

/// The narrowest a column is made when long words break (or its own width).
const MIN_COLUMN: usize = 8;

/// Where a long word may break: after these (`cpufreq-governor-performance`,
/// `/etc/systemd/system.conf.d/x.conf`, `net.core.busy_poll`).
fn breaks_after(c: char) -> bool {
    matches!(c, '-' | '.' | '/' | '_' | ',' | ':' | '=')
}

/// The longest piece of `s` once words break after [`breaks_after`].
fn piece_width(s: &str) -> usize {
    let mut best = 0;
    for w in s.split_whitespace() {
        let mut run = 0;
        for c in w.chars() {
            run += 1;
            if breaks_after(c) {
                best = best.max(run);
                run = 0;
            }
        }
        best = best.max(run);
    }
    best
}

/// `text` in lines of at most `width` characters: at spaces where a word
/// fits, else after a break character, else anywhere.
fn wrap_cell(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut lines = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        for word in para.split_whitespace() {
            let len = line.chars().count();
            if len > 0 && len + 1 + word.chars().count() <= width {
                line.push(' ');
                line.push_str(word);
                continue;
            }
            if len > 0 {
                lines.push(std::mem::take(&mut line));
            }
            let mut rest: Vec<char> = word.chars().collect();
            while rest.len() > width {
                let cut = (1..=width)
                    .rev()
                    .find(|&k| breaks_after(rest[k - 1]))
                    .unwrap_or(width);
                lines.push(rest[..cut].iter().collect());
                rest.drain(..cut);
            }
            line = rest.into_iter().collect();
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// Column widths that fit `limit` without splitting a word: the column with
/// the most room above its longest word gives one character at a time.
/// `None` when even that does not fit.
fn shrink(natural: &[usize], words: &[usize], budget: usize) -> Option<Vec<usize>> {
    let mut w = natural.to_vec();
    let mut total: usize = w.iter().sum();
    while total > budget {
        let (i, slack) = w
            .iter()
            .zip(words)
            .map(|(a, b)| a.saturating_sub(*b))
            .enumerate()
            .max_by_key(|(i, s)| (*s, w[*i]))?;
        if slack == 0 {
            return None;
        }
        w[i] -= 1;
        total -= 1;
    }
    Some(w)
}

/// Rows (the first is the header when `header`) as a table that fits the
/// width limit: columns wrap at word boundaries, `caps` bound a column's
/// width even without a limit. A grid that cannot fit without splitting
/// words becomes one block per row (`header  value` lines) instead; facts
/// (`header == false`) split long words rather than change shape.
pub fn layout(rows: &[Vec<String>], header: bool, caps: &[(usize, usize)]) -> String {
    // Escaped before the widths are counted, so a cell with a control
    // character keeps the table's shape.
    let escaped: Vec<Vec<String>>;
    let rows = if rows.iter().flatten().any(|c| c.chars().any(is_control)) {
        escaped = rows
            .iter()
            .map(|r| r.iter().map(|c| escape_controls(c).into_owned()).collect())
            .collect();
        &escaped[..]
    } else {
        rows
    };
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut natural = vec![0; n];
    let mut words = vec![0; n];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            natural[i] = natural[i].max(text_width(c));
            words[i] = words[i].max(word_width(c));
        }
    }
    let whole = natural.clone();
    // Widths here count characters; tabled counts display columns, which
    // differ only outside ASCII (a CJK process name is two per character).
    let ascii: Vec<bool> = (0..n)
        .map(|i| rows.iter().all(|r| r.get(i).is_none_or(|c| c.is_ascii())))
        .collect();
    for &(col, cap) in caps {
        if col < n {
            natural[col] = natural[col].min(cap);
            words[col] = words[col].min(cap);
        }
    }
    // Sharp tables spend 3 characters per column plus one; blank ones 2 per column.
    let overhead = if header { 3 * n + 1 } else { 2 * n };
    let mut broken: Option<Vec<usize>> = None;
    let widths = match width_limit() {
        Some(limit) if natural.iter().sum::<usize>() + overhead > limit => {
            let budget = limit.saturating_sub(overhead);
            match shrink(&natural, &words, budget) {
                Some(w) => w,
                None if header => {
                    // Long names and paths break after `-`, `.`, `/`, `_`
                    // rather than turn the grid into blocks, while every
                    // column keeps room for its heading and a short word.
                    let mut pieces = vec![0; n];
                    for r in rows {
                        for (i, c) in r.iter().enumerate() {
                            pieces[i] = pieces[i].max(piece_width(c));
                        }
                    }
                    let floor: Vec<usize> = (0..n)
                        .map(|i| {
                            let head = rows[0].get(i).map_or(0, |h| text_width(h));
                            pieces[i].max(head).max(natural[i].min(MIN_COLUMN))
                        })
                        .collect();
                    match shrink(&natural, &floor, budget) {
                        Some(w) => {
                            broken = Some(w.clone());
                            w
                        }
                        None => return records(rows),
                    }
                }
                None => {
                    let ones = vec![1; n];
                    shrink(&natural, &ones, budget).unwrap_or(ones)
                }
            }
        }
        _ => natural,
    };
    let mut b = Builder::new();
    for r in rows {
        match &broken {
            // Cells wrapped here, at spaces first and then after the break
            // characters, so tabled has nothing left to wrap.
            Some(w) => b.push_record(r.iter().enumerate().map(|(i, c)| {
                if w[i] < whole[i] {
                    wrap_cell(c, w[i])
                } else {
                    c.clone()
                }
            })),
            None => b.push_record(r.iter().cloned()),
        }
    }
    let mut table = b.build();
    if header {
        table.with(Style::sharp());
    } else {
        table.with(Style::blank());
    }
    // Only columns narrower than their longest line wrap: the wrap pass
    // over every cell was a large part of the time a table took.
    for (i, w) in widths.iter().enumerate() {
        if broken.is_none() && (*w < whole[i] || !ascii[i]) || broken.is_some() && !ascii[i] {
            table
                .with(Modify::new(Columns::one(i)).with(Width::wrap((*w).max(1)).keep_words(true)));
        }
    }
    trim_lines(&table.to_string())
}

/// A grid too wide for the terminal: each row a block, its first cell as the
/// heading and the others as `header  value` lines.
fn records(rows: &[Vec<String>]) -> String {
    let Some((head, body)) = rows.split_first() else {
        return String::new();
    };
    let key_width = head
        .iter()
        .skip(1)
        .map(|h| h.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for r in body {
        out.push(r.first().cloned().unwrap_or_default());
        for (h, v) in head.iter().zip(r).skip(1) {
            if v.is_empty() {
                continue;
            }
            out.push(format!("  {h:<key_width$}  {}", v.replace('\n', " ")));
        }
    }
    trim_lines(&out.join("\n"))
}

/// A titled two-column table of facts.
pub fn facts(title: &str, rows: &[(String, String)]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(k, v)| vec![k.clone(), v.clone()])
        .collect();
    format!("{title}\n{}\n\n", layout(&rows, false, &[(1, VALUE_WIDTH)]))
}

/// A titled table with a header row.
pub fn grid(title: &str, header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut all = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    all.extend(rows);
    format!("{title}\n{}\n\n", layout(&all, true, &[]))
}

pub const NOT_EXPOSED: &str = "not exposed";

/// `1 file`, `2 files`; `not exposed` packages when the count is unknown.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

pub fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => NOT_EXPOSED.to_string(),
    }
}

/// A CPU list, `none` when empty, "not exposed" when absent.
pub fn cpus(l: &Option<crate::cpulist::CpuList>) -> String {
    match l {
        None => NOT_EXPOSED.into(),
        Some(l) if l.is_empty() => "none".into(),
        Some(l) => l.to_string(),
    }
}

/// KiB as a person reads it: `48 KiB`, `1.0 MiB`, `23.5 GiB`.
pub fn kib(v: Option<u64>) -> String {
    match v {
        None => NOT_EXPOSED.into(),
        Some(k) if k >= 1024 * 1024 => format!("{:.1} GiB", k as f64 / (1024.0 * 1024.0)),
        Some(k) if k >= 1024 => format!("{:.1} MiB", k as f64 / 1024.0),
        Some(k) => format!("{k} KiB"),
    }
}

/// One cache row: name, type, size of one, instances, first instance's sharing.
pub fn cache_row(k: &crate::inventory::Cache) -> Vec<String> {
    vec![
        k.level
            .map(|l| format!("L{l}"))
            .unwrap_or_else(|| k.index.clone()),
        opt(&k.kind),
        kib(k.size_kib),
        k.instances.to_string(),
        k.shared_cpu_lists
            .first()
            .map(|l| l.to_string())
            .unwrap_or_default(),
    ]
}

/// `active (control: on)`, as inventory and the host document show SMT.
pub fn smt_state(c: &crate::inventory::Cpu) -> String {
    let state = match c.smt.active {
        Some(true) => "active",
        Some(false) => "inactive",
        None => NOT_EXPOSED,
    };
    match &c.smt.control {
        Some(ctl) => format!("{state} (control: {ctl})"),
        None => state.to_string(),
    }
}

/// `12 (8 cores x 1, 4 cores x 2)`: the core count with threads per core.
pub fn cores_text(c: &crate::inventory::Cpu) -> String {
    let hist: Vec<String> = c
        .threads_per_core_histogram
        .iter()
        .map(|(t, n)| format!("{n} cores x {t}"))
        .collect();
    match c.cores {
        Some(n) => format!("{n} ({})", hist.join(", ")),
        None => NOT_EXPOSED.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_layout_kept() {
        assert_eq!(escape_controls("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(
            escape_controls("\x1b[31mred\r\x07\x7f\u{9b}2J é"),
            "\\x1b[31mred\\x0d\\x07\\x7f\\u{9b}2J é"
        );
        let table = layout(
            &[
                vec!["a".into(), "b".into()],
                vec!["\x1b[2J".into(), "x".into()],
            ],
            true,
            &[],
        );
        assert!(
            !table.contains('\x1b') && table.contains("\\x1b[2J"),
            "{table}"
        );
        assert!(!wrap_prose("t\x1b]0;title\x07").contains('\x1b'));
    }

    #[test]
    fn long_names_break_after_their_separators_and_fit_the_width() {
        assert_eq!(piece_width("cpufreq-governor-performance"), 11);
        assert_eq!(piece_width("/etc/systemd/system.conf.d"), 8);
        assert_eq!(
            wrap_cell("cpufreq-governor-performance on all", 12),
            "cpufreq-\ngovernor-\nperformance\non all"
        );
        assert_eq!(
            wrap_cell(
                "/etc/systemd/system/irqbalance.service.d/50-hostknob.conf",
                20
            ),
            "/etc/systemd/system/\nirqbalance.service.\nd/50-hostknob.conf"
        );
        // A word with nowhere to break is cut at the width.
        assert_eq!(wrap_cell("abcdefghij", 4), "abcd\nefgh\nij");
        for w in [4, 8, 13, 20] {
            let cell = wrap_cell("states with exit latency ≥ 20 µs on CPUs all", w);
            assert!(cell.lines().all(|l| l.chars().count() <= w), "{w}: {cell}");
        }
    }
}
