//! The topic tree: MQ topic strings (levels separated by `/`), whole-level wildcards (`#` any
//! number of levels, `+` exactly one), the full topic string of an open or subscription (a topic
//! object's TOPICSTR joined to the string the application gives), and the attributes a node
//! takes from the closest topic object above it (ASPARENT, up to SYSTEM.BASE.TOPIC).

use ferrymq_types::limits::{TOPIC_LEVELS_MAX, TOPIC_STRING_LEN_MAX};
use ferrymq_types::{mqerr, MqError};

/// Whether `topic` (a publication's topic string, no wildcards) matches subscription `pattern`.
/// Levels may be empty (`a//b`, `/a`); `#` and `+` are wildcards only as a whole level.
pub fn matches(pattern: &str, topic: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let t: Vec<&str> = topic.split('/').collect();
    // at[i][j]: pattern levels i.. match topic levels j.. (dynamic programming: no backtracking
    // blow-up with several '#').
    let mut at = vec![vec![false; t.len() + 1]; p.len() + 1];
    at[p.len()][t.len()] = true;
    for i in (0..p.len()).rev() {
        for j in (0..=t.len()).rev() {
            at[i][j] = match p[i] {
                "#" => at[i + 1][j] || (j < t.len() && at[i][j + 1]),
                "+" => j < t.len() && at[i + 1][j + 1],
                level => j < t.len() && t[j] == level && at[i + 1][j + 1],
            };
        }
    }
    at[0][0]
}

