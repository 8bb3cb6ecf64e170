//! Parsing: MQ's verbs, object keywords and abbreviations, case folding, quoting, continuation
//! lines, generic names, WHERE, and syntax errors that point at the offending token.

use ferrymq_mqsc::{
    parse, split_commands, Command, DisplayWhat, FilterOp, ObjType, Requested, SyntaxError,
};

fn err(text: &str) -> SyntaxError {
    match parse(text) {
        Ok(c) => panic!("{text} parsed as {c:?}"),
        Err(e) => e,
    }
}

/// The token an error points at, taken from the text by its column.
fn pointed_at(text: &str, e: &SyntaxError) -> String {
    text.chars()
        .skip(e.column)
        .take(e.token.chars().count())
        .collect()
}

fn define_attrs(text: &str) -> Vec<(String, String)> {
    match parse(text).unwrap() {
        Command::Define { attrs, .. }
        | Command::Alter { attrs, .. }
        | Command::AlterQmgr { attrs } => attrs
            .into_iter()
            .map(|s| (s.attr.name.to_string(), s.value))
            .collect(),
        c => panic!("{c:?}"),
    }
}

#[test]
fn abbreviations_and_lower_case_mean_the_same_as_the_full_keywords() {
    let short = parse("def ql(a) maxdepth(10)").unwrap();
    let long = parse("DEFINE QLOCAL(A) MAXDEPTH(10)").unwrap();
    assert_eq!(short, long);
    assert_eq!(
        parse("dis q(*)").unwrap(),
        Command::Display {
            what: DisplayWhat::Queue,
            name: "*".into(),
            requested: Requested::Default,
            where_: None,
            type_: None
        }
    );
    assert_eq!(
        define_attrs("ALT QMGR DESCR('x')"),
        [("DESCR".into(), "x".into())]
    );
    for (abbr, full) in [
        ("ALT QA(X) TARGQ(Y)", "ALTER QALIAS(X) TARGET(Y)"),
        ("DEF QM(X)", "DEFINE QMODEL(X)"),
        ("DEF QR(X)", "DEFINE QREMOTE(X)"),
        (
            "DEF CHL(X) CHLTYPE(SVRCONN)",
            "DEFINE CHANNEL(X) CHLTYPE(SVRCONN)",
        ),
        ("DEF LSTR(X)", "DEFINE LISTENER(X)"),
        ("STA LSTR(X)", "START LISTENER(X)"),
        ("REF SECURITY", "REFRESH SECURITY TYPE(AUTHSERV)"),
        ("DIS QS(X)", "DISPLAY QSTATUS(X)"),
        ("DIS CHS(*)", "DISPLAY CHSTATUS(*)"),
        ("DIS QUEUE(X) TYPE(QL)", "DIS Q(X) TYPE(QLOCAL)"),
    ] {
        assert_eq!(parse(abbr).unwrap(), parse(full).unwrap(), "{abbr}");
    }
}

#[test]
fn every_verb_parses_to_its_command() {
    assert_eq!(parse("end").unwrap(), Command::End);
    assert_eq!(parse("ping qmgr").unwrap(), Command::PingQmgr);
    assert_eq!(
        parse("resolve channel(QM1.TO.QM2) action(backout)").unwrap(),
        Command::ResolveChannel {
            name: "QM1.TO.QM2".into(),
            commit: false
        }
    );
    assert_eq!(
        parse("RESET CHANNEL(C1) SEQNUM(40)").unwrap(),
        Command::ResetChannel {
            name: "C1".into(),
            seqnum: 40
        }
    );
    assert_eq!(
        parse("RESET CHANNEL(C1)").unwrap(),
        Command::ResetChannel {
            name: "C1".into(),
            seqnum: 1
        }
    );
    assert!(parse("RESOLVE CHANNEL(C1)").is_err(), "ACTION is required");
    assert!(parse("RESOLVE CHANNEL(C1) ACTION(MAYBE)").is_err());
    assert!(parse("RESOLVE QLOCAL(Q1) ACTION(COMMIT)").is_err());
    assert_eq!(
        parse("clear ql(q1)").unwrap(),
        Command::Clear { name: "Q1".into() }
    );
    assert_eq!(
        parse("stop listener(l1)").unwrap(),
        Command::StopListener {
            name: "L1".into(),
            ignstate: false
        }
    );
    assert_eq!(
        parse("sta chl(c1) ignstate(yes)").unwrap(),
        Command::StartChannel {
            name: "C1".into(),
            ignstate: true
        }
    );
    assert_eq!(
        parse("refresh security(*) type(connauth)").unwrap(),
        Command::RefreshSecurity {
            type_: "CONNAUTH".into()
        }
    );
    assert_eq!(
        parse("delete qlocal(q) purge").unwrap(),
        Command::Delete {
            kind: ObjType::QLocal,
            name: "Q".into(),
            purge: true
        }
    );
    assert_eq!(
        parse("delete authinfo(a)").unwrap(),
        Command::Delete {
            kind: ObjType::AuthInfo,
            name: "A".into(),
            purge: false
        }
    );
}

