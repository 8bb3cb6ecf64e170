//! Response layout: attributes as `NAME(value)` pairs, two to a line in columns as MQ's DISPLAY
//! output has them (so eyes and scripts used to MQ find things where they expect), and MQ's date
//! and time formats.

/// One displayed attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub value: String,
    /// A switch (SHARE/NOSHARE) shows as its word alone.
    pub bare: bool,
}

impl Field {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Field {
        Field {
            name: name.into(),
            value: value.into(),
            bare: false,
        }
    }

    fn render(&self) -> String {
        if self.bare {
            self.value.clone()
        } else {
            pair(&self.name, &self.value)
        }
    }
}

/// `NAME(value)`; an empty value shows as `NAME( )`, as MQ shows blanks.
fn pair(name: &str, value: &str) -> String {
    if value.is_empty() {
        format!("{name}( )")
    } else {
        format!("{name}({value})")
    }
}

/// Indent of every attribute line.
const INDENT: &str = "   ";
/// Width of the left column; the second pair of a line starts after it.
const COLUMN: usize = 40;

fn layout(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut left: Option<String> = None;
    for item in items {
        // A pair too wide for the left column gets a line of its own.
        let wide = item.chars().count() >= COLUMN - 1;
        match left.take() {
            Some(l) if !wide => lines.push(format!("{INDENT}{l:<COLUMN$}{item}")),
            Some(l) => {
                lines.push(format!("{INDENT}{l}"));
                lines.push(format!("{INDENT}{item}"));
            }
            None if wide => lines.push(format!("{INDENT}{item}")),
            None => left = Some(item),
        }
    }
    if let Some(l) = left {
        lines.push(format!("{INDENT}{l}"));
    }
    lines
}

pub fn render_fields(fields: &[Field]) -> Vec<String> {
    layout(fields.iter().map(Field::render))
}

/// Lays out attribute pairs the way DISPLAY does: `NAME(value)`, two to a line in columns.
pub fn format_attributes(pairs: &[(String, String)]) -> String {
    layout(pairs.iter().map(|(k, v)| pair(k, v))).join("\n")
}

/// MQ's date format, `YYYY-MM-DD` (UTC); blank for 0 (never).
pub fn mq_date(ms: u64) -> String {
    if ms == 0 {
        return String::new();
    }
    let (y, m, d) = ferrymq_types::time::civil_from_days((ms / 86_400_000) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// MQ's time format, `HH.MM.SS` (UTC); blank for 0 (never).
pub fn mq_time(ms: u64) -> String {
    if ms == 0 {
        return String::new();
    }
    let s = (ms / 1000) % 86_400;
    format!("{:02}.{:02}.{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_sit_two_to_a_line_in_a_column_of_forty() {
        let f = [
            Field::new("QUEUE", "Q1"),
            Field::new("TYPE", "QLOCAL"),
            Field::new("DESCR", ""),
        ];
        let lines = render_fields(&f);
        assert_eq!(lines[0], format!("   {:<40}TYPE(QLOCAL)", "QUEUE(Q1)"));
        assert_eq!(lines[1], "   DESCR( )");
    }

    #[test]
    fn a_wide_pair_takes_a_line_of_its_own() {
        let long = "X".repeat(45);
        let text = format_attributes(&[
            ("A".into(), "1".into()),
            ("DESCR".into(), long.clone()),
            ("B".into(), "2".into()),
        ]);
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            ["   A(1)", &format!("   DESCR({long})"), "   B(2)"]
        );
    }

    #[test]
    fn dates_and_times_use_mq_formats_in_utc() {
        // 2021-03-04 05:06:07 UTC
        let ms = 1_614_834_367_000;
        assert_eq!(mq_date(ms), "2021-03-04");
        assert_eq!(mq_time(ms), "05.06.07");
        assert_eq!(mq_date(0), "");
        assert_eq!(mq_date(951_782_400_000), "2000-02-29");
    }
}
