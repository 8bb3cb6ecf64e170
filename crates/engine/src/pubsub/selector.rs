//! Message selectors: the SQL92 subset a subscription filters publications with, evaluated on the
//! publication's message properties at publish time.
//!
//! The subset: property names (letters, digits, `_`, `$`, `.`; not a keyword); string literals
//! in single quotes (`''` is a quote), numbers (integer or decimal, optionally signed and with an
//! exponent), `TRUE`, `FALSE`; comparisons `=`, `<>`, `<`, `>`, `<=`, `>=` (numbers with numbers,
//! strings with strings, booleans with `=` and `<>`); `[NOT] LIKE 'pattern' [ESCAPE 'c']` (`%` any
//! characters, `_` one); `[NOT] IN ('a', 'b', ...)`; `IS [NOT] NULL`; `AND`, `OR`, `NOT` and
//! parentheses. Keywords are case-insensitive. As in SQL, a comparison with a missing property
//! (or values of different types) is unknown, and a publication is delivered only when the
//! selector is true. No arithmetic and no `BETWEEN`.

use ferrymq_types::limits::{SELECTOR_DEPTH_MAX, SELECTOR_LEN_MAX_BYTES};
use ferrymq_types::{mqerr, MqError, Properties, PropertyValue};

#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Str(String),
    Num(f64),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Prop(String),
    Lit(Lit),
}

#[derive(Debug, Clone, PartialEq)]
enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp(Operand, Cmp, Operand),
    Like {
        prop: String,
        pattern: Vec<LikePart>,
        negated: bool,
    },
    In {
        prop: String,
        values: Vec<String>,
        negated: bool,
    },
    IsNull {
        prop: String,
        negated: bool,
    },
    /// A bare property or literal used as a condition (a boolean property, `TRUE`).
    Value(Operand),
}

#[derive(Debug, Clone, PartialEq)]
enum LikePart {
    Char(char),
    One,
    Any,
}

