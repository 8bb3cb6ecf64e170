//! The durability level of acknowledged appends: what an LSN reported durable
//! is guaranteed to survive.

use std::fmt;
use std::str::FromStr;

/// What an acknowledged append survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Durability {
    /// write() then fdatasync() before the LSN is reported durable: survives
    /// process kill and power loss. Default.
    #[default]
    Fsync,
    /// write() only: survives kill -9 of the process (the OS page cache holds
    /// it) but not power loss or kernel crash.
    OsBuffered,
}

impl Durability {
    /// The configuration spelling (`"fsync"` or `"os"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Fsync => "fsync",
            Durability::OsBuffered => "os",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error returned when a durability setting is not one of the known words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown durability {0:?}: expected \"fsync\" (survives power loss) or \"os\" (survives process kill only)")]
pub struct ParseDurabilityError(pub String);

impl FromStr for Durability {
    type Err = ParseDurabilityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fsync" => Ok(Durability::Fsync),
            "os" => Ok(Durability::OsBuffered),
            _ => Err(ParseDurabilityError(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_both_levels() {
        for d in [Durability::Fsync, Durability::OsBuffered] {
            assert_eq!(d.to_string().parse::<Durability>().unwrap(), d);
        }
        assert_eq!("OS".parse::<Durability>().unwrap(), Durability::OsBuffered);
        assert!("sometimes".parse::<Durability>().is_err());
        assert_eq!(Durability::default(), Durability::Fsync);
    }
}
