//! Property tests: what DEFINE sets, DISPLAY shows back, for every attribute of every table; and
//! no input, however mangled, makes splitting, parsing or executing panic.

mod common;

use common::{get, Qm};
use ferrymq_mqsc::attrs::{self, AttrSpec, ValueKind};
use ferrymq_mqsc::{parse, split_commands, ObjType};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::string::string_regex;

/// A valid value for an attribute: as written in a command, and as DISPLAY should show it.
fn value(spec: &'static AttrSpec) -> BoxedStrategy<(String, String, &'static AttrSpec)> {
    let quote = |v: &str| format!("'{}'", v.replace('\'', "''"));
    match spec.kind {
        ValueKind::Int { min, max } => (min..=max)
            .prop_map(move |v| (format!("{}({v})", spec.name), v.to_string(), spec))
            .boxed(),
        ValueKind::IntOrWord { min, max, words } => prop_oneof![
            (min..=max).prop_map(|v| v.to_string()),
            select(words).prop_map(String::from)
        ]
        .prop_map(move |v| (format!("{}({v})", spec.name), v, spec))
        .boxed(),
        // Enumerated words are case-insensitive: write them in lower case.
        ValueKind::Enum(words) => select(words)
            .prop_map(move |w| {
                (
                    format!("{}({})", spec.name, w.to_lowercase()),
                    w.to_string(),
                    spec,
                )
            })
            .boxed(),
        ValueKind::Str { max_len } => string_regex(&format!("[ -~]{{0,{max_len}}}"))
            .unwrap()
            .prop_map(move |v| (format!("{}({})", spec.name, quote(&v)), v, spec))
            .boxed(),
        ValueKind::Name => string_regex("[A-Za-z0-9._/%]{1,48}")
            .unwrap()
            .prop_map(move |v| (format!("{}({})", spec.name, quote(&v)), v, spec))
            .boxed(),
        ValueKind::Switch { off } => select(vec![spec.name, off])
            .prop_map(move |w| (w.to_string(), w.to_string(), spec))
            .boxed(),
        ValueKind::ReadOnly => unreachable!("read-only attributes are filtered out"),
    }
}

/// Values for the attributes of `table` that `pick` selects and that apply to subtype `sub`.
fn values(
    table: &'static [AttrSpec],
    sub: Option<&'static str>,
    pick: fn(&AttrSpec) -> bool,
) -> Vec<BoxedStrategy<(String, String, &'static AttrSpec)>> {
    table
        .iter()
        .filter(|a| a.settable() && pick(a) && sub.is_none_or(|s| a.applies_to(s)))
        // The subtype keyword is written by the test itself.
        .filter(|a| !matches!(a.name, "CHLTYPE" | "AUTHTYPE"))
        .map(value)
        .collect()
}

