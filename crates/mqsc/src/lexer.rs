//! Breaks one command into keyword items, each with its optional value in parentheses, and turns
//! a parenthesised value into a scalar (quoted text keeps its case, bare text is folded to upper
//! case, as MQ folds it). Columns are character offsets so that error pointers line up with what the
//! administrator typed, whatever the encoding.

use crate::command::SyntaxError;

/// A value in parentheses, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Paren {
    /// The text between the parentheses.
    pub raw: String,
    /// Column of the `(`.
    pub open_col: usize,
}

impl Paren {
    /// Column of the first character inside the parentheses.
    pub fn inner_col(&self) -> usize {
        self.open_col + 1
    }
}

/// A keyword and its optional value: `MAXDEPTH(5000)`, `REPLACE`, `QLOCAL('my.q')`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    /// The keyword folded to upper case.
    pub word: String,
    /// The keyword as written.
    pub text: String,
    pub col: usize,
    pub value: Option<Paren>,
}

fn is_separator(c: char) -> bool {
    c.is_whitespace() || c == ','
}

/// Splits a command into items. Blanks and commas separate items; a keyword's value may follow
/// after blanks (`QLOCAL (X)`, as MQ allows).
pub(crate) fn lex(text: &str) -> Result<Vec<Item>, SyntaxError> {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let mut items = Vec::new();
    let mut i = 0;
    loop {
        while i < n && is_separator(chars[i]) {
            i += 1;
        }
        if i >= n {
            return Ok(items);
        }
        match chars[i] {
            '(' => {
                return Err(SyntaxError::new(
                    "a value in parentheses must follow a keyword",
                    i,
                    "(",
                ))
            }
            ')' => return Err(SyntaxError::new("')' has no matching '('", i, ")")),
            '\'' => {
                return Err(SyntaxError::new(
                    "quoted text belongs inside a keyword's parentheses, e.g. DESCR('text')",
                    i,
                    "'",
                ))
            }
            _ => {}
        }
        let start = i;
        while i < n && !is_separator(chars[i]) && !matches!(chars[i], '(' | ')' | '\'') {
            i += 1;
        }
        let text: String = chars[start..i].iter().collect();
        let mut j = i;
        while j < n && chars[j].is_whitespace() {
            j += 1;
        }
        let value = if j < n && chars[j] == '(' {
            let close = find_close(&chars, j, &text)?;
            i = close + 1;
            Some(Paren {
                raw: chars[j + 1..close].iter().collect(),
                open_col: j,
            })
        } else {
            None
        };
        items.push(Item {
            word: text.to_ascii_uppercase(),
            text,
            col: start,
            value,
        });
    }
}

/// The index of the `)` closing the `(` at `open`, skipping quoted text (where `''` is a quote).
fn find_close(chars: &[char], open: usize, keyword: &str) -> Result<usize, SyntaxError> {
    let mut depth = 0usize;
    let mut quote_at: Option<usize> = None;
    let mut k = open;
    while k < chars.len() {
        let c = chars[k];
        if quote_at.is_some() {
            if c == '\'' {
                if chars.get(k + 1) == Some(&'\'') {
                    k += 2;
                    continue;
                }
                quote_at = None;
            }
        } else if c == '\'' {
            quote_at = Some(k);
        } else if c == '(' {
            depth += 1;
        } else if c == ')' {
            depth -= 1;
            if depth == 0 {
                return Ok(k);
            }
        }
        k += 1;
    }
    match quote_at {
        Some(q) => Err(SyntaxError::new(
            "quoted text has no closing quote (write '' for a quote inside it)",
            q,
            chars[q..].iter().collect::<String>(),
        )),
        None => Err(SyntaxError::new(
            format!("the value of {keyword} has no closing ')'"),
            open,
            "(",
        )),
    }
}

/// A value taken from parentheses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Scalar {
    /// Quoted text as written (quotes removed, `''` made `'`); bare text in upper case.
    pub value: String,
    pub quoted: bool,
    /// Column of the value's first character.
    pub col: usize,
    /// The value as written, for error messages.
    pub written: String,
}

