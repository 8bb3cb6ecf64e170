//! What `ferrymq --version` and `ferrymq dspmqver` report: the version, and the build facts
//! build.rs recorded (git commit, target, compiler, profile).

/// The package version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit built from, or empty when not built from a git checkout.
pub const COMMIT: &str = env!("FERRYMQ_GIT_COMMIT");
pub const TARGET: &str = env!("FERRYMQ_TARGET");
pub const RUSTC: &str = env!("FERRYMQ_RUSTC");
pub const PROFILE: &str = env!("FERRYMQ_PROFILE");

/// `ferrymq --version`'s text after the name.
pub const SHORT: &str = env!("CARGO_PKG_VERSION");

/// `ferrymq dspmqver`: one `Field: value` line each, in the spirit of MQ's dspmqver.
pub fn dspmqver() -> String {
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "unknown".to_string()
        } else {
            s.to_string()
        }
    };
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let fields = [
        ("Name", "FerryMQ".to_string()),
        ("Version", VERSION.to_string()),
        ("Level", or_unknown(COMMIT)),
        ("BuildType", or_unknown(PROFILE)),
        ("Platform", or_unknown(TARGET)),
        ("Mode", format!("{}-bit", std::mem::size_of::<usize>() * 8)),
        ("O/S", std::env::consts::OS.to_string()),
        ("Compiler", or_unknown(RUSTC)),
        ("InstPath", exe),
        (
            "DataPath",
            ferrymq_server::ferrymq_home().display().to_string(),
        ),
    ];
    fields
        .iter()
        .map(|(k, v)| format!("{:<11}{v}\n", format!("{k}:")))
        .collect()
}

/// `ferrymq --version`: the version, with the commit and target when known.
pub fn long() -> String {
    let mut s = format!("ferrymq {VERSION}");
    let extra: Vec<String> = [
        (!COMMIT.is_empty()).then(|| format!("commit {COMMIT}")),
        (!TARGET.is_empty()).then(|| TARGET.to_string()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !extra.is_empty() {
        s.push_str(&format!(" ({})", extra.join(", ")));
    }
    s
}
