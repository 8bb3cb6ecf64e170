//! CPU time of a process from /proc/PID/stat (user + system, in clock ticks), so a run can report
//! each side's CPU as `top` shows it: percent of one core over the measured window.

use std::time::Instant;

/// Clock ticks per second for /proc times; 100 on Linux for every architecture we run on.
const TICKS_PER_S: f64 = 100.0;

/// CPU seconds used so far by `pid` (all its threads).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_S)
}

/// A CPU reading of a process at an instant.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    pub cpu_s: f64,
    pub at: Instant,
}

pub fn mark(pid: u32) -> Option<Mark> {
    Some(Mark {
        cpu_s: cpu_seconds(pid)?,
        at: Instant::now(),
    })
}

/// Percent of one core used between two marks (100 = one core busy).
pub fn pct(a: Mark, b: Mark) -> f64 {
    let wall = b.at.duration_since(a.at).as_secs_f64();
    if wall <= 0.0 {
        0.0
    } else {
        (b.cpu_s - a.cpu_s) / wall * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_loop_shows_up_as_cpu_time() {
        let me = std::process::id();
        let a = mark(me).unwrap();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = mark(me).unwrap();
        let p = pct(a, b);
        // On a quiet machine a spinning thread shows close to 100%; the two shared cores here
        // are often busy with other work, so only ask that its CPU time shows up at all, and
        // never as more than the machine has.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(
            p > 10.0 && p <= cores * 100.0 + 5.0,
            "a spinning thread should show as CPU time of up to the machine's cores, got {p:.1}%"
        );
    }
}
