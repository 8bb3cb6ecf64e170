//! Feeds arbitrary text to the distinguished-name parser and SSLPEER matcher as a channel's
//! SSLPEER and a certificate's DN would reach them: nothing may panic, a blank filter matches
//! every well-formed DN, and a well-formed filter without wildcards matches itself as a DN.
#![no_main]

use ferrymq_security::tls::{check_filter, dn_matches};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (filter, dn) = text.split_once('\0').unwrap_or((&text, ""));
    let _ = dn_matches(filter, dn);
    let _ = dn_matches(dn, filter);
    if check_filter(filter).is_ok() {
        assert!(dn_matches("", filter), "{filter:?}");
        if !filter.contains('*') {
            assert!(dn_matches(filter, filter), "{filter:?}");
        }
    }
});
