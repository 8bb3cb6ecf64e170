//! Parsing of MQ-style command lines (`crtmqm -lp 3 -lf 4096 -p 1414 QM1`): multi-letter flags
//! with or without a value, and positional names. Flags MQ accepts that FerryMQ does not act on are
//! accepted with a note on stderr, never silently misread; unknown flags are errors.

use std::collections::BTreeMap;

/// How one flag of a command is treated.
#[derive(Clone, Copy)]
pub enum Flag {
    /// A flag taking a value that FerryMQ uses.
    Value(&'static str),
    /// A switch FerryMQ uses.
    Switch(&'static str),
    /// An MQ flag taking a value that FerryMQ accepts and ignores, with the reason.
    IgnoredValue(&'static str, &'static str),
    /// An MQ switch that FerryMQ accepts and ignores, with the reason.
    IgnoredSwitch(&'static str, &'static str),
    /// An MQ flag FerryMQ refuses, with the reason.
    Refused(&'static str, &'static str),
}

impl Flag {
    fn name(&self) -> &'static str {
        match self {
            Flag::Value(n)
            | Flag::Switch(n)
            | Flag::IgnoredValue(n, _)
            | Flag::IgnoredSwitch(n, _)
            | Flag::Refused(n, _) => n,
        }
    }
}

#[derive(Debug, Default)]
pub struct Parsed {
    pub values: BTreeMap<&'static str, String>,
    pub switches: Vec<&'static str>,
    pub positional: Vec<String>,
    /// Notes about accepted-but-ignored flags, already printed.
    pub notes: Vec<String>,
}

impl Parsed {
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.values.get(flag).map(String::as_str)
    }
    pub fn has(&self, flag: &str) -> bool {
        self.switches.contains(&flag)
    }
    pub fn num<T: std::str::FromStr>(&self, flag: &str) -> Result<Option<T>, String> {
        match self.value(flag) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("{flag} {v}: not a valid number")),
        }
    }
}

/// Parses `args` against the flags of `cmd`. Longer flag names win over their prefixes, so `-lp`
/// is never read as `-l p`.
pub fn parse(cmd: &str, args: &[String], flags: &[Flag]) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut sorted: Vec<&Flag> = flags.iter().collect();
    sorted.sort_by_key(|f| std::cmp::Reverse(f.name().len()));
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if !a.starts_with('-') || a == "-" {
            out.positional.push(a.clone());
            continue;
        }
        // Exact flag, or a flag with its value attached (MQ allows `-p1414`).
        let found = sorted.iter().find(|f| a == f.name()).or_else(|| {
            sorted.iter().find(|f| {
                let takes_value = matches!(f, Flag::Value(_) | Flag::IgnoredValue(..));
                takes_value && a.starts_with(f.name())
            })
        });
        let Some(flag) = found else {
            return Err(format!("{cmd}: unknown flag '{a}'"));
        };
        let attached = a
            .strip_prefix(flag.name())
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let mut take_value = || -> Result<String, String> {
            if let Some(v) = attached.clone() {
                return Ok(v);
            }
            let v = args
                .get(i)
                .cloned()
                .ok_or_else(|| format!("{cmd}: flag {} needs a value", flag.name()))?;
            i += 1;
            Ok(v)
        };
        match **flag {
            Flag::Value(n) => {
                let v = take_value()?;
                out.values.insert(n, v);
            }
            Flag::Switch(n) => out.switches.push(n),
            Flag::IgnoredValue(n, why) => {
                let v = take_value()?;
                let note = format!("{cmd}: note: {n} {v} accepted but not used: {why}");
                eprintln!("{note}");
                out.notes.push(note);
            }
            Flag::IgnoredSwitch(n, why) => {
                let note = format!("{cmd}: note: {n} accepted but not used: {why}");
                eprintln!("{note}");
                out.notes.push(note);
            }
            Flag::Refused(n, why) => return Err(format!("{cmd}: {n} is not supported: {why}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const FLAGS: &[Flag] = &[
        Flag::Value("-lp"),
        Flag::Value("-lf"),
        Flag::Value("-p"),
        Flag::Switch("-w"),
        Flag::IgnoredValue("-ls", "x"),
    ];

    #[test]
    fn long_flags_are_not_split_into_short_ones() {
        let p = parse("crtmqm", &args("-lp 64 -lf 16384 -p 1414 QM1"), FLAGS).unwrap();
        assert_eq!(p.value("-lp"), Some("64"));
        assert_eq!(p.value("-lf"), Some("16384"));
        assert_eq!(p.value("-p"), Some("1414"));
        assert_eq!(p.positional, vec!["QM1"]);
    }

    #[test]
    fn attached_values_ignored_flags_and_unknown_flags() {
        let p = parse("crtmqm", &args("-p1415 -ls 2 QM"), FLAGS).unwrap();
        assert_eq!(p.value("-p"), Some("1415"));
        assert_eq!(p.notes.len(), 1);
        assert!(parse("crtmqm", &args("-zz QM"), FLAGS)
            .unwrap_err()
            .contains("unknown flag '-zz'"));
        assert!(parse("crtmqm", &args("QM -lp"), FLAGS)
            .unwrap_err()
            .contains("needs a value"));
    }
}
