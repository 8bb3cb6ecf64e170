//! Splitting an MQSC script into commands: comments, blank lines and continuation lines, by
//! MQSC's rules, remembering where each command starts so errors can name the line.

/// One command of a script, joined from its continuation lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceCommand {
    /// The line the command starts on, 1-based.
    pub line: usize,
    pub text: String,
}

/// Splits a script into commands. A line whose first non-blank character is `*` is a comment;
/// blank lines are skipped. A line ending in `+` continues with the next line's text from its
/// first non-blank character; one ending in `-` continues with the next line as it stands. A
/// continuation still open at the end of the text yields a command that keeps its trailing `+`
/// or `-`, so that parsing reports it instead of it vanishing.
pub fn split_commands(text: &str) -> Vec<SourceCommand> {
    let mut out = Vec::new();
    // The command being built: first line, text so far, and how the next line continues it.
    let mut open: Option<(usize, String, char)> = None;
    // A final newline ends the last line; it does not start an empty one.
    let text = text.strip_suffix('\n').unwrap_or(text);
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let (start, mut body, piece) = match open.take() {
            None => {
                let t = line.trim_start();
                if t.is_empty() || t.starts_with('*') {
                    continue;
                }
                (i + 1, String::new(), t)
            }
            Some((start, body, '+')) => (start, body, line.trim_start()),
            Some((start, body, _)) => (start, body, line),
        };
        let piece = piece.trim_end();
        match piece.chars().last() {
            Some(c @ ('+' | '-')) => {
                body.push_str(&piece[..piece.len() - 1]);
                open = Some((start, body, c));
            }
            _ => {
                body.push_str(piece);
                push(&mut out, start, body);
            }
        }
    }
    if let Some((start, mut body, c)) = open {
        body.push(c);
        push(&mut out, start, body);
    }
    out
}

fn push(out: &mut Vec<SourceCommand>, line: usize, body: String) {
    let text = body.trim();
    // A command made only of continuation characters and blanks says nothing.
    if !text.is_empty() {
        out.push(SourceCommand {
            line,
            text: text.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<(usize, String)> {
        split_commands(s)
            .into_iter()
            .map(|c| (c.line, c.text))
            .collect()
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let s = "* header\n\n   * indented comment\nDIS QMGR\r\n  \nEND\n";
        assert_eq!(texts(s), [(4, "DIS QMGR".into()), (6, "END".into())]);
    }

    #[test]
    fn plus_drops_the_next_lines_leading_blanks_and_minus_keeps_them() {
        let s = "DEF QL(A) +\n      DESCR('x')\nDEF QL(B) DESCR('a-\n   b')\n";
        assert_eq!(
            texts(s),
            [
                (1, "DEF QL(A) DESCR('x')".into()),
                (3, "DEF QL(B) DESCR('a   b')".into())
            ]
        );
    }

    #[test]
    fn a_continuation_open_at_the_end_is_kept_for_the_parser_to_report() {
        assert_eq!(texts("DEF QL(A) +"), [(1, "DEF QL(A) +".into())]);
        assert_eq!(texts("DEF QL(A) -\n"), [(1, "DEF QL(A) -".into())]);
    }

    #[test]
    fn a_continued_line_may_look_like_a_comment() {
        assert_eq!(texts("DEF QL(A) -\n* x\n"), [(1, "DEF QL(A) * x".into())]);
    }
}
