//! What runmqsc needs around the commands themselves: counting outcomes into an exit code and a
//! summary, and echoing each command as it runs.

/// Counts of a runmqsc session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Commands read.
    pub read: usize,
    /// Commands that did not parse.
    pub syntax_errors: usize,
    /// Commands that parsed but failed.
    pub failed: usize,
}

impl Tally {
    /// runmqsc's exit code: 0 when every command worked, 20 when none did, 10 otherwise.
    pub fn exit_code(&self) -> i32 {
        let bad = self.syntax_errors + self.failed;
        if bad == 0 {
            0
        } else if self.read > 0 && bad >= self.read {
            20
        } else {
            10
        }
    }

    /// One line for the end of a session, e.g. "3 MQSC commands read. 0 had syntax errors. 0 failed."
    pub fn summary(&self) -> String {
        let s = if self.read == 1 { "" } else { "s" };
        format!(
            "{} MQSC command{s} read. {} had syntax errors. {} failed.",
            self.read, self.syntax_errors, self.failed
        )
    }
}

/// A command echoed as runmqsc shows it: the command's number right-aligned, then the text.
pub fn echo_line(n: usize, text: &str) -> String {
    format!("{n:>6} : {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_right_aligns_the_counter() {
        assert_eq!(echo_line(1, "DIS QMGR"), "     1 : DIS QMGR");
        assert_eq!(echo_line(123, "END"), "   123 : END");
    }
}
