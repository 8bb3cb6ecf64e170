//! `ferrymq dmplog [--salvage] QMNAME`: what a queue manager's recovery log and message store
//! hold, read without recovering them — every readable log record from the checkpoint on (LSN,
//! kind, length, CRC ok or bad) with the damage between them, and per message-store segment the
//! readable messages and the damaged spans. `--salvage` (queue manager ended) overwrites each
//! damaged log span that readable records follow with a filler record, so that the next `strmqm`
//! keeps those records even when the damage is older than the last sync window (which recovery
//! alone refuses). Damaged store messages need no salvage: restart restores every readable one.

use ferrymq_log::inspect::{self, DumpStatus, FILLER};
use ferrymq_log::SegmentStore;

use crate::cli;
use crate::lifecycle::{existing, is_running, other, Res, EXIT_RUNNING};

pub fn run(p: &cli::Dmplog) -> Res {
    let name = &p.name;
    let paths = existing("dmplog", name)?;
    let salvage = p.salvage;
    if salvage && is_running(&paths) {
        return Err(crate::lifecycle::fail(
            EXIT_RUNNING,
            format!("dmplog: end queue manager '{name}' before salvaging its log"),
        ));
    }
    let log_dir = paths.log_dir();
    let d = inspect::dump(&log_dir).map_err(|e| other(format!("dmplog: {e}")))?;
    println!(
        "Recovery log {}: checkpoint LSN {}, capacity {} bytes, sync window {} bytes",
        log_dir.display(),
        d.checkpoint_lsn,
        d.capacity,
        d.sync_window
    );
    println!(
        "{:>14} {:>10} {:>5} {:>10}  STATUS",
        "LSN", "LENGTH", "KIND", "CRC"
    );
    for e in &d.entries {
        let kind = e.kind.map_or("-".to_string(), |k| k.to_string());
        let crc = e.crc.map_or("-".to_string(), |c| format!("{c:08x}"));
        let status = match (&e.status, e.kind) {
            (DumpStatus::Ok, Some(FILLER)) => "ok (filler over earlier damage)",
            (DumpStatus::Ok, _) => "ok",
            (DumpStatus::BadCrc, _) => "BAD CRC",
            (DumpStatus::Unreadable, _) => "UNREADABLE",
        };
        println!("{:>14} {:>10} {kind:>5} {crc:>10}  {status}", e.lsn, e.len);
    }
    let damaged: Vec<_> = d.damaged().collect();
    println!(
        "{} readable records, {} damaged span(s), readable log ends at LSN {}",
        d.entries.len() - damaged.len(),
        damaged.len(),
        d.end_lsn
    );
    let store = SegmentStore::open_existing(&paths.store_dir())
        .map_err(|e| other(format!("dmplog: {e}")))?;
    for seg in store.segments() {
        let r = store
            .scan_report(seg)
            .map_err(|e| other(format!("dmplog: segment {seg}: {e}")))?;
        println!(
            "Message store segment {seg}: {} readable records, {} damaged span(s), {} bytes ignored at its end",
            r.records.len(),
            r.damaged.len(),
            r.tail_ignored
        );
        for (off, len) in &r.damaged {
            println!("  damaged: offset {off}, {len} bytes (the message there is lost)");
        }
    }
    if salvage {
        let spans = inspect::salvage(&log_dir).map_err(|e| other(format!("dmplog: {e}")))?;
        for (from, to) in &spans {
            println!(
                "Salvaged: LSN {from}..{to} ({} bytes) overwritten with a filler; the records after it will be recovered",
                to - from
            );
        }
        if spans.is_empty() {
            println!("Nothing to salvage in the log (damage at its very end is cut by recovery).");
        }
    }
    Ok(())
}
