//! The command line as a user meets it, against the real binary: every command answers `--help`
//! (the list comes from the parser itself, `ferrymq commands`), `--version` and `dspmqver`
//! describe the build, completions and man pages are generated, MQ's flag spellings parse, and
//! unknown flags and missing values are errors that name the flag as typed.

mod support;

use std::process::Output;

use support::{free_port, Home};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(out: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Every command's words, as the parser lists them.
fn commands(home: &Home) -> Vec<String> {
    home.ok(&["commands"])
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn every_command_answers_help_with_a_usage_line() {
    let home = Home::new();
    let all = commands(&home);
    // The list is the parser's, not a copy: spot-check that it reaches every kind of command.
    for must in [
        "crtmqm",
        "makedrprimary",
        "runmqsc",
        "run-qmgr",
        "put",
        "get",
        "browse",
        "req",
        "runmqdlq",
        "relay",
        "dmplog",
        "dspmqver",
        "completions",
        "man",
    ] {
        assert!(all.iter().any(|c| c == must), "{must} not in {all:?}");
    }
    assert!(all.len() >= 25, "{all:?}");
    // The measurement harness is the ferrymq-bench binary's, not the product's.
    for gone in ["cph", "report"] {
        assert!(
            !all.iter().any(|c| c.split(' ').next() == Some(gone)),
            "{gone} in {all:?}"
        );
    }
    for cmd in &all {
        let mut args: Vec<&str> = cmd.split(' ').collect();
        args.push("--help");
        let out = home.run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", show(&out));
        let stdout = text(&out.stdout);
        let usage = format!("Usage: ferrymq {cmd}");
        assert!(
            stdout.lines().any(|l| l.starts_with(&usage)),
            "{args:?}: no line starting '{usage}':\n{stdout}"
        );
        assert!(
            stdout.contains("Examples:"),
            "{args:?}: no examples:\n{stdout}"
        );
        // A one-line description first.
        assert!(
            !stdout.lines().next().unwrap_or_default().trim().is_empty(),
            "{args:?}:\n{stdout}"
        );
    }
}

#[test]
fn mq_commands_take_dash_question_mark_and_show_mq_spellings() {
    let home = Home::new();
    for cmd in ["crtmqm", "endmqm", "dspmq", "runmqsc", "makedrprimary"] {
        let out = home.run(&[cmd, "-?"]);
        assert_eq!(out.status.code(), Some(0), "{cmd} -?: {}", show(&out));
        assert!(
            text(&out.stdout).contains(&format!("Usage: ferrymq {cmd}")),
            "{}",
            show(&out)
        );
    }
    let help = home.ok(&["crtmqm", "--help"]);
    for flag in [
        "-lp <N>",
        "-lf <PAGES>",
        "-drlag <BYTES>",
        "-ha <LIST>",
        "-x <N>",
    ] {
        assert!(help.contains(flag), "{flag} missing:\n{help}");
    }
    for gnu in ["--lp", "--lf", "--drlag", "--ha "] {
        assert!(!help.contains(gnu), "{gnu} shown:\n{help}");
    }
    assert!(help.contains("Examples:"), "{help}");
    // `-h` is crtmqm's MAXHANDLES, not help.
    assert!(help.contains("-h <MAXHANDLES>"), "{help}");
    // `ferrymq help CMD` is the same text.
    assert_eq!(home.ok(&["help", "crtmqm"]), help);
}

#[test]
fn top_level_help_groups_the_commands_and_exit_statuses_stay() {
    let home = Home::new();
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let out = home.ok(args);
        assert!(out.contains("Queue manager lifecycle"), "{out}");
        assert!(out.contains("Disaster recovery"), "{out}");
        for cmd in [
            "crtmqm",
            "sethapreferred",
            "makedrsecondary",
            "put",
            "dmplog",
            "relay",
        ] {
            assert!(
                out.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
                "{cmd} not listed:\n{out}"
            );
        }
        assert!(!out.contains("run-qmgr"), "internal command shown:\n{out}");
    }
    let none = home.run(&[]);
    assert_eq!(none.status.code(), Some(1), "{}", show(&none));
    assert!(text(&none.stderr).contains("crtmqm"), "{}", show(&none));
    let unknown = home.run(&["crtmgm", "QM"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", show(&unknown));
    assert!(
        text(&unknown.stderr).contains("unknown command 'crtmgm'"),
        "{}",
        show(&unknown)
    );
}

#[test]
fn version_and_dspmqver_describe_the_build() {
    let home = Home::new();
    let v = home.ok(&["--version"]);
    assert!(
        v.starts_with(&format!("ferrymq {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    let d = home.ok(&["dspmqver"]);
    let field = |name: &str| -> String {
        d.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name}: line in\n{d}"))
    };
    assert_eq!(field("Name"), "FerryMQ");
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    assert!(field("Platform").contains("linux"), "{d}");
    assert!(!field("Level").is_empty(), "{d}");
    assert!(
        ["debug", "release"].contains(&field("BuildType").as_str()),
        "{d}"
    );
    assert_eq!(field("DataPath"), home.path().display().to_string());
}

#[test]
fn completions_and_man_pages_are_generated_with_mq_spellings() {
    let home = Home::new();
    let bash = home.ok(&["completions", "bash"]);
    assert!(bash.len() > 1000 && bash.contains("crtmqm"), "{bash}");
    assert!(bash.contains("-lp") && !bash.contains("--lp"), "{bash}");
    for shell in ["zsh", "fish"] {
        let s = home.ok(&["completions", shell]);
        assert!(s.contains("crtmqm") && s.contains("drlag"), "{shell}: {s}");
        assert!(!s.contains("--lp"), "{shell}: {s}");
    }
    // fish: `-o` is a single-dash option of several letters.
    let fish = home.ok(&["completions", "fish"]);
    assert!(
        fish.contains("-o lp ") && !fish.contains("-l lp "),
        "{fish}"
    );
    assert!(fish.contains("-l conn "), "{fish}");
    assert!(!home.run(&["completions", "tcsh"]).status.success());

    let dir = home.path().join("man");
    let out = home.ok(&["man", "--out", dir.to_str().unwrap()]);
    assert!(out.contains("pages written"), "{out}");
    for page in [
        "ferrymq.1",
        "ferrymq-crtmqm.1",
        "ferrymq-runmqsc.1",
        "ferrymq-dspmq.1",
        "ferrymq-relay.1",
    ] {
        let p = dir.join(page);
        assert!(p.exists(), "{} missing", p.display());
    }
    assert!(!dir.join("ferrymq-run-qmgr.1").exists(), "internal command");
    let crt = std::fs::read_to_string(dir.join("ferrymq-crtmqm.1")).unwrap();
    assert!(crt.contains(".TH") && crt.contains("\\-lp"), "{crt}");
    assert!(!crt.contains("\\-\\-lp"), "{crt}");
}

#[test]
fn mq_style_flags_still_parse() {
    let home = Home::new();
    let port = free_port().to_string();
    home.ok(&["crtmqm", "-lp", "3", "-lf", "4096", "-p", &port, "QM"]);
    let ini = home.ok(&["dspmqini", "-m", "QM"]);
    for want in [
        "LogPrimaryFiles=3".to_string(),
        "LogFilePages=4096".to_string(),
        format!("Port={port}"),
    ] {
        assert!(ini.contains(&want), "{want} not in\n{ini}");
    }
    // A value attached to its flag, as MQ allows; a value that looks like a flag.
    home.ok(&["crtmqm", "-p1415", "-lp3", "-c", "-x", "QM2"]);
    let ini = home.ok(&["dspmqini", "QM2"]);
    assert!(ini.contains("Port=1415"), "{ini}");
    assert!(ini.contains("LogPrimaryFiles=3"), "{ini}");
    assert!(ini.contains("Description=-x"), "{ini}");
}

#[test]
fn unknown_flags_and_missing_values_are_errors_naming_the_flag() {
    let home = Home::new();
    let out = home.run(&["crtmqm", "-bogus", "QM"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = text(&out.stderr);
    assert!(err.contains("unknown flag '-bogus'"), "{err}");
    assert!(err.contains("Usage: ferrymq crtmqm"), "{err}");
    assert!(!home.path().join("qmgrs/QM").exists());

    // MQ's spelling only: `--lp` is not `-lp`.
    let out = home.run(&["crtmqm", "--lp", "3", "QM"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(text(&out.stderr).contains("'--lp'"), "{}", show(&out));

    // runmqsc's usage errors exit 20, as MQ's runmqsc.
    let out = home.run(&["runmqsc", "-bogus", "QM"]);
    assert_eq!(out.status.code(), Some(20), "{}", show(&out));
    assert!(text(&out.stderr).contains("'-bogus'"), "{}", show(&out));

    let out = home.run(&["relay", "--bogus", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(text(&out.stderr).contains("'--bogus'"), "{}", show(&out));

    for (args, flag) in [
        (&["crtmqm", "QM", "-lp"][..], "-lp"),
        (&["crtmqm", "QM", "-drlag"], "-drlag"),
        (&["dspmq", "-m"], "-m"),
        (&["relay", "--target", "h(1)", "--listen"], "--listen"),
    ] {
        let out = home.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let err = text(&out.stderr);
        assert!(err.contains("value is required"), "{args:?}: {err}");
        assert!(err.contains(&format!("'{flag} ")), "{args:?}: {err}");
        if !flag.starts_with("--") {
            assert!(!err.contains(&format!("-{flag}")), "{args:?}: {err}");
        }
    }
    // A required flag left out.
    let out = home.run(&["setmqini", "-m", "QM", "-s", "Log", "-k", "Durability"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(text(&out.stderr).contains("-v <VALUE>"), "{}", show(&out));
    // DR flags without a DR role (read before as switches, so never seen: accepted silently).
    let out = home.run(&["crtmqm", "-p", "0", "-drlag", "10", "QM"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(text(&out.stderr).contains("go with -dr"), "{}", show(&out));
    assert!(!home.path().join("qmgrs/QM").exists());
    // A value that is not a number.
    let out = home.run(&["crtmqm", "-lp", "many", "QM"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("'many' for '-lp <N>'"),
        "{}",
        show(&out)
    );
}
