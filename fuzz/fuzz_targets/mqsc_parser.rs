//! Feeds arbitrary bytes to the MQSC script splitter and parser, as a hostile or careless script
//! would: nothing may panic, and every syntax error must point inside its command.
#![no_main]

use ferrymq_mqsc::{parse, split_commands};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for cmd in split_commands(&text) {
        if let Err(e) = parse(&cmd.text) {
            assert!(e.column <= cmd.text.chars().count(), "{e:?} for {:?}", cmd.text);
            let _ = e.pointer(&cmd.text);
        }
    }
});
