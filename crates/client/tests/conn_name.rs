//! Connection name lists in MQ syntax.

use ferrymq_client::{parse_conn_name, ConnectOptions, Reason, Transport, DEFAULT_PORT};
use proptest::prelude::*;

#[test]
fn a_list_with_spaces_and_default_ports_is_parsed_in_order() {
    assert_eq!(
        parse_conn_name("localhost(1414), 127.0.0.1(1415)").unwrap(),
        vec![
            ("localhost".to_string(), 1414),
            ("127.0.0.1".to_string(), 1415)
        ]
    );
    assert_eq!(
        parse_conn_name(" mq1 ,mq2( 2000 ) ").unwrap(),
        vec![("mq1".to_string(), DEFAULT_PORT), ("mq2".to_string(), 2000)]
    );
    assert_eq!(
        parse_conn_name("::1(1414)").unwrap(),
        vec![("::1".to_string(), 1414)]
    );
}

#[test]
fn bad_lists_fail_with_environment_error_naming_the_bad_part() {
    for (bad, names) in [
        ("", "empty"),
        ("   ", "empty"),
        ("a(1),,b(2)", "entry 2"),
        ("host(14x4)", "14x4"),
        ("host(0)", "'0'"),
        ("host(70000)", "70000"),
        ("host(1414", "host(1414"),
        ("host(1414)x", "host(1414)x"),
        ("(1414)", "no host"),
        ("my host(1414)", "my host"),
    ] {
        let e = parse_conn_name(bad).unwrap_err();
        assert_eq!(e.reason, Reason::ENVIRONMENT_ERROR, "{bad:?}");
        assert!(e.message.contains(names), "{bad:?}: {}", e.message);
    }
}

#[test]
fn client_options_take_the_list_and_bindings_options_none() {
    let o = ConnectOptions::client("QM1", "a(1),b").unwrap();
    assert_eq!(
        o.transport,
        Transport::Client {
            conn_names: vec![("a".into(), 1), ("b".into(), 1414)]
        }
    );
    assert!(ConnectOptions::client("QM1", "a(").is_err());
    assert_eq!(
        ConnectOptions::bindings("QM1").transport,
        Transport::Bindings { home: None }
    );
}

proptest! {
    #[test]
    fn formatted_lists_parse_back(
        entries in prop::collection::vec(("[a-z][a-z0-9.-]{0,20}", 1u16..), 1..5),
        spaces in " {0,2}",
    ) {
        let text = entries
            .iter()
            .map(|(h, p)| format!("{spaces}{h}{spaces}({spaces}{p}{spaces}){spaces}"))
            .collect::<Vec<_>>()
            .join(",");
        prop_assert_eq!(parse_conn_name(&text).unwrap(), entries);
    }

    #[test]
    fn any_text_is_parsed_or_refused_without_panicking(s in ".{0,40}") {
        if let Err(e) = parse_conn_name(&s) {
            prop_assert_eq!(e.reason, Reason::ENVIRONMENT_ERROR);
        }
    }
}
