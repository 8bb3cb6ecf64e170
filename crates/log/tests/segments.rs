//! Message store segments: append/read/scan round trips, rolling, torn
//! segment tails and removal of unreferenced segments.

use std::collections::HashSet;
use std::fs::OpenOptions;

use ferrymq_log::{LogError, SegmentStore, StoreLoc};

fn body(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize + j * 13) as u8 | 1).collect()
}

#[test]
fn append_read_and_scan_round_trip_across_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let mut locs = Vec::new();
    {
        let mut store = SegmentStore::open(&dir).unwrap();
        assert_eq!(
            store.segments(),
            vec![1],
            "the current segment exists from the start"
        );
        for i in 0..50u64 {
            let loc = store
                .append(1000 + i, (i % 5) as u8, &body(i, (i * 37 % 500) as usize))
                .unwrap();
            locs.push(loc);
        }
        store.sync().unwrap();
        let (id, kind, data) = store.read(locs[7]).unwrap();
        assert_eq!((id, kind, &data[..]), (1007, 2, &body(7, 259)[..]));
    }
    let store = SegmentStore::open(&dir).unwrap();
    assert_eq!(store.segments(), vec![1, 2]);
    assert_eq!(
        store.current_segment(),
        2,
        "a reopened store never appends to an old segment"
    );
    for (i, loc) in locs.iter().enumerate() {
        let packed = loc.pack();
        assert_ne!(packed, 0);
        let back = StoreLoc::unpack(packed, loc.len).unwrap();
        let (id, kind, data) = store.read(back).unwrap();
        assert_eq!(id, 1000 + i as u64);
        assert_eq!(kind, (i % 5) as u8);
        assert_eq!(
            &data[..],
            &body(i as u64, (i as u64 * 37 % 500) as usize)[..]
        );
    }
    let scanned = store.scan(1).unwrap();
    assert_eq!(scanned.len(), 50);
    for (i, (loc, id, _, data)) in scanned.iter().enumerate() {
        assert_eq!(*loc, locs[i]);
        assert_eq!(*id, 1000 + i as u64);
        assert_eq!(data.len(), locs[i].len as usize);
    }
}

#[test]
fn appends_roll_to_a_new_segment_past_the_size_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open_with_limit(tmp.path(), 1000).unwrap();
    let locs: Vec<_> = (0..10)
        .map(|i| store.append(i, 0, &[7u8; 300]).unwrap())
        .collect();
    // 317-byte records: three fit under 1000 bytes.
    assert_eq!(locs[2].segment, 1);
    assert_eq!(locs[3].segment, 2);
    assert_eq!(locs[3].offset, 0);
    assert_eq!(store.segments(), vec![1, 2, 3, 4]);
    store.sync().unwrap();
    let total: usize = store
        .segments()
        .iter()
        .map(|&s| store.scan(s).unwrap().len())
        .sum();
    assert_eq!(total, 10);
}

#[test]
fn scan_stops_at_a_torn_segment_tail_skips_a_damaged_record_and_read_detects_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open(tmp.path()).unwrap();
    let locs: Vec<_> = (0..5)
        .map(|i| store.append(i, 1, &body(i, 100)).unwrap())
        .collect();
    store.sync().unwrap();
    drop(store);
    let path = tmp.path().join("seg-00000001.dat");
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(locs[4].offset + 50).unwrap();
    drop(f);
    let store = SegmentStore::open(tmp.path()).unwrap();
    let scanned = store.scan(1).unwrap();
    assert_eq!(scanned.len(), 4);
    assert_eq!(scanned[3].1, 3);
    assert!(store.read(locs[4]).is_err());
    // Flip a payload byte of record 2: read must refuse it.
    let mut raw = std::fs::read(&path).unwrap();
    raw[locs[2].offset as usize + 17 + 5] ^= 1;
    std::fs::write(&path, &raw).unwrap();
    let store = SegmentStore::open(tmp.path()).unwrap();
    assert!(matches!(store.read(locs[2]), Err(LogError::Damaged(_))));
    // The scan skips the damaged record and keeps the one after it, saying
    // which bytes it skipped and which it ignored at the torn end.
    let rep = store.scan_report(1).unwrap();
    let ids: Vec<u64> = rep.records.iter().map(|r| r.1).collect();
    assert_eq!(ids, vec![0, 1, 3]);
    assert_eq!(rep.damaged, vec![(locs[2].offset, 117)]);
    assert_eq!(rep.tail_ignored, 50);
    assert_eq!(store.scan(1).unwrap().len(), 3);
    // A location whose length disagrees with the header is refused too.
    let wrong = StoreLoc { len: 99, ..locs[1] };
    assert!(store.read(wrong).is_err());
}