/// Whether `topic` matches `pattern` with MQ's character wildcards (MQSO_WILDCARD_CHAR): the
/// strings as characters, `*` any number of them (`/` included), `?` exactly one; `#` and `+`
/// are characters like others. Greedy with one resumption point, so linear in practice and at
/// worst pattern × topic steps, never exponential.
pub fn char_matches(pattern: &str, topic: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = topic.chars().collect();
    let (mut i, mut j) = (0, 0);
    // The last `*` seen and the topic position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || (p[i] != '*' && p[i] == t[j])) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            // The `*` takes one character more.
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// How many levels `topic` has (an empty string is one empty level).
pub fn levels(topic: &str) -> usize {
    topic.bytes().filter(|b| *b == b'/').count() + 1
}

/// True when some level of `topic` is a wildcard.
pub fn has_wildcard(topic: &str) -> bool {
    topic.split('/').any(|l| l == "#" || l == "+")
}

/// The full topic string of an object's TOPICSTR and the string an application gives: joined
/// with `/` when both are present, as MQ joins MQOD's ObjectName and ObjectString.
pub fn full_topic(object_str: &str, given: &str) -> Result<String, MqError> {
    let full = match (object_str.is_empty(), given.is_empty()) {
        (true, _) => given.to_string(),
        (false, true) => object_str.to_string(),
        (false, false) => format!("{object_str}/{given}"),
    };
    if full.len() > TOPIC_STRING_LEN_MAX {
        return Err(mqerr!(
            TOPIC_STRING_ERROR,
            "the topic string is {} bytes long; at most {TOPIC_STRING_LEN_MAX} are allowed",
            full.len()
        ));
    }
    if levels(&full) > TOPIC_LEVELS_MAX {
        return Err(mqerr!(
            TOPIC_STRING_ERROR,
            "the topic string has {} levels; at most {TOPIC_LEVELS_MAX} are allowed",
            levels(&full)
        ));
    }
    if full.contains('\0') {
        return Err(mqerr!(
            TOPIC_STRING_ERROR,
            "the topic string contains a NUL character"
        ));
    }
    Ok(full)
}

/// The nodes whose topic objects may give `topic` an attribute, closest first: the topic itself
/// and each ancestor (a subscription's wildcard levels and what follows them are not nodes), the
/// root (the empty string) last.
pub fn ancestors(topic: &str) -> Vec<&str> {
    let mut end = topic.len();
    if let Some(w) = wildcard_start(topic) {
        end = w.saturating_sub(1);
    }
    let mut out = Vec::new();
    let mut s = &topic[..end.min(topic.len())];
    loop {
        if !s.is_empty() {
            out.push(s);
        }
        match s.rfind('/') {
            Some(i) => s = &s[..i],
            None => break,
        }
    }
    out.push("");
    out
}

/// The byte offset of the first wildcard level, if any.
fn wildcard_start(topic: &str) -> Option<usize> {
    let mut at = 0;
    for l in topic.split('/') {
        if l == "#" || l == "+" {
            return Some(at);
        }
        at += l.len() + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn character_wildcards_match_characters_across_levels() {
        for (p, t, want) in [
            ("sport/foot*", "sport/football", true),
            ("sport/foot*", "sport/football/scores", true),
            ("sport/foot*", "sport/rugby", false),
            ("a/b?", "a/bc", true),
            ("a/b?", "a/b", false),
            ("a/b?", "a/bcd", false),
            ("*", "", true),
            ("*/x/*", "a/b/x/c", true),
            ("*/x/*", "a/b/y/c", false),
            ("a+/#", "a+/#", true),
            ("a+/#", "ab/c", false),
            ("**?", "z", true),
        ] {
            assert_eq!(char_matches(p, t), want, "{p} against {t}");
        }
    }

    #[test]
    fn wildcards_match_whole_levels() {
        let table: &[(&str, &str, bool)] = &[
            ("a/b", "a/b", true),
            ("a/b", "a/b/c", false),
            ("a/b", "a", false),
            ("#", "a/b/c", true),
            ("#", "", true),
            ("a/#", "a", true),
            ("a/#", "a/b", true),
            ("a/#", "a/b/c", true),
            ("a/#", "ab", false),
            ("a/+", "a/b", true),
            ("a/+", "a", false),
            ("a/+", "a/b/c", false),
            ("+/b", "a/b", true),
            ("+/+", "a/b", true),
            ("+", "a/b", false),
            ("a/+/c/#", "a/x/c", true),
            ("a/+/c/#", "a/x/c/d/e", true),
            ("a/+/c/#", "a/x/y/c", false),
            ("a/#/c", "a/c", true),
            ("a/#/c", "a/b/b/c", true),
            ("a/#/c", "a/b/b/d", false),
            ("#/c/#", "x/y/c/z", true),
            // Empty levels are levels.
            ("a//b", "a//b", true),
            ("a/+/b", "a//b", true),
            ("a/b", "a//b", false),
            ("/a", "/a", true),
            ("+/a", "/a", true),
            ("/a", "a", false),
            ("a/", "a/", true),
            ("a/+", "a/", true),
            // Only a whole level is a wildcard.
            ("a/b#", "a/bc", false),
            ("a/b+", "a/b+", true),
            ("sport/#", "sport/tennis/player1", true),
        ];
        for (p, t, want) in table {
            assert_eq!(matches(p, t), *want, "pattern '{p}' topic '{t}'");
        }
    }

    #[test]
    fn full_topic_strings_join_the_object_and_the_given_string() {
        assert_eq!(full_topic("dev/", "x").unwrap(), "dev//x");
        assert_eq!(full_topic("dev", "x/y").unwrap(), "dev/x/y");
        assert_eq!(full_topic("", "x").unwrap(), "x");
        assert_eq!(full_topic("dev", "").unwrap(), "dev");
        assert!(full_topic("", &"a".repeat(TOPIC_STRING_LEN_MAX + 1)).is_err());
        assert!(full_topic("", &"/".repeat(TOPIC_LEVELS_MAX - 1)).is_ok());
        assert!(full_topic("", &"/".repeat(TOPIC_LEVELS_MAX)).is_err());
    }

    #[test]
    fn ancestors_stop_at_the_first_wildcard() {
        assert_eq!(ancestors("a/b/c"), vec!["a/b/c", "a/b", "a", ""]);
        assert_eq!(ancestors("a/+/c"), vec!["a", ""]);
        assert_eq!(ancestors("#"), vec![""]);
        assert_eq!(ancestors(""), vec![""]);
        assert_eq!(ancestors("a//b"), vec!["a//b", "a/", "a", ""]);
    }
}
