//! Feeds arbitrary text to the publish/subscribe selector parser and evaluates what parses on
//! properties drawn from the same bytes, and matches topic strings against wildcard patterns:
//! nothing may panic, however deep or long the input.
#![no_main]

use ferrymq_engine::pubsub::{tree, Selector};
use ferrymq_types::{Properties, PropertyValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (a, b) = text.split_at(
        text.char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i),
    );
    let _ = tree::matches(a, b);
    let _ = tree::ancestors(a);
    if let Ok(s) = Selector::parse(&text) {
        let props = Properties(vec![
            ("colour".into(), PropertyValue::String(b.to_string())),
            ("size".into(), PropertyValue::Int(data.len() as i64)),
            (
                "urgent".into(),
                PropertyValue::Bool(data.first().is_some_and(|x| x % 2 == 0)),
            ),
        ]);
        let _ = s.matches(&props);
    }
});