/// Reads one scalar from a parenthesised value: `'quoted text'`, a bare word, or nothing.
pub(crate) fn scalar(p: &Paren) -> Result<Scalar, SyntaxError> {
    scalar_at(&p.raw, p.inner_col())
}

/// Reads one scalar from `raw`, whose first character is at column `base`.
pub(crate) fn scalar_at(raw: &str, base: usize) -> Result<Scalar, SyntaxError> {
    let chars: Vec<char> = raw.chars().collect();
    let lead = chars.iter().take_while(|c| c.is_whitespace()).count();
    let end = chars.len() - chars.iter().rev().take_while(|c| c.is_whitespace()).count();
    let col = base + lead;
    if lead >= end {
        return Ok(Scalar {
            value: String::new(),
            quoted: false,
            col,
            written: String::new(),
        });
    }
    let body = &chars[lead..end];
    let written: String = body.iter().collect();
    if body[0] == '\'' {
        let mut value = String::new();
        let mut k = 1;
        loop {
            match body.get(k) {
                None => {
                    return Err(SyntaxError::new(
                        "quoted text has no closing quote (write '' for a quote inside it)",
                        col,
                        written,
                    ))
                }
                Some('\'') if body.get(k + 1) == Some(&'\'') => {
                    value.push('\'');
                    k += 2;
                }
                Some('\'') => break,
                Some(c) => {
                    value.push(*c);
                    k += 1;
                }
            }
        }
        if k + 1 < body.len() {
            return Err(SyntaxError::new(
                "unexpected text after the closing quote",
                col + k + 1,
                body[k + 1..].iter().collect::<String>(),
            ));
        }
        return Ok(Scalar {
            value,
            quoted: true,
            col,
            written,
        });
    }
    if let Some(pos) = body.iter().position(|c| c.is_whitespace() || *c == '\'') {
        let what = if body[pos] == '\'' {
            "a quote inside a bare value; quote the whole value, e.g. DESCR('it''s')"
        } else {
            "a value with blanks must be quoted, e.g. DESCR('two words')"
        };
        return Err(SyntaxError::new(what, col, written));
    }
    Ok(Scalar {
        value: written.to_ascii_uppercase(),
        quoted: false,
        col,
        written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_fold_and_values_attach_across_blanks() {
        let items = lex("def ql (a.b)  maxdepth(10),replace").unwrap();
        let words: Vec<&str> = items.iter().map(|i| i.word.as_str()).collect();
        assert_eq!(words, ["DEF", "QL", "MAXDEPTH", "REPLACE"]);
        assert_eq!(items[1].value.as_ref().unwrap().raw, "a.b");
        assert_eq!(items[2].col, 14);
    }

    #[test]
    fn parentheses_inside_quotes_do_not_close_the_value() {
        let items = lex("DESCR('a ) b ''x'' (')").unwrap();
        let s = scalar(items[0].value.as_ref().unwrap()).unwrap();
        assert_eq!(s.value, "a ) b 'x' (");
        assert!(s.quoted);
    }

    #[test]
    fn an_unterminated_quote_points_at_the_quote() {
        let e = lex("DESCR('abc)").unwrap_err();
        assert_eq!(e.column, 6);
    }

    #[test]
    fn a_missing_close_parenthesis_points_at_the_open_one() {
        let e = lex("DEFINE QLOCAL(X MAXDEPTH(5)").unwrap_err();
        assert_eq!(e.column, 13);
    }

    #[test]
    fn bare_values_are_folded_and_must_be_one_word() {
        assert_eq!(scalar_at(" abc ", 3).unwrap().value, "ABC");
        assert_eq!(scalar_at(" abc ", 3).unwrap().col, 4);
        assert!(scalar_at("two words", 0).is_err());
        assert_eq!(scalar_at("  ", 0).unwrap().value, "");
    }
}
