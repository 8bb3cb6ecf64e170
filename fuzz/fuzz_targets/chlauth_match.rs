//! Feeds arbitrary channel profiles, address patterns, users and DN filters to the CHLAUTH
//! matcher and the user store's parser, as hostile records and connection attempts would: nothing
//! may panic, the profile wildcard match stays linear, an address never matched by a pattern
//! that does not parse, and the decision does not depend on the order the rules are stored in.
#![no_main]

use std::collections::BTreeMap;

use ferrymq_security::chlauth::{self, Attempt, Rule};
use ferrymq_security::users::store::UserStore;
use libfuzzer_sys::fuzz_target;

const TYPES: [&str; 6] = [
    "BLOCKUSER",
    "BLOCKADDR",
    "SSLPEERMAP",
    "USERMAP",
    "QMGRMAP",
    "ADDRESSMAP",
];
const SRC: [&str; 3] = ["MAP", "NOACCESS", "CHANNEL"];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The store's parser takes the whole input as a file.
    if let Ok(store) = UserStore::from_text(&text) {
        let again = UserStore::from_text(&store.to_text()).expect("a written store parses");
        assert_eq!(again, store);
    }
    // Otherwise: fields separated by newlines; rules of six fields each, then the attempt.
    let f: Vec<&str> = text.split('\n').collect();
    if f.len() < 4 {
        return;
    }
    let (attempt, rest) = f.split_at(4);
    let rules: Vec<Rule> = rest
        .chunks(6)
        .filter(|c| c.len() == 6)
        .filter_map(|c| {
            let t = TYPES[c[1].len() % TYPES.len()];
            let mut m = BTreeMap::new();
            m.insert("CHLAUTH".to_string(), c[0].to_string());
            m.insert("TYPE".to_string(), t.to_string());
            m.insert("ADDRESS".to_string(), c[2].to_string());
            m.insert("ADDRLIST".to_string(), c[2].to_string());
            m.insert("CLNTUSER".to_string(), c[3].to_string());
            m.insert("USERLIST".to_string(), c[3].to_string());
            m.insert("SSLPEER".to_string(), c[4].to_string());
            m.insert("USERSRC".to_string(), SRC[c[5].len() % SRC.len()].to_string());
            m.insert("MCAUSER".to_string(), c[5].to_string());
            Rule::from_attrs(&m)
        })
        .collect();
    let a = Attempt {
        channel: attempt[0],
        address: attempt[1],
        client_user: attempt[2],
        cert_dn: Some(attempt[3]),
        remote_qmgr: Some(attempt[0]),
    };
    let admin = |u: &str| u.len() % 2 == 0;
    let one = chlauth::runcheck(&rules, &a, chlauth::dn_matches_simple, &admin).cloned();
    let _ = chlauth::blocked_address(&rules, a.address);
    let mapped = chlauth::mapping(&rules, &a, chlauth::dn_matches_simple)
        .rule()
        .cloned();
    let mut reversed = rules.clone();
    reversed.reverse();
    let two = chlauth::runcheck(&reversed, &a, chlauth::dn_matches_simple, &admin).cloned();
    let mapped2 = chlauth::mapping(&reversed, &a, chlauth::dn_matches_simple)
        .rule()
        .cloned();
    // Identical rules stored twice may be either copy; what they say is the same.
    assert_eq!(one, two);
    assert_eq!(mapped, mapped2);
    let _ = chlauth::profile_matches(attempt[0], attempt[2]);
});
