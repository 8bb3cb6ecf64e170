//! Progress of long work (reports, large gets and puts) for the person waiting: a progress bar
//! on standard error when it is a terminal (indicatif), plain lines when it is not (a log file, a
//! CI job) — and then only once the work has run for a while, at most one line every few seconds,
//! so short commands in scripts stay quiet. Standard output is never touched: it carries the
//! command's results (message bodies, JSON).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Plain lines start after this long...
const QUIET_FOR: Duration = Duration::from_secs(2);
/// ...and come at most this often.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// Progress of one piece of work counted in `unit`s, out of a known total or not.
pub struct Progress {
    what: String,
    unit: &'static str,
    total: Option<u64>,
    done: u64,
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Option<Instant>,
}

impl Progress {
    /// Progress of `what` (e.g. "get 'Q'"), counted in `unit` (e.g. "messages"), out of `total`
    /// if known. A bar when standard error is a terminal.
    pub fn new(what: &str, unit: &'static str, total: Option<u64>) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let (b, tpl) = match total {
                Some(t) => (
                    ProgressBar::new(t),
                    "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg} ({per_sec}, eta {eta})",
                ),
                None => (
                    ProgressBar::new_spinner(),
                    "{prefix} [{elapsed_precise}] {spinner} {pos} {msg} ({per_sec})",
                ),
            };
            b.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            if let Ok(style) = ProgressStyle::with_template(tpl) {
                b.set_style(style);
            }
            b.set_prefix(what.to_string());
            b.set_message(unit);
            b.enable_steady_tick(Duration::from_millis(250));
            b
        });
        Progress {
            what: what.to_string(),
            unit,
            total,
            done: 0,
            bar,
            started: Instant::now(),
            last_line: None,
        }
    }

    /// `n` more units done.
    pub fn inc(&mut self, n: u64) {
        self.done += n;
        match &self.bar {
            Some(b) => b.inc(n),
            None => self.maybe_line(),
        }
    }

    /// A line for the person waiting, above the bar (or on its own without one).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => {
                let _ = writeln!(std::io::stderr(), "{line}");
            }
        }
    }

    /// The work is over: the bar is cleared (its last state stays in the final line, if the work
    /// was long enough to have shown progress).
    pub fn finish(self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if self.started.elapsed() >= QUIET_FOR {
            let _ = writeln!(std::io::stderr(), "{}", self.line());
        }
    }

    /// The plain-text state: `get 'Q': 5000/100000 messages (5%), 1200/s, 4 s`.
    pub fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.done as f64 / secs
        } else {
            0.0
        };
        let count = match self.total {
            Some(t) if t > 0 => format!(
                "{}/{t} {} ({:.0}%)",
                self.done,
                self.unit,
                self.done as f64 * 100.0 / t as f64
            ),
            _ => format!("{} {}", self.done, self.unit),
        };
        format!("{}: {count}, {rate:.0}/s, {secs:.0} s", self.what)
    }

    fn maybe_line(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.started) < QUIET_FOR {
            return;
        }
        if self
            .last_line
            .is_some_and(|l| now.duration_since(l) < LINE_EVERY)
        {
            return;
        }
        self.last_line = Some(now);
        let _ = writeln!(std::io::stderr(), "{}", self.line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_line_counts_against_the_total() {
        let mut p = Progress {
            what: "get 'Q'".into(),
            unit: "messages",
            total: Some(200),
            done: 0,
            bar: None,
            started: Instant::now(),
            last_line: None,
        };
        p.inc(50);
        let l = p.line();
        assert!(l.starts_with("get 'Q': 50/200 messages (25%), "), "{l}");
        p.total = None;
        assert!(
            p.line().starts_with("get 'Q': 50 messages, "),
            "{}",
            p.line()
        );
    }
}
