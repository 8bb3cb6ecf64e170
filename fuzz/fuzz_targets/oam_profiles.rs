//! Feeds arbitrary profiles, object names and authority records to the object authority
//! evaluation, as an administrator's records and an application's object names would reach it:
//! nothing may panic, a profile without wildcards matches exactly its own name, the record that
//! decides matches the name, the specificity order is antisymmetric, and granting more to a
//! record never takes authority away.
#![no_main]

use ferrymq_security::oam::{compare_specificity, Authorities, Entity, Oam, Principal, Profile, Record};
use libfuzzer_sys::fuzz_target;

/// Up to 48 characters from the alphabet that makes matching interesting.
fn text(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(48)
        .map(|b| match b % 8 {
            0 => '.',
            1 => '*',
            2 => '?',
            3 => 'A',
            4 => 'B',
            5 => 'C',
            6 => '1',
            _ => '*',
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|b| *b == 0xff);
    let name: String = text(parts.next().unwrap_or_default())
        .chars()
        .filter(|c| *c != '*' && *c != '?')
        .collect();
    let mut records = Vec::new();
    for (i, p) in parts.take(16).enumerate() {
        let (head, rest) = p.split_at(p.len().min(4));
        let mut bits = [0u8; 4];
        bits[..head.len()].copy_from_slice(head);
        let auths = Authorities::from_authlist(
            &Authorities::ALL
                .names()
                .into_iter()
                .enumerate()
                .filter(|(k, _)| u32::from_le_bytes(bits) & (1 << k) != 0)
                .map(|(_, a)| a)
                .collect::<Vec<_>>()
                .join(","),
        );
        let entity = if i % 3 == 0 {
            Entity::Group(format!("g{}", i % 2))
        } else {
            Entity::Principal("u".into())
        };
        records.push(Record {
            objtype: "QUEUE".into(),
            profile: text(rest),
            entity,
            auths,
        });
    }

    let exact = Profile::new(&name);
    assert!(exact.is_generic() || exact.matches(&name));
    for r in &records {
        let p = Profile::new(&r.profile);
        let _ = p.matches(&name);
        assert_eq!(
            compare_specificity(&p, &exact),
            compare_specificity(&exact, &p).reverse()
        );
    }

    let who = Principal {
        user: "u".into(),
        groups: vec!["g0".into(), "g1".into()],
    };
    let eff = Oam::build(records.clone()).effective(&who, "QUEUE", &name);
    for c in &eff.consulted {
        assert!(Profile::new(&c.profile).matches(&name), "{c}");
    }
    if let Some(first) = records.first_mut() {
        first.auths = Authorities::ALL;
        let more = Oam::build(records).effective(&who, "QUEUE", &name);
        assert!(more.auths.contains(eff.auths));
    }
});
