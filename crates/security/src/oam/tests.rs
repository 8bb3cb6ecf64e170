use super::*;
use proptest::prelude::*;

fn rec(objtype: &str, profile: &str, entity: Entity, auths: &[&str]) -> Record {
    Record {
        objtype: objtype.into(),
        profile: profile.into(),
        entity,
        auths: Authorities::from_names(auths).unwrap(),
    }
}

fn user(name: &str, groups: &[&str]) -> Principal {
    Principal {
        user: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn p(n: &str) -> Entity {
    Entity::Principal(n.into())
}

fn g(n: &str) -> Entity {
    Entity::Group(n.into())
}

#[test]
fn the_bits_are_the_shared_list_of_authorities() {
    for (i, name) in AUTHORITIES.iter().enumerate() {
        assert_eq!(Authorities::named(name), Some(Authorities(1 << i)));
    }
    assert_eq!(Authorities::PUT.names(), ["PUT"]);
    assert_eq!(Authorities::CONNECT.names(), ["CONNECT"]);
    assert_eq!(Authorities::SYSTEM.names(), ["SYSTEM"]);
    assert_eq!(Authorities::from_names(&["ALL"]), Some(Authorities::ALL));
    assert_eq!(
        Authorities::from_names(&["allmqi"]).unwrap().to_string(),
        "ALTUSR,BROWSE,CONNECT,GET,INQ,PASSALL,PASSID,PUB,PUT,RESUME,SET,SETALL,SETID,SUB"
    );
    assert_eq!(
        Authorities::from_authlist("GET,PUT,LATER"),
        Authorities::GET | Authorities::PUT
    );
    assert_eq!(Authorities::from_authlist("NONE").to_string(), "NONE");
    assert!(Authorities::from_names(&["EAT"]).is_none());
}

#[test]
fn generic_profiles_match_as_mq_defines_them() {
    let yes = [
        ("DEV.**", "DEV.QUEUE.1"),
        ("DEV.**", "DEV"),
        ("DEV.**", "DEV.X"),
        ("**", "ANY.THING"),
        ("**.REPLY", "APP.REPLY"),
        ("**.REPLY", "REPLY"),
        ("A.**.Z", "A.Z"),
        ("A.**.Z", "A.B.C.Z"),
        ("APP.*", "APP.IN"),
        ("APP.*", "APP."),
        ("APP*", "APP"),
        ("APP*", "APPLE"),
        ("A?C", "ABC"),
        ("*.*", "A.B"),
        ("Q1", "Q1"),
    ];
    for (profile, name) in yes {
        assert!(matches(profile, name), "{profile} should match {name}");
    }
    let no = [
        ("DEV.**", "DEVX"),
        ("DEV.**", "OTHER.Q"),
        ("APP.*", "APP.IN.X"),
        ("APP.*", "APP"),
        ("A?C", "AC"),
        ("A?C", "ABBC"),
        ("A.**.Z", "A.B"),
        ("*.*", "A"),
        ("Q1", "q1"),
        ("Q1", "Q10"),
    ];
    for (profile, name) in no {
        assert!(!matches(profile, name), "{profile} should not match {name}");
    }
}

#[test]
fn specificity_order_is_exact_then_left_to_right_literal_question_star_double_star() {
    let order = [
        "APP.Q1", "APP.Q?", "APP.Q*", "APP.?1", "APP.*", "APP.**", "AP*.Q1", "**.Q1", "**",
    ];
    for w in order.windows(2) {
        let (a, b) = (Profile::new(w[0]), Profile::new(w[1]));
        assert_eq!(
            compare_specificity(&a, &b),
            Ordering::Greater,
            "{} should beat {}",
            w[0],
            w[1]
        );
        assert_eq!(compare_specificity(&b, &a), Ordering::Less);
    }
    assert_eq!(
        compare_specificity(&Profile::new("A.**.B"), &Profile::new("A.**")),
        Ordering::Greater
    );
}

use std::cmp::Ordering;

#[test]
fn the_most_specific_profile_of_an_entity_decides_alone() {
    let oam = Oam::build([
        rec("QUEUE", "APP.**", p("app"), &["GET", "PUT", "INQ"]),
        rec("QUEUE", "APP.SECRET", p("app"), &["INQ"]),
    ]);
    let app = user("app", &[]);
    assert!(oam.check(&app, "QUEUE", "APP.IN", Authorities::PUT).is_ok());
    let d = oam
        .check(&app, "QUEUE", "APP.SECRET", Authorities::PUT)
        .unwrap_err();
    assert_eq!(d.missing, Authorities::PUT);
    assert_eq!(d.consulted.len(), 1);
    assert_eq!(d.consulted[0].profile, "APP.SECRET");
    assert!(d
        .to_string()
        .contains("PROFILE(APP.SECRET) PRINCIPAL(app) AUTHLIST(INQ)"));
}

#[test]
fn a_principal_holds_the_union_of_its_own_and_its_groups_records() {
    let oam = Oam::build([
        rec("QUEUE", "Q1", p("app"), &["BROWSE"]),
        rec("QUEUE", "Q*", g("writers"), &["PUT"]),
        rec("QUEUE", "Q1", g("others"), &["GET"]),
        rec("QMGR", "", g("writers"), &["CONNECT"]),
    ]);
    let app = user("app", &["writers"]);
    let e = oam.effective(&app, "QUEUE", "Q1");
    assert_eq!(e.auths, Authorities::BROWSE | Authorities::PUT);
    assert_eq!(e.consulted.len(), 2);
    assert!(oam.check(&app, "QMGR", "QM1", Authorities::CONNECT).is_ok());
    let d = oam
        .check(&user("nobody", &[]), "QMGR", "QM1", Authorities::CONNECT)
        .unwrap_err();
    assert!(d.consulted.is_empty());
    assert!(d.to_string().contains("no authority record"), "{d}");
    // Another type's records do not count.
    assert!(oam.check(&app, "CHANNEL", "Q1", Authorities::PUT).is_err());
}

fn name_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec("[AB]{1,3}", 1..4).prop_map(|q| q.join("."))
}

fn profile_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof!["[AB]{1,3}", "[AB?*]{1,3}", Just("**".to_string())],
        1..4,
    )
    .prop_map(|q| q.join("."))
}

