//! `ferrymq-bench fanout [--deliveries N] [--size BYTES] [--subscribers N,N...]`: the rows of
//! `ferrymq-bench report pubsub` (crates/bench/src/report_pubsub), printed as they are measured
//! and written nowhere.

use ferrymq_bench::report_pubsub::{self, Opts};

pub fn run(args: &[String]) -> Result<(), String> {
    let mut argv = args.to_vec();
    // The report's options, with somewhere harmless as its (unused) output directory.
    argv.extend([
        "--out".to_string(),
        std::env::temp_dir().display().to_string(),
    ]);
    let o = Opts::parse(&argv)?;
    let home = std::env::temp_dir().join(format!("ferrymq-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    println!(
        "ferrymq-bench fanout: about {} deliveries per row, {} B, bindings; ferrymq {}",
        o.deliveries,
        o.size,
        env!("CARGO_PKG_VERSION")
    );
    let r = report_pubsub::run(&o, &home, &mut |p, row| {
        println!("{}", report_pubsub::line(p, row))
    });
    let _ = std::fs::remove_dir_all(&home);
    r.map(|_| ())
}
