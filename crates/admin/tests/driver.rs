//! runmqsc's bookkeeping: exit codes 0/10/20, the summary line, and echoed commands, driven the
//! way the CLI drives them (split, syntax check, execute, count).

mod common;

use common::Qm;
use ferrymq_admin::execute;
use ferrymq_mqsc::{echo_line, parse, split_commands, Command, Tally};

/// Runs a script as runmqsc does and returns its tally.
fn run_script(qm: &mut Qm, script: &str) -> Tally {
    let mut t = Tally::default();
    for c in split_commands(script) {
        t.read += 1;
        match parse(&c.text) {
            Err(_) => t.syntax_errors += 1,
            Ok(Command::End) => break,
            Ok(cmd) => {
                if !execute(&cmd, &mut qm.engine, &mut qm.ops, common::NOW_MS).ok {
                    t.failed += 1;
                }
            }
        }
    }
    t
}

#[test]
fn exit_code_is_zero_when_every_command_works() {
    let t = run_script(&mut Qm::new(), "DEF QL(A)\nDIS QL(A)\nEND\n");
    assert_eq!(
        t,
        Tally {
            read: 3,
            syntax_errors: 0,
            failed: 0
        }
    );
    assert_eq!(t.exit_code(), 0);
    assert_eq!(
        t.summary(),
        "3 MQSC commands read. 0 had syntax errors. 0 failed."
    );
    assert_eq!(Tally::default().exit_code(), 0);
}

#[test]
fn exit_code_is_ten_when_some_commands_fail() {
    let t = run_script(
        &mut Qm::new(),
        "DEF QL(A)\nDEF QL(A) MAXDEPTH(1)\nDEF QL(B) FOO\n",
    );
    assert_eq!(
        t,
        Tally {
            read: 3,
            syntax_errors: 1,
            failed: 1
        }
    );
    assert_eq!(t.exit_code(), 10);
    assert_eq!(
        t.summary(),
        "3 MQSC commands read. 1 had syntax errors. 1 failed."
    );
}

#[test]
fn exit_code_is_twenty_when_no_command_works() {
    let t = run_script(&mut Qm::new(), "DELETE QL(NOPE)\nDEF QL(B) FOO\n");
    assert_eq!(t.exit_code(), 20);
    let one = Tally {
        read: 1,
        syntax_errors: 1,
        failed: 0,
    };
    assert_eq!(one.exit_code(), 20);
    assert_eq!(
        one.summary(),
        "1 MQSC command read. 1 had syntax errors. 0 failed."
    );
}

#[test]
fn commands_are_echoed_with_a_right_aligned_counter() {
    assert_eq!(
        echo_line(1, "define qlocal(Q1)"),
        "     1 : define qlocal(Q1)"
    );
    assert_eq!(echo_line(42, "end"), "    42 : end");
}