fn auths_strategy() -> impl Strategy<Value = Authorities> {
    (0u32..(1 << 22)).prop_map(Authorities)
}

fn entity_strategy() -> impl Strategy<Value = Entity> {
    prop_oneof![Just(p("u")), Just(g("g1")), Just(g("g2")), Just(p("other"))]
}

fn record_strategy() -> impl Strategy<Value = Record> {
    (profile_strategy(), entity_strategy(), auths_strategy()).prop_map(
        |(profile, entity, auths)| Record {
            objtype: "QUEUE".into(),
            profile,
            entity,
            auths,
        },
    )
}

/// A reference: a generic profile as a regular-language test written independently, by
/// expanding it over the small alphabet of the strategies.
fn reference_match(profile: &str, name: &str) -> bool {
    fn go(p: &[&str], n: &[&str]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(&"**"), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(q), Some(x)) => one(q.as_bytes(), x.as_bytes()) && go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    fn one(q: &[u8], x: &[u8]) -> bool {
        match (q.first(), x.first()) {
            (None, None) => true,
            (Some(b'*'), _) => one(&q[1..], x) || (!x.is_empty() && one(q, &x[1..])),
            (Some(b'?'), Some(_)) => one(&q[1..], &x[1..]),
            (Some(a), Some(b)) if a == b => one(&q[1..], &x[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = profile.split('.').collect();
    let n: Vec<&str> = name.split('.').collect();
    go(&p, &n)
}

proptest! {
    #[test]
    fn matching_agrees_with_a_reference(profile in profile_strategy(), name in name_strategy()) {
        prop_assert_eq!(matches(&profile, &name), reference_match(&profile, &name));
    }

    #[test]
    fn adding_a_grant_to_a_record_never_removes_authority(
        records in proptest::collection::vec(record_strategy(), 0..8),
        which in any::<prop::sample::Index>(),
        extra in auths_strategy(),
        name in name_strategy(),
    ) {
        let who = user("u", &["g1", "g2"]);
        let before = Oam::build(records.clone()).effective(&who, "QUEUE", &name).auths;
        let mut more = records.clone();
        if !more.is_empty() {
            let i = which.index(more.len());
            more[i].auths = more[i].auths | extra;
        }
        let after = Oam::build(more).effective(&who, "QUEUE", &name).auths;
        prop_assert!(after.contains(before));
    }

    #[test]
    fn joining_a_group_never_removes_authority(
        records in proptest::collection::vec(record_strategy(), 0..8),
        name in name_strategy(),
    ) {
        let oam = Oam::build(records);
        let alone = oam.effective(&user("u", &["g1"]), "QUEUE", &name).auths;
        let more = oam.effective(&user("u", &["g1", "g2"]), "QUEUE", &name).auths;
        prop_assert!(more.contains(alone));
    }

    #[test]
    fn an_exact_profile_beats_every_generic_one(
        records in proptest::collection::vec(record_strategy(), 0..8),
        name in name_strategy(),
        exact in auths_strategy(),
    ) {
        let mut records = records;
        records.retain(|r| r.entity != p("u") || r.profile != name);
        records.push(Record { objtype: "QUEUE".into(), profile: name.clone(), entity: p("u"), auths: exact });
        let oam = Oam::build(records);
        let e = oam.effective(&user("u", &[]), "QUEUE", &name);
        prop_assert_eq!(e.auths, exact);
        prop_assert_eq!(&e.consulted[0].profile, &name);
    }

    #[test]
    fn specificity_is_a_total_order(a in profile_strategy(), b in profile_strategy(), c in profile_strategy()) {
        let (pa, pb, pc) = (Profile::new(&a), Profile::new(&b), Profile::new(&c));
        prop_assert_eq!(compare_specificity(&pa, &pb), compare_specificity(&pb, &pa).reverse());
        if compare_specificity(&pa, &pb) != Ordering::Less && compare_specificity(&pb, &pc) != Ordering::Less {
            prop_assert!(compare_specificity(&pa, &pc) != Ordering::Less);
        }
    }

    #[test]
    fn the_decision_is_the_most_specific_matching_profile(
        records in proptest::collection::vec(record_strategy(), 1..8),
        name in name_strategy(),
    ) {
        let oam = Oam::build(records.clone());
        let e = oam.effective(&user("u", &[]), "QUEUE", &name);
        let mine: Vec<&Record> = records.iter().filter(|r| r.entity == p("u") && matches(&r.profile, &name)).collect();
        match e.consulted.first() {
            None => prop_assert!(mine.is_empty()),
            Some(c) => {
                let chosen = Profile::new(&c.profile);
                for r in mine {
                    prop_assert!(compare_specificity(&chosen, &Profile::new(&r.profile)) != Ordering::Less);
                }
            }
        }
    }
}