#[test]
fn remove_unreferenced_keeps_referenced_and_current_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = SegmentStore::open_with_limit(tmp.path(), 100).unwrap();
    // A store that only ever had its current segment has nothing to remove.
    assert_eq!(store.remove_unreferenced(&HashSet::new()).unwrap(), 0);
    for i in 0..5 {
        store.append(i, 0, &[1u8; 90]).unwrap(); // one record per segment
    }
    store.sync().unwrap();
    assert_eq!(store.segments(), vec![1, 2, 3, 4, 5]);
    assert_eq!(store.current_segment(), 5);
    let keep: HashSet<u32> = [2, 4].into_iter().collect();
    assert_eq!(store.remove_unreferenced(&keep).unwrap(), 2);
    assert_eq!(store.segments(), vec![2, 4, 5]);
    assert!(!tmp.path().join("seg-00000001.dat").exists());
    assert!(tmp.path().join("seg-00000005.dat").exists());
    assert!(store
        .read(StoreLoc {
            segment: 1,
            offset: 0,
            len: 90
        })
        .is_err());
    assert_eq!(store.scan(4).unwrap().len(), 1);
    // Appends continue in the current segment's successor as usual.
    let loc = store.append(9, 0, &[2u8; 90]).unwrap();
    assert_eq!(loc.segment, 6);
    // Segment numbers are never reused, even after removing the newest
    // non-current ones and reopening.
    store.remove_unreferenced(&HashSet::new()).unwrap();
    drop(store);
    let store = SegmentStore::open(tmp.path()).unwrap();
    assert_eq!(store.current_segment(), 7);
}

/// One flipped byte in a segment of many messages costs that message only,
/// wherever in the record it lands (payload, id, length field).
#[test]
fn one_damaged_record_leaves_every_other_record_readable() {
    for (what, at) in [("payload", 17 + 40), ("id", 9), ("length", 1), ("crc", 5)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = SegmentStore::open(tmp.path()).unwrap();
        let locs: Vec<_> = (0..500)
            .map(|i| {
                store
                    .append(i, 1, &body(i, 60 + (i as usize % 7) * 13))
                    .unwrap()
            })
            .collect();
        store.sync().unwrap();
        drop(store);
        let path = tmp.path().join("seg-00000001.dat");
        let mut raw = std::fs::read(&path).unwrap();
        raw[locs[123].offset as usize + at] ^= 0x10;
        std::fs::write(&path, &raw).unwrap();
        let store = SegmentStore::open(tmp.path()).unwrap();
        let rep = store.scan_report(1).unwrap();
        let ids: Vec<u64> = rep.records.iter().map(|r| r.1).collect();
        let want: Vec<u64> = (0..500).filter(|&i| i != 123).collect();
        assert_eq!(ids, want, "{what}");
        assert_eq!(
            rep.damaged,
            vec![(locs[123].offset, 17 + u64::from(locs[123].len))],
            "{what}"
        );
        assert_eq!(rep.tail_ignored, 0);
        // Read by offset alone (the length from its header), as restart does for a message
        // the scan could not reach.
        assert_eq!(store.read_at(1, locs[124].offset).unwrap().0, locs[124]);
        assert!(store.read_at(1, locs[123].offset).is_err(), "{what}");
    }
}
