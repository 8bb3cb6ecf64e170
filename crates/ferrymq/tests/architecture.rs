//! The workspace's floors, checked: every crate depends only on crates on lower floors (its
//! `[dependencies]`; tests may use anything), so the language crate never reaches the engine, the
//! engine never reaches the server, and so on. A new crate gets its floor here, with its reason in
//! ARCHITECTURE.md.

use std::collections::BTreeMap;
use std::path::Path;

/// Each workspace crate and its floor, lowest first.
const FLOORS: &[(&str, u32)] = &[
    // Domain types and content-blind storage: no FerryMQ dependency.
    ("ferrymq-types", 0),
    ("ferrymq-log", 0),
    // The wire codec, the queue engine, the MQSC language, consensus.
    ("ferrymq-proto", 1),
    ("ferrymq-engine", 1),
    ("ferrymq-mqsc", 1),
    ("ferrymq-replication", 1),
    // Security rules (CHLAUTH, OAM, identities, TLS configuration): pure, asked by the server.
    ("ferrymq-security", 1),
    // MQSC execution against the engine; the application side.
    ("ferrymq-admin", 2),
    ("ferrymq-client", 2),
    // The deterministic simulation of a replicated group (engine and consensus together).
    ("ferrymq-sim", 2),
    // Disaster recovery's stream: its wire and the logs it ships from.
    ("ferrymq-dr", 2),
    // Wiring; measurement (which drives the product from outside, as a client).
    ("ferrymq-server", 3),
    ("ferrymq-bench", 3),
    // Managed file transfer: agents and their protocol, an application of the client.
    ("ferrymq-fte", 3),
    // The binary.
    ("ferrymq", 4),
];

/// The FerryMQ crates named in a manifest's `[dependencies]` table.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut deps = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            if name.starts_with("ferrymq") {
                deps.push(name.to_string());
            }
        }
    }
    deps
}

fn manifests() -> BTreeMap<String, String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let path = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = "))
            .unwrap_or_else(|| panic!("{}: no package name", path.display()))
            .trim_matches('"')
            .to_string();
        out.insert(name, text);
    }
    out
}

#[test]
fn every_crate_depends_only_on_lower_floors() {
    let floors: BTreeMap<&str, u32> = FLOORS.iter().copied().collect();
    let manifests = manifests();
    let mut wrong = Vec::new();
    for (name, text) in &manifests {
        let floor = *floors
            .get(name.as_str())
            .unwrap_or_else(|| panic!("crate {name} has no floor in this test"));
        for dep in dependencies(text) {
            let dep_floor = *floors
                .get(dep.as_str())
                .unwrap_or_else(|| panic!("{name} depends on {dep}, which has no floor"));
            if dep_floor >= floor {
                wrong.push(format!(
                    "{name} (floor {floor}) -> {dep} (floor {dep_floor})"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies that do not go down: {wrong:#?}"
    );
    assert_eq!(
        manifests.len(),
        FLOORS.len(),
        "every crate has a floor, and every floor a crate"
    );
}

#[test]
fn the_mqsc_language_crate_does_not_know_the_engine() {
    let manifests = manifests();
    let deps = dependencies(&manifests["ferrymq-mqsc"]);
    assert_eq!(
        deps,
        vec!["ferrymq-types"],
        "ferrymq-mqsc depends on {deps:?}"
    );
}

#[test]
fn the_product_binary_does_not_link_the_bench_crate() {
    // The product is what ships: the measurement harness is a binary of its own
    // (`ferrymq-bench`) that drives `ferrymq` from outside.
    let manifests = manifests();
    let deps = dependencies(&manifests["ferrymq"]);
    assert!(
        !deps.iter().any(|d| d == "ferrymq-bench"),
        "ferrymq depends on {deps:?}"
    );
}

#[test]
fn the_product_binary_does_not_link_the_simulator() {
    // The simulator is a test harness of its own: it runs the engine and consensus in one
    // paused-clock runtime, which the shipped binary never does.
    let manifests = manifests();
    let deps = dependencies(&manifests["ferrymq"]);
    assert!(
        !deps.iter().any(|d| d == "ferrymq-sim"),
        "ferrymq depends on {deps:?}"
    );
}

#[test]
fn the_manifest_reader_sees_dependencies_in_both_spellings() {
    let text = "[package]\nname = \"x\"\n[dependencies]\nferrymq-types.workspace = true\n\
                ferrymq-client = { path = \"../client\" }\nbytes = \"1\"\n[dev-dependencies]\n\
                ferrymq-server.workspace = true\n";
    assert_eq!(dependencies(text), vec!["ferrymq-types", "ferrymq-client"]);
}
