//! Markdown tables (GitHub/CommonMark tables extension) for host documents.

use tabled::builder::Builder;
use tabled::settings::Style;

/// A table with a header row; `|` and newlines in cells are escaped so the
/// column count holds.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut b = Builder::new();
    b.push_record(header.iter().map(|h| h.to_string()));
    for r in rows {
        b.push_record(r.iter().map(|c| cell(c)));
    }
    let mut t = b.build();
    t.with(Style::markdown());
    format!("{t}\n")
}

fn cell(text: &str) -> String {
    let t = text.replace('|', "\\|").replace('\n', "<br>");
    if t.is_empty() { "-".into() } else { t }
}

/// Inline code, safe for values containing backticks.
pub fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}
