//! `ferrymq-bench` is a binary of its own (the product binary does not contain the harness): its
//! command tree lists the measurements and answers `--help`. (Having an integration test also has
//! `cargo test --workspace` build this binary, which the `ferrymq` package's tests run beside
//! `ferrymq`.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ferrymq-bench");

#[test]
fn the_command_tree_lists_every_measurement() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in ["cph", "report", "core", "memory"] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
            "{cmd} not listed:\n{help}"
        );
    }
    let none = Command::new(BIN).output().unwrap();
    assert_eq!(none.status.code(), Some(1), "{none:?}");
    let out = Command::new(BIN)
        .args(["report", "standalone", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Usage: ferrymq-bench report standalone"),
        "{out:?}"
    );
}
