use super::*;

fn v(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn sub(name: &str) -> clap::Command {
    let root = command();
    root.find_subcommand(name).unwrap().clone()
}

#[test]
fn the_tree_is_consistent() {
    Cli::command().debug_assert();
    command().debug_assert();
}

#[test]
fn every_visible_command_is_in_one_group() {
    let root = command();
    for s in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let n = GROUPS
            .iter()
            .filter(|(_, names, _)| names.contains(&s.get_name()))
            .count();
        assert_eq!(n, 1, "{} is in {n} groups", s.get_name());
    }
    for (_, names, _) in GROUPS {
        for n in *names {
            assert!(root.find_subcommand(n).is_some(), "{n} is not a command");
        }
    }
}

#[test]
fn long_flags_are_not_split_into_short_ones() {
    let p = prepare(&sub("crtmqm"), &v("-lp 64 -lf 16384 -p 1414 QM1")).unwrap();
    assert_eq!(p, v("--lp=64 --lf=16384 --p=1414 QM1"));
}

#[test]
fn attached_values_and_unknown_flags() {
    let p = prepare(&sub("crtmqm"), &v("-p1415 -ls 2 -drlag10 QM")).unwrap();
    assert_eq!(p, v("--p=1415 --ls=2 --drlag=10 QM"));
    assert_eq!(
        prepare(&sub("crtmqm"), &v("-zz QM")).unwrap_err(),
        "crtmqm: unknown flag '-zz'"
    );
    // `-wi` is not `-w -i`, as MQ reads it.
    assert!(prepare(&sub("endmqm"), &v("-wi QM")).is_err());
    // A value may look like a flag.
    assert_eq!(
        prepare(&sub("crtmqm"), &v("-c -x QM")).unwrap(),
        v("--c=-x QM")
    );
    let p = prepare(&sub("runmqsc"), &v("-c --conn h(1) QM")).unwrap();
    assert_eq!(p, v("--c --conn=h(1) QM"));
    // `--lp` is not MQ's spelling.
    assert!(prepare(&sub("crtmqm"), &v("--lp 3 QM")).is_err());
}

#[test]
fn help_texts_spell_flags_as_mq_does() {
    let longs = v("lp p drlag");
    assert_eq!(
        mq_spelling("'--lp <N>' --lpx ---p --p, --drlag.", &longs, "-"),
        "'-lp <N>' --lpx ---p -p, -drlag."
    );
    assert_eq!(
        mq_spelling("\\fB\\-\\-lp\\fR \\-\\-lps", &longs, "\\-"),
        "\\fB\\-lp\\fR \\-\\-lps"
    );
}
