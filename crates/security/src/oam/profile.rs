//! Generic profiles: matching an object name, and which of two profiles is the more specific.

use std::cmp::Ordering;

/// One qualifier of a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Qualifier {
    /// `**`: any number of whole qualifiers, none included.
    AnyQualifiers,
    /// Characters, `?` and `*` within one qualifier.
    Chars(Vec<Tok>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `?`
    One,
    /// `*` within a qualifier.
    Any,
}

/// A compiled profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    text: String,
    quals: Vec<Qualifier>,
    generic: bool,
}

impl Profile {
    pub fn new(text: &str) -> Profile {
        let quals: Vec<Qualifier> = text
            .split('.')
            .map(|q| {
                if q == "**" {
                    Qualifier::AnyQualifiers
                } else {
                    Qualifier::Chars(
                        q.chars()
                            .map(|c| match c {
                                '?' => Tok::One,
                                '*' => Tok::Any,
                                c => Tok::Lit(c),
                            })
                            .collect(),
                    )
                }
            })
            .collect();
        Profile {
            generic: text.contains(['*', '?']),
            text: text.to_string(),
            quals,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the profile has a wildcard (it names a set of objects rather than one).
    pub fn is_generic(&self) -> bool {
        self.generic
    }

    /// Whether the object `name` is one the profile covers.
    pub fn matches(&self, name: &str) -> bool {
        if !self.generic {
            return self.text == name;
        }
        let names: Vec<&str> = name.split('.').collect();
        // can[i][j]: profile qualifiers i.. match name qualifiers j..
        let (np, nn) = (self.quals.len(), names.len());
        let mut can = vec![vec![false; nn + 1]; np + 1];
        can[np][nn] = true;
        for i in (0..np).rev() {
            for j in (0..=nn).rev() {
                can[i][j] = match &self.quals[i] {
                    // Zero qualifiers, or one more and still `**`.
                    Qualifier::AnyQualifiers => can[i + 1][j] || (j < nn && can[i][j + 1]),
                    Qualifier::Chars(toks) => j < nn && can[i + 1][j + 1] && glob(toks, names[j]),
                };
            }
        }
        can[0][0]
    }
}

/// Whether one qualifier's tokens match one qualifier of a name.
fn glob(toks: &[Tok], s: &str) -> bool {
    let s: Vec<char> = s.chars().collect();
    // ok[j]: toks[..i] match s[..j], row by row.
    let mut ok = vec![false; s.len() + 1];
    ok[0] = true;
    for t in toks {
        let mut next = vec![false; s.len() + 1];
        for j in 0..=s.len() {
            next[j] = match t {
                Tok::Any => ok[j] || (j > 0 && next[j - 1]),
                Tok::One => j > 0 && ok[j - 1],
                Tok::Lit(c) => j > 0 && ok[j - 1] && s[j - 1] == *c,
            };
        }
        ok = next;
    }
    ok[s.len()]
}

/// Whether `profile` covers `name` (see [`Profile::matches`]).
pub fn matches(profile: &str, name: &str) -> bool {
    Profile::new(profile).matches(name)
}

/// A profile's tokens from the left for comparing specificity, each with its rank: a literal
/// character (the dots between qualifiers included) 4, `?` 3, `*` 2, `**` 1.
fn ranked(p: &Profile) -> Vec<(u8, char)> {
    let mut out = Vec::new();
    for (i, q) in p.quals.iter().enumerate() {
        if i > 0 {
            out.push((4, '.'));
        }
        match q {
            Qualifier::AnyQualifiers => out.push((1, '*')),
            Qualifier::Chars(toks) => out.extend(toks.iter().map(|t| match t {
                Tok::Lit(c) => (4, *c),
                Tok::One => (3, '?'),
                Tok::Any => (2, '*'),
            })),
        }
    }
    out
}

/// `Greater` when `a` is more specific than `b`: a profile without wildcards beats a generic
/// one; otherwise the first difference from the left decides (literal > `?` > `*` > `**` > the
/// end of the profile), and profiles that differ only in literal characters are ordered by
/// their text, so the order is total.
pub fn compare_specificity(a: &Profile, b: &Profile) -> Ordering {
    match (a.generic, b.generic) {
        (false, true) => return Ordering::Greater,
        (true, false) => return Ordering::Less,
        _ => {}
    }
    let (ra, rb) = (ranked(a), ranked(b));
    for k in 0..ra.len().max(rb.len()) {
        let x = ra.get(k).map_or(0, |t| t.0);
        let y = rb.get(k).map_or(0, |t| t.0);
        if x != y {
            return x.cmp(&y);
        }
    }
    // Same shape: only literal characters differ; any fixed order will do.
    b.text.cmp(&a.text)
}
