//! `ferrymq-bench cph MODULE [options]`: MQ-CPH's modules against a running queue manager.
//!
//! - `rr`: the headline Request/Responder workload in one shot — starts the responders and the
//!   requesters itself and prints the round-trip rate, both sides' CPU and latency percentiles.
//! - `requester`, `responder`: either half on its own (run them in two processes, or against
//!   responders of another program).
//! - `putget`: each thread puts a message and gets it back by MsgId.
//! - `sender`, `receiver`: put only, get only.
//!
//! Counting follows the seed reports: one round trip = a request put and got plus a reply put and
//! got; the rate is measured over a steady window after a warm-up.

mod args;
mod run;
mod workers;

pub use args::{Args, ConnSecurity, CphCmd, CphOpts, Module};
pub use run::{run, RunResult};

/// Entry point for `ferrymq-bench cph ...`.
pub fn main(argv: &[String]) -> Result<(), String> {
    let a = Args::parse(argv)?;
    let r = run(&a)?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        r.print_summary();
    }
    Ok(())
}