/// A parsed selector, ready to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    expr: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
}

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let cs: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' {
            out.push(Tok::LParen);
            i += 1;
        } else if c == ')' {
            out.push(Tok::RParen);
            i += 1;
        } else if c == ',' {
            out.push(Tok::Comma);
            i += 1;
        } else if c == '\'' {
            let mut v = String::new();
            i += 1;
            loop {
                match cs.get(i) {
                    None => return Err("a string literal is not closed (')".into()),
                    Some('\'') if cs.get(i + 1) == Some(&'\'') => {
                        v.push('\'');
                        i += 2;
                    }
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some(&ch) => {
                        v.push(ch);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Str(v));
        } else if "<>=".contains(c) {
            let two: String = cs[i..(i + 2).min(cs.len())].iter().collect();
            let op = match two.as_str() {
                "<>" => "<>",
                "<=" => "<=",
                ">=" => ">=",
                _ => match c {
                    '<' => "<",
                    '>' => ">",
                    _ => "=",
                },
            };
            i += op.len();
            out.push(Tok::Op(op));
        } else if c.is_ascii_digit()
            || ((c == '-' || c == '+' || c == '.')
                && cs
                    .get(i + 1)
                    .is_some_and(|d| d.is_ascii_digit() || *d == '.'))
        {
            let start = i;
            i += 1;
            while i < cs.len()
                && (cs[i].is_ascii_digit()
                    || cs[i] == '.'
                    || cs[i] == 'e'
                    || cs[i] == 'E'
                    || ((cs[i] == '-' || cs[i] == '+') && matches!(cs[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let text: String = cs[start..i].iter().collect();
            let v: f64 = text
                .parse()
                .map_err(|_| format!("'{text}' is not a number"))?;
            out.push(Tok::Num(v));
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < cs.len() && (cs[i].is_alphanumeric() || "_$.".contains(cs[i])) {
                i += 1;
            }
            out.push(Tok::Ident(cs[start..i].iter().collect()));
        } else {
            return Err(format!("unexpected character '{c}'"));
        }
    }
    Ok(out)
}

const KEYWORDS: &[&str] = &[
    "AND", "OR", "NOT", "LIKE", "IN", "IS", "NULL", "TRUE", "FALSE", "ESCAPE", "BETWEEN",
];

struct Parser {
    toks: Vec<Tok>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(w)) if w.eq_ignore_ascii_case(k))
    }

    fn eat_keyword(&mut self, k: &str) -> bool {
        if self.keyword(k) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_keyword(&mut self, k: &str) -> Result<(), String> {
        if self.eat_keyword(k) {
            Ok(())
        } else {
            Err(format!("{k} expected {}", self.here()))
        }
    }

    fn here(&self) -> String {
        match self.peek() {
            None => "at the end".into(),
            Some(t) => format!("at {t:?}"),
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > SELECTOR_DEPTH_MAX {
            return Err(format!(
                "the selector nests deeper than {SELECTOR_DEPTH_MAX} levels"
            ));
        }
        let mut e = self.and()?;
        while self.eat_keyword("OR") {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.not()?;
        while self.eat_keyword("AND") {
            e = Expr::And(Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.eat_keyword("NOT") {
            self.depth += 1;
            if self.depth > SELECTOR_DEPTH_MAX {
                return Err(format!(
                    "the selector nests deeper than {SELECTOR_DEPTH_MAX} levels"
                ));
            }
            let e = Expr::Not(Box::new(self.not()?));
            self.depth -= 1;
            return Ok(e);
        }
        self.condition()
    }

    fn operand(&mut self) -> Result<Operand, String> {
        match self.peek().cloned() {
            Some(Tok::Str(s)) => {
                self.at += 1;
                Ok(Operand::Lit(Lit::Str(s)))
            }
            Some(Tok::Num(n)) => {
                self.at += 1;
                Ok(Operand::Lit(Lit::Num(n)))
            }
            Some(Tok::Ident(w)) if w.eq_ignore_ascii_case("TRUE") => {
                self.at += 1;
                Ok(Operand::Lit(Lit::Bool(true)))
            }
            Some(Tok::Ident(w)) if w.eq_ignore_ascii_case("FALSE") => {
                self.at += 1;
                Ok(Operand::Lit(Lit::Bool(false)))
            }
            Some(Tok::Ident(w)) if KEYWORDS.iter().any(|k| w.eq_ignore_ascii_case(k)) => {
                Err(format!("a property name or value expected, found {w}"))
            }
            Some(Tok::Ident(w)) => {
                self.at += 1;
                Ok(Operand::Prop(w))
            }
            _ => Err(format!("a property name or value expected {}", self.here())),
        }
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        match self.peek().cloned() {
            Some(Tok::Str(s)) => {
                self.at += 1;
                Ok(s)
            }
            _ => Err(format!("{what} must be a string literal {}", self.here())),
        }
    }

    fn condition(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(&Tok::LParen) {
            self.at += 1;
            let e = self.or()?;
            if self.peek() != Some(&Tok::RParen) {
                return Err(format!("')' expected {}", self.here()));
            }
            self.at += 1;
            return Ok(e);
        }
        let left = self.operand()?;
        let prop = |o: &Operand, what: &str| match o {
            Operand::Prop(p) => Ok(p.clone()),
            Operand::Lit(_) => Err(format!("{what} applies to a property name")),
        };
        if let Some(Tok::Op(op)) = self.peek().cloned() {
            self.at += 1;
            let cmp = match op {
                "=" => Cmp::Eq,
                "<>" => Cmp::Ne,
                "<" => Cmp::Lt,
                ">" => Cmp::Gt,
                "<=" => Cmp::Le,
                _ => Cmp::Ge,
            };
            let right = self.operand()?;
            return Ok(Expr::Cmp(left, cmp, right));
        }
        if self.eat_keyword("IS") {
            let negated = self.eat_keyword("NOT");
            self.expect_keyword("NULL")?;
            return Ok(Expr::IsNull {
                prop: prop(&left, "IS NULL")?,
                negated,
            });
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("LIKE") {
            let pattern = self.string("the LIKE pattern")?;
            let escape = if self.eat_keyword("ESCAPE") {
                let e = self.string("the ESCAPE character")?;
                let mut cs = e.chars();
                match (cs.next(), cs.next()) {
                    (Some(c), None) => Some(c),
                    _ => return Err("ESCAPE takes exactly one character".into()),
                }
            } else {
                None
            };
            return Ok(Expr::Like {
                prop: prop(&left, "LIKE")?,
                pattern: like_pattern(&pattern, escape)?,
                negated,
            });
        }
        if self.eat_keyword("IN") {
            if self.peek() != Some(&Tok::LParen) {
                return Err(format!("'(' expected after IN {}", self.here()));
            }
            self.at += 1;
            let mut values = vec![self.string("an IN value")?];
            while self.peek() == Some(&Tok::Comma) {
                self.at += 1;
                values.push(self.string("an IN value")?);
            }
            if self.peek() != Some(&Tok::RParen) {
                return Err(format!("')' expected {}", self.here()));
            }
            self.at += 1;
            return Ok(Expr::In {
                prop: prop(&left, "IN")?,
                values,
                negated,
            });
        }
        if negated {
            return Err(format!("LIKE or IN expected after NOT {}", self.here()));
        }
        Ok(Expr::Value(left))
    }
}

fn like_pattern(p: &str, escape: Option<char>) -> Result<Vec<LikePart>, String> {
    let mut out = Vec::new();
    let mut cs = p.chars();
    while let Some(c) = cs.next() {
        if Some(c) == escape {
            match cs.next() {
                Some(n) => out.push(LikePart::Char(n)),
                None => return Err("the LIKE pattern ends with its escape character".into()),
            }
        } else if c == '%' {
            out.push(LikePart::Any);
        } else if c == '_' {
            out.push(LikePart::One);
        } else {
            out.push(LikePart::Char(c));
        }
    }
    Ok(out)
}

fn like_matches(pattern: &[LikePart], s: &[char]) -> bool {
    // Iterative matching with one backtrack point for the last '%' (linear in practice).
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        match pattern.get(p) {
            Some(LikePart::Char(c)) if *c == s[i] => {
                p += 1;
                i += 1;
            }
            Some(LikePart::One) => {
                p += 1;
                i += 1;
            }
            Some(LikePart::Any) => {
                star = Some((p, i));
                p += 1;
            }
            _ => match star {
                Some((sp, si)) => {
                    p = sp + 1;
                    i = si + 1;
                    star = Some((sp, si + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|x| *x == LikePart::Any)
}

impl Selector {
    /// Parses a selector; the error is MQRC_SELECTOR_SYNTAX_ERROR and says where.
    pub fn parse(text: &str) -> Result<Selector, MqError> {
        if text.len() > SELECTOR_LEN_MAX_BYTES {
            return Err(mqerr!(
                SELECTOR_SYNTAX_ERROR,
                "the selector is {} bytes long; at most {SELECTOR_LEN_MAX_BYTES} are allowed",
                text.len()
            ));
        }
        let fail = |e: String| mqerr!(SELECTOR_SYNTAX_ERROR, "selector \"{text}\": {e}");
        let toks = tokens(text).map_err(fail)?;
        let mut p = Parser {
            toks,
            at: 0,
            depth: 0,
        };
        let expr = p.or().map_err(fail)?;
        if p.at != p.toks.len() {
            return Err(fail(format!("unexpected {}", p.here())));
        }
        Ok(Selector { expr })
    }

    /// True when the properties satisfy the selector (unknown is not true).
    pub fn matches(&self, props: &Properties) -> bool {
        eval(&self.expr, props) == Some(true)
    }
}

fn value(o: &Operand, props: &Properties) -> Option<Lit> {
    match o {
        Operand::Lit(l) => Some(l.clone()),
        Operand::Prop(name) => match props.get(name)? {
            PropertyValue::String(s) => Some(Lit::Str(s.clone())),
            PropertyValue::Int(i) => Some(Lit::Num(*i as f64)),
            PropertyValue::Float(f) => Some(Lit::Num(*f)),
            PropertyValue::Bool(b) => Some(Lit::Bool(*b)),
            PropertyValue::Bytes(_) => None,
        },
    }
}

fn string_prop(name: &str, props: &Properties) -> Option<String> {
    match props.get(name)? {
        PropertyValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Three-valued: `None` is unknown.
fn eval(e: &Expr, props: &Properties) -> Option<bool> {
    match e {
        Expr::And(a, b) => match (eval(a, props), eval(b, props)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Expr::Or(a, b) => match (eval(a, props), eval(b, props)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Expr::Not(a) => eval(a, props).map(|b| !b),
        Expr::Value(o) => match value(o, props)? {
            Lit::Bool(b) => Some(b),
            _ => None,
        },
        Expr::Cmp(l, op, r) => {
            let (l, r) = (value(l, props)?, value(r, props)?);
            let ord = match (&l, &r) {
                (Lit::Num(a), Lit::Num(b)) => a.partial_cmp(b)?,
                (Lit::Str(a), Lit::Str(b)) => a.cmp(b),
                (Lit::Bool(a), Lit::Bool(b)) => match op {
                    Cmp::Eq => return Some(a == b),
                    Cmp::Ne => return Some(a != b),
                    _ => return None,
                },
                _ => return None,
            };
            use std::cmp::Ordering::*;
            Some(match op {
                Cmp::Eq => ord == Equal,
                Cmp::Ne => ord != Equal,
                Cmp::Lt => ord == Less,
                Cmp::Gt => ord == Greater,
                Cmp::Le => ord != Greater,
                Cmp::Ge => ord != Less,
            })
        }
        Expr::Like {
            prop,
            pattern,
            negated,
        } => {
            let s: Vec<char> = string_prop(prop, props)?.chars().collect();
            Some(like_matches(pattern, &s) != *negated)
        }
        Expr::In {
            prop,
            values,
            negated,
        } => {
            let s = string_prop(prop, props)?;
            Some(values.contains(&s) != *negated)
        }
        Expr::IsNull { prop, negated } => Some(props.get(prop).is_none() != *negated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props() -> Properties {
        Properties(vec![
            ("colour".into(), PropertyValue::String("red".into())),
            ("size".into(), PropertyValue::Int(10)),
            ("weight".into(), PropertyValue::Float(2.5)),
            ("urgent".into(), PropertyValue::Bool(true)),
            ("name".into(), PropertyValue::String("it's_100%".into())),
        ])
    }

    #[test]
    fn the_documented_subset_evaluates_as_sql_does() {
        let p = props();
        let table: &[(&str, bool)] = &[
            ("colour = 'red'", true),
            ("colour <> 'red'", false),
            ("size > 9 AND size < 11", true),
            ("size >= 10 and size <= 10", true),
            ("weight = 2.5", true),
            ("weight < 2.5E0 OR size = 10", true),
            ("NOT colour = 'blue'", true),
            ("colour LIKE 'r%'", true),
            ("colour LIKE 'r_d'", true),
            ("colour NOT LIKE '_e%'", false),
            ("name LIKE 'it''s!_1%' ESCAPE '!'", true),
            ("colour IN ('green', 'red')", true),
            ("colour NOT IN ('green', 'red')", false),
            ("missing IS NULL", true),
            ("colour IS NOT NULL", true),
            ("urgent", true),
            ("urgent = FALSE", false),
            ("(colour = 'blue' OR size = 10) AND urgent", true),
            // Unknown is not true, and NOT unknown is unknown.
            ("missing = 1", false),
            ("NOT missing = 1", false),
            ("missing = 1 OR size = 10", true),
            // Different types compare as unknown.
            ("colour = 10", false),
            ("size = '10'", false),
            ("size = -10 OR size = +10", true),
        ];
        for (s, want) in table {
            let sel = Selector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(&p), *want, "{s}");
        }
    }

    #[test]
    fn syntax_errors_are_selector_syntax_errors() {
        for s in [
            "colour =",
            "colour = 'red",
            "(size = 1",
            "size = 1 extra",
            "colour LIKE red",
            "colour IN 'red'",
            "'red' LIKE 'r%'",
            "size ! 3",
            "AND",
            "colour NOT = 'x'",
        ] {
            let e = Selector::parse(s).expect_err(s);
            assert_eq!(
                e.reason,
                ferrymq_types::Reason::SELECTOR_SYNTAX_ERROR,
                "{s}"
            );
        }
        let deep = format!("{}size = 1{}", "(".repeat(200), ")".repeat(200));
        assert!(Selector::parse(&deep).is_err());
        let nots = format!("{}size = 1", "NOT ".repeat(200));
        assert!(Selector::parse(&nots).is_err());
    }

    /// Pieces of the grammar and of what is not in it, put together at random.
    fn piece() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            prop::sample::select(vec![
                "(",
                ")",
                "AND",
                "or",
                "NOT",
                "=",
                "<>",
                "<",
                ">",
                "<=",
                ">=",
                "LIKE",
                "IN",
                "IS",
                "NULL",
                "ESCAPE",
                "TRUE",
                "false",
                ",",
                "colour",
                "size",
                "weight",
                "urgent",
                "missing",
                "'red'",
                "'r%'",
                "'_e%'",
                "'it''s'",
                "'!'",
                "'%%%_%'",
                "'",
                "''",
                "1",
                "-2.5E3",
                "+10",
                "1e400",
                "9999999999999999999999",
                ".",
                "$x.y",
                "!",
                "é",
                "\u{0}",
                "BETWEEN",
                "*",
            ])
            .prop_map(str::to_string),
            "[ -~]{0,6}",
            any::<String>(),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Whatever a subscriber sends as a selector is parsed or refused with
        /// MQRC_SELECTOR_SYNTAX_ERROR, and a parsed one evaluates against any publication: a
        /// selector can never take the queue manager down.
        #[test]
        fn any_selector_text_is_parsed_or_refused_and_evaluates(
            parts in proptest::collection::vec(piece(), 0..24),
            glue in proptest::sample::select(vec![" ", "", "  "]),
        ) {
            let text = parts.join(glue);
            match Selector::parse(&text) {
                Ok(sel) => {
                    let _ = sel.matches(&props());
                    let _ = sel.matches(&Properties::default());
                }
                Err(e) => proptest::prop_assert_eq!(
                    e.reason,
                    ferrymq_types::Reason::SELECTOR_SYNTAX_ERROR,
                    "{}: {}",
                    text,
                    e
                ),
            }
        }
    }
}