/// DEFINEs (or ALTERs) an object with every value, then checks DISPLAY ALL shows each one back.
fn round_trip(define: &str, display: &str, vals: &[(String, String, &'static AttrSpec)]) {
    let mut qm = Qm::new();
    let cmd = vals
        .iter()
        .fold(define.to_string(), |c, (w, _, _)| c + " " + w);
    let r = qm.run(&cmd);
    assert!(r.ok, "{cmd}\n{}", r.text);
    let row = qm.one(display);
    for (_, want, spec) in vals {
        assert_eq!(
            get(&row, spec.name).as_deref(),
            Some(want.as_str()),
            "{}: {cmd}",
            spec.name
        );
    }
}

fn acted(a: &AttrSpec) -> bool {
    a.acted_on
}

fn stored(a: &AttrSpec) -> bool {
    !a.acted_on
}

const QUEUE_TYPES: [ObjType; 4] = [
    ObjType::QLocal,
    ObjType::QAlias,
    ObjType::QModel,
    ObjType::QRemote,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_acted_on_queue_attribute_displays_as_set(
        (t, vals) in select(QUEUE_TYPES.to_vec())
            .prop_flat_map(|t| (Just(t), values(attrs::table(t), None, acted)))
    ) {
        round_trip(
            &format!("DEFINE {}(RT.Q)", t.keyword()),
            &format!("DISPLAY {}(RT.Q) ALL", t.keyword()),
            &vals,
        );
    }

    #[test]
    fn every_stored_queue_attribute_displays_as_set(
        (t, vals) in select(QUEUE_TYPES.to_vec())
            .prop_flat_map(|t| (Just(t), values(attrs::table(t), None, stored)))
    ) {
        round_trip(
            &format!("DEFINE {}(RT.Q)", t.keyword()),
            &format!("DISPLAY {}(RT.Q) ALL", t.keyword()),
            &vals,
        );
    }

    #[test]
    fn every_channel_attribute_displays_as_set(
        (sub, vals) in select(vec!["SVRCONN", "SDR", "RCVR", "CLNTCONN", "SVR", "RQSTR"])
            .prop_flat_map(|s| (Just(s), values(attrs::CHANNEL, Some(s), |_| true)))
    ) {
        round_trip(
            &format!("DEFINE CHANNEL(RT.CHL) CHLTYPE({sub})"),
            "DISPLAY CHANNEL(RT.CHL) ALL",
            &vals,
        );
    }

    #[test]
    fn every_authinfo_and_listener_attribute_displays_as_set(
        (sub, vals) in select(vec!["IDPWOS", "IDPWLDAP", "CRLLDAP", "OCSP"])
            .prop_flat_map(|s| (Just(s), values(attrs::AUTHINFO, Some(s), |_| true))),
        lstr in values(attrs::LISTENER, None, |_| true),
    ) {
        round_trip(
            &format!("DEFINE AUTHINFO(RT.AI) AUTHTYPE({sub})"),
            "DISPLAY AUTHINFO(RT.AI) ALL",
            &vals,
        );
        round_trip("DEFINE LISTENER(RT.L)", "DISPLAY LISTENER(RT.L) ALL", &lstr);
    }

    #[test]
    fn every_qmgr_attribute_displays_as_set(vals in values(attrs::QMGR, None, |_| true)) {
        round_trip("ALTER QMGR", "DISPLAY QMGR", &vals);
    }
}

/// Commands that parse, for mutation.
const VALID: &[&str] = &[
    "DEFINE QLOCAL(A.Q) MAXDEPTH(5000) DESCR('It''s a queue') NOSHARE REPLACE",
    "def ql(b) like(a.q) defpsist(yes) msgdlvsq(fifo)",
    "ALTER QMGR CHLAUTH(DISABLED) MAXMSGL(104857600)",
    "DEFINE CHANNEL(APP.SVRCONN) CHLTYPE(SVRCONN) SHARECNV(1) MAXMSGL(104857600)",
    "DIS Q(*) TYPE(QLOCAL) WHERE(CURDEPTH GT 10) MAXDEPTH DESCR",
    "DISPLAY QSTATUS(A.*) TYPE(HANDLE) ALL",
    "DELETE QLOCAL(A.Q) PURGE",
    "DEF QR(R) RNAME('Far.Q') RQMNAME(QM2) XMITQ(QM2)",
    "START LISTENER(L1)",
    "REFRESH SECURITY TYPE(CONNAUTH)",
    "DIS CONN(*) ALL",
    "DEFINE AUTHINFO(AI) AUTHTYPE(IDPWLDAP) CONNAME('ldap(389)') CHCKCLNT(REQUIRED)",
    "CLEAR QLOCAL(A.Q)",
    "SET CHLAUTH('APP.*') TYPE(ADDRESSMAP) ADDRESS('10.0.*') USERSRC(CHANNEL) ACTION(REPLACE)",
    "SET CHLAUTH(*) TYPE(BLOCKUSER) USERLIST('nobody','*MQADMIN') WARN(YES)",
    "SET CHLAUTH(X) TYPE(USERMAP) CLNTUSER('a') MCAUSER('b') ADDRESS('1.2.3.4')",
    "SET CHLAUTH(X) TYPE(QMGRMAP) ACTION(REMOVEALL)",
    "SET CHLAUTH(X) TYPE(QMGRMAP) QMNAME(QM*) MCAUSER(u) DESCR(d)",
    "SET AUTHREC PROFILE('APP.**') OBJTYPE(QUEUE) PRINCIPAL('app') AUTHADD(GET,PUT) AUTHRMV(INQ)",
    "SET AUTHREC OBJTYPE(QMGR) GROUP('g') AUTHADD(ALL)",
    "DELETE AUTHREC PROFILE(Q) OBJTYPE(QUEUE) GROUP('g')",
    "DIS CHLAUTH(*) TYPE(ALL) ALL",
    "DIS AUTHREC PROFILE(Q) OBJTYPE(QUEUE)",
    "DIS QMGR QMID CMDLEVEL CRDATE CRTIME ALTDATE ALTTIME",
];

#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, char),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Swap(usize, usize),
}

fn mutate(text: &str, muts: &[Mutation]) -> String {
    let mut c: Vec<char> = text.chars().collect();
    for m in muts {
        let n = c.len().max(1);
        match *m {
            Mutation::Insert(i, ch) => c.insert(i % (c.len() + 1), ch),
            Mutation::Delete(i, len) => {
                let i = i % n;
                let end = (i + len).min(c.len());
                c.drain(i.min(c.len())..end);
            }
            Mutation::Duplicate(i, len) => {
                let i = (i % n).min(c.len());
                let end = (i + len).min(c.len());
                let piece: Vec<char> = c[i..end].to_vec();
                c.splice(i..i, piece);
            }
            Mutation::Swap(i, j) => {
                if !c.is_empty() {
                    let (i, j) = (i % c.len(), j % c.len());
                    c.swap(i, j);
                }
            }
        }
    }
    c.into_iter().collect()
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let ch = prop_oneof![
        select(vec![
            '(', ')', '\'', '*', '+', '-', ',', ' ', '\n', 'é', '\t', '"', '0', 'Z'
        ]),
        any::<char>()
    ];
    prop_oneof![
        (any::<usize>(), ch).prop_map(|(i, c)| Mutation::Insert(i, c)),
        (any::<usize>(), 0usize..8).prop_map(|(i, l)| Mutation::Delete(i, l)),
        (any::<usize>(), 0usize..12).prop_map(|(i, l)| Mutation::Duplicate(i, l)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::Swap(i, j)),
    ]
}

/// Splits and parses; every error must point inside the command (or just past its end).
fn check(text: &str) {
    for c in split_commands(text) {
        if let Err(e) = parse(&c.text) {
            assert!(e.column <= c.text.chars().count(), "{e:?} for {:?}", c.text);
            let _ = e.pointer(&c.text);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text);
    }

    #[test]
    fn text_made_of_mqsc_characters_never_panics(
        text in string_regex("[A-Za-z0-9()'*+, \n.%_/-]{0,120}").unwrap()
    ) {
        check(&text);
    }

    #[test]
    fn mutated_valid_commands_never_panic_when_parsed_or_run(
        base in select(VALID),
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        prop_assume!(parse(base).is_ok());
        let text = mutate(base, &muts);
        check(&text);
        let mut qm = Qm::new();
        qm.ok("DEFINE QLOCAL(A.Q)");
        let _ = qm.run(&text);
    }
}

#[test]
fn the_commands_mutated_are_valid_to_begin_with() {
    for c in VALID {
        assert!(parse(c).is_ok(), "{c}: {:?}", parse(c));
    }
}
