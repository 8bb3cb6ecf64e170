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

/// The machine's CPU time so far from /proc/stat, in clock ticks: (stolen by the hypervisor,
/// all). On a virtual machine, stolen time is when a CPU had work but the host ran another
/// guest: a window with much of it measured the neighbours, not us.
pub fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal
    let steal = *f.get(7)?;
    Some((steal, f.iter().sum()))
}

/// Percent of the machine's CPU time stolen between two [`machine_ticks`] readings.
pub fn steal_pct(a: (u64, u64), b: (u64, u64)) -> f64 {
    let all = b.1.saturating_sub(a.1);
    if all == 0 {
        0.0
    } else {
        b.0.saturating_sub(a.0) as f64 / all as f64 * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_a_share_of_all_ticks_between_two_readings() {
        assert_eq!(steal_pct((10, 1000), (60, 1200)), 25.0);
        assert_eq!(steal_pct((10, 1000), (10, 1000)), 0.0);
        let now = machine_ticks().expect("/proc/stat has a cpu line");
        assert!(now.0 <= now.1);
    }

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