#[test]
fn unquoted_values_fold_and_quoted_values_keep_case_spaces_and_escaped_quotes() {
    assert_eq!(
        define_attrs("DEF QL(Q) DESCR(hello) BOQNAME('Mixed.Case')"),
        [
            ("DESCR".into(), "HELLO".into()),
            ("BOQNAME".into(), "Mixed.Case".into())
        ]
    );
    assert_eq!(
        define_attrs("DEF QL(Q) DESCR('It''s two words')"),
        [("DESCR".into(), "It's two words".into())]
    );
    match parse("DEF QL('lower.q')").unwrap() {
        Command::Define { name, .. } => assert_eq!(name, "lower.q"),
        c => panic!("{c:?}"),
    }
}

#[test]
fn parameters_may_come_in_any_order_with_blanks_or_commas_between() {
    let a = parse("DEF QL(X) REPLACE MAXDEPTH(5) DESCR('d')").unwrap();
    let b = parse("DEF QL (X),DESCR ('d'),  MAXDEPTH(5)   REPLACE").unwrap();
    match (a, b) {
        (
            Command::Define {
                attrs: mut x,
                replace: true,
                ..
            },
            Command::Define {
                attrs: mut y,
                replace: true,
                ..
            },
        ) => {
            x.sort_by_key(|s| s.attr.name);
            y.sort_by_key(|s| s.attr.name);
            assert_eq!(x, y);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn replace_noreplace_and_like_are_read() {
    match parse("DEF QL(B) LIKE(a) NOREPLACE").unwrap() {
        Command::Define { like, replace, .. } => {
            assert_eq!(like.as_deref(), Some("A"));
            assert!(!replace);
        }
        c => panic!("{c:?}"),
    }
    match parse("DEF QL(B)").unwrap() {
        Command::Define {
            like: None,
            replace: false,
            ..
        } => {}
        c => panic!("{c:?}"),
    }
}

#[test]
fn switches_stand_alone() {
    assert_eq!(
        define_attrs("DEF QL(X) NOSHARE TRIGGER NOHARDENBO"),
        [
            ("SHARE".into(), "NOSHARE".into()),
            ("TRIGGER".into(), "TRIGGER".into()),
            ("HARDENBO".into(), "NOHARDENBO".into())
        ]
    );
}

#[test]
fn continuation_lines_and_comments_join_into_commands_that_parse() {
    let script = "* a comment\n\
                  DEFINE QLOCAL(A) +\n\
                  \x20     MAXDEPTH(7) -\n\
                  \x20DESCR('one -\n\
                  two')\n\
                  \n\
                  \x20 * another comment\n\
                  DIS QL(A) ALL\n";
    let cmds = split_commands(script);
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert_eq!(cmds[0].line, 2);
    assert_eq!(cmds[1].line, 8);
    assert_eq!(
        define_attrs(&cmds[0].text),
        [
            ("MAXDEPTH".into(), "7".into()),
            ("DESCR".into(), "one two".into())
        ]
    );
    assert!(parse(&cmds[1].text).is_ok());
}

#[test]
fn generic_names_are_for_display_only() {
    for t in [
        "DIS QL(SYSTEM.*)",
        "DIS CHL(*)",
        "DIS CONN(*)",
        "DIS LSSTATUS(L*)",
    ] {
        assert!(parse(t).is_ok(), "{t}");
    }
    let e = err("DEF QL(ABC*)");
    assert_eq!(e.column, 7);
    assert!(e.message.contains("generic"), "{}", e.message);
    assert!(parse("DIS QL(A*B)").is_err());
}

#[test]
fn where_takes_an_attribute_an_operator_and_a_value() {
    match parse("dis ql(*) where(curdepth gt 10) maxdepth").unwrap() {
        Command::Display {
            where_: Some(f),
            requested,
            ..
        } => {
            assert_eq!(
                (f.attr.as_str(), f.op, f.value.as_str()),
                ("CURDEPTH", FilterOp::Gt, "10")
            );
            assert_eq!(requested, Requested::List(vec!["MAXDEPTH".into()]));
        }
        c => panic!("{c:?}"),
    }
    for op in ["EQ", "NE", "GT", "LT", "GE", "LE", "LK", "NL"] {
        assert!(
            parse(&format!("DIS Q(*) WHERE(DESCR {op} 'a*')")).is_ok(),
            "{op}"
        );
    }
    let text = "DIS QL(*) WHERE(NOSUCH EQ 1)";
    let e = err(text);
    assert_eq!(pointed_at(text, &e), "NOSUCH");
}

#[test]
fn an_unknown_attribute_is_an_error_pointing_at_it() {
    let text = "DEFINE QLOCAL(Q1) MAXDEPTH(5) COLOUR(RED)";
    let e = err(text);
    assert_eq!(e.column, 30);
    assert_eq!(e.token, "COLOUR");
    assert_eq!(pointed_at(text, &e), "COLOUR");
    assert_eq!(e.pointer(text), format!("{text}\n{}^", " ".repeat(30)));
}

#[test]
fn bad_values_are_errors_pointing_at_the_value() {
    for (text, token) in [
        ("DEF QL(Q) MAXDEPTH(1000000000)", "1000000000"),
        ("DEF QL(Q) MAXDEPTH(-1)", "-1"),
        ("DEF QL(Q) DEFPRTY(10)", "10"),
        ("DEF QL(Q) DEFPSIST(MAYBE)", "MAYBE"),
        ("DEF QL(Q) MSGDLVSQ(LIFO)", "LIFO"),
        ("DEF LSTR(L) PORT(65536)", "65536"),
        ("DEF CHL(C) CHLTYPE(SVRCONN) SHARECNV(1000)", "1000"),
        ("DEF QL(Q) BOQNAME(has%ok.but#not)", "has%ok.but#not"),
        ("ALT QMGR MAXMSGL(104857601)", "104857601"),
    ] {
        let e = err(text);
        assert_eq!(pointed_at(text, &e), token, "{text}: {e}");
    }
    let long = "D".repeat(65);
    let text = format!("DEF QL(Q) DESCR('{long}')");
    let e = err(&text);
    assert_eq!(e.column, 16, "{e}");
    let text = format!("DEF QL({})", "N".repeat(49));
    assert_eq!(err(&text).column, 7);
    let text = format!("DEF CHL({}) CHLTYPE(SVRCONN)", "C".repeat(21));
    assert_eq!(err(&text).column, 8);
}

#[test]
fn malformed_syntax_points_where_it_went_wrong() {
    for (text, col) in [
        ("DEF QL(Q) DESCR('no end)", 16),
        ("DEF QL(Q) MAXDEPTH(5", 18),
        ("DEF QL(Q) MAXDEPTH", 10),
        ("DEF QL(Q) NOSHARE(1)", 17),
        ("DEF QL(Q) REPLACE REPLACE", 18),
        ("DEF QL(Q) MAXDEPTH(1) MAXDEPTH(2)", 22),
        ("DEF QL(Q) CURDEPTH(1)", 10),
        ("DEF QL", 4),
        ("DEF", 3),
        ("FROB QL(Q)", 0),
        ("DEF SUB(S)", 4),
        ("DEF QL(Q) )", 10),
        ("DEF QL(Q) 'x'", 10),
        ("DEF QL(Q) DESCR(two words)", 16),
        ("CLEAR QA(Q)", 6),
        ("DEF QL(Q) PURGE", 10),
        ("DELETE QA(Q) PURGE", 13),
        ("DIS QMGR(X)", 8),
        ("DIS QL(*) TYPE(QALIAS)", 10),
        ("DIS QSTATUS(Q) TYPE(BOTH)", 20),
        ("END NOW", 4),
    ] {
        let e = err(text);
        assert_eq!(e.column, col, "{text}: {e}");
    }
}

#[test]
fn an_attribute_of_another_object_type_is_an_error() {
    let text = "DEFINE QALIAS(A) TARGET(B) MAXDEPTH(5)";
    let e = err(text);
    assert_eq!(pointed_at(text, &e), "MAXDEPTH");
    assert!(e.message.contains("QALIAS"), "{e}");
    let text = "DEFINE QLOCAL(A) RNAME(B)";
    assert_eq!(pointed_at(text, &err(text)), "RNAME");
}

#[test]
fn channel_and_authinfo_types_are_required_and_restrict_attributes() {
    let e = err("DEFINE CHANNEL(C) SHARECNV(1)");
    assert!(e.message.contains("CHLTYPE"), "{e}");
    assert!(err("ALTER CHANNEL(C) SHARECNV(1)")
        .message
        .contains("CHLTYPE"));
    assert!(err("DEFINE AUTHINFO(A) CHCKCLNT(NONE)")
        .message
        .contains("AUTHTYPE"));
    assert!(parse("ALTER AUTHINFO(A) CHCKCLNT(NONE)").is_ok());
    let text = "DEFINE CHANNEL(C) CHLTYPE(SVRCONN) XMITQ(XQ)";
    assert_eq!(pointed_at(text, &err(text)), "XMITQ");
    assert!(parse("DEFINE CHANNEL(C) CHLTYPE(SDR) XMITQ(XQ) CONNAME('host(1414)')").is_ok());
    let text = "DEFINE CHANNEL(C) CHLTYPE(TCP)";
    assert_eq!(pointed_at(text, &err(text)), "TCP");
}

#[test]
fn an_unterminated_continuation_is_reported() {
    let cmds = split_commands("DEFINE QLOCAL(A) +\n");
    assert_eq!(cmds.len(), 1);
    let e = err(&cmds[0].text);
    assert!(e.message.contains("continuation"), "{e}");
}
