//! The administrative verb's text: MQSC (`MQSC <command>`, parsed again by the queue manager) and
//! the queue manager's control commands, which the command line sends over the bindings socket
//! (`endmqm`, `dspmq -o ha|dr`, `sethapreferred`, `dmpmqcfg`). One parser and one printer, so the
//! sender and the queue manager cannot disagree about a word.

/// One administrative command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlCommand {
    /// One MQSC command, as typed.
    Mqsc(String),
    /// Is the queue manager running?
    Ping,
    /// `sethapreferred` (an instance name, kept as given) or `clearhapreferred` (none).
    HaPrefer(Option<String>),
    /// `dspmq -o ha`.
    HaStatus,
    /// `dspmq -o dr`.
    DrStatus,
    /// `dmpmqcfg -x SCOPE -o mqsc|json`.
    DumpConfig { scope: String, json: bool },
    /// `endmqm` (controlled) or `endmqm -i` (immediate).
    Shutdown { immediate: bool },
}

impl ControlCommand {
    /// Reads a command's text; the words of control commands in any case.
    pub fn parse(text: &str) -> Result<ControlCommand, String> {
        if let Some(mqsc) = text.strip_prefix("MQSC ") {
            return Ok(ControlCommand::Mqsc(mqsc.to_string()));
        }
        let raw: Vec<&str> = text.split_whitespace().collect();
        let words: Vec<String> = raw.iter().map(|w| w.to_ascii_uppercase()).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        Ok(match words.as_slice() {
            ["PING"] => ControlCommand::Ping,
            // Instance names are kept as given to crtmqm.
            ["HA", "PREFER"] => ControlCommand::HaPrefer(None),
            ["HA", "PREFER", _] => ControlCommand::HaPrefer(Some(raw[2].to_string())),
            ["HA", "STATUS"] => ControlCommand::HaStatus,
            ["DR", "STATUS"] => ControlCommand::DrStatus,
            ["DMPMQCFG", scope, format @ ("MQSC" | "JSON")] => ControlCommand::DumpConfig {
                scope: scope.to_string(),
                json: *format == "JSON",
            },
            ["SHUTDOWN"] | ["SHUTDOWN", "CONTROLLED"] => {
                ControlCommand::Shutdown { immediate: false }
            }
            ["SHUTDOWN", "IMMEDIATE"] => ControlCommand::Shutdown { immediate: true },
            _ => return Err(format!("unknown administrative command '{text}'")),
        })
    }

    /// The command's text on the wire.
    pub fn to_text(&self) -> String {
        match self {
            ControlCommand::Mqsc(m) => format!("MQSC {m}"),
            ControlCommand::Ping => "PING".into(),
            ControlCommand::HaPrefer(None) => "HA PREFER".into(),
            ControlCommand::HaPrefer(Some(i)) => format!("HA PREFER {i}"),
            ControlCommand::HaStatus => "HA STATUS".into(),
            ControlCommand::DrStatus => "DR STATUS".into(),
            ControlCommand::DumpConfig { scope, json } => {
                format!("DMPMQCFG {scope} {}", if *json { "JSON" } else { "MQSC" })
            }
            ControlCommand::Shutdown { immediate: false } => "SHUTDOWN CONTROLLED".into(),
            ControlCommand::Shutdown { immediate: true } => "SHUTDOWN IMMEDIATE".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_reads_back_what_it_prints() {
        let all = [
            ControlCommand::Mqsc("DEFINE QLOCAL(A) DESCR('x y')".into()),
            ControlCommand::Ping,
            ControlCommand::HaPrefer(None),
            ControlCommand::HaPrefer(Some("b".into())),
            ControlCommand::HaStatus,
            ControlCommand::DrStatus,
            ControlCommand::DumpConfig {
                scope: "ALL".into(),
                json: true,
            },
            ControlCommand::Shutdown { immediate: false },
            ControlCommand::Shutdown { immediate: true },
        ];
        for c in all {
            assert_eq!(ControlCommand::parse(&c.to_text()), Ok(c));
        }
    }

    #[test]
    fn words_in_any_case_names_as_given_and_unknown_commands_refused() {
        assert_eq!(
            ControlCommand::parse("dr status"),
            Ok(ControlCommand::DrStatus)
        );
        assert_eq!(
            ControlCommand::parse("ha prefer instB"),
            Ok(ControlCommand::HaPrefer(Some("instB".into())))
        );
        assert_eq!(
            ControlCommand::parse("SHUTDOWN"),
            Ok(ControlCommand::Shutdown { immediate: false })
        );
        assert!(ControlCommand::parse("HA PREFER a b").is_err());
        assert!(ControlCommand::parse("DMPMQCFG ALL XML").is_err());
        assert!(ControlCommand::parse("").is_err());
    }
}
