//! Records what `ferrymq dspmqver` and `ferrymq --version` report about the build: the git
//! commit (when built from a git checkout), the target triple and the compiler's version.

use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    let commit = std::env::var("FERRYMQ_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| run("git", &["rev-parse", "--short=12", "HEAD"]));
    println!(
        "cargo:rustc-env=FERRYMQ_GIT_COMMIT={}",
        commit.unwrap_or_default()
    );
    // A new commit or checkout changes the HEAD log of this work tree.
    for what in ["HEAD", "logs/HEAD"] {
        if let Some(p) = run("git", &["rev-parse", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-env-changed=FERRYMQ_GIT_COMMIT");
    println!(
        "cargo:rustc-env=FERRYMQ_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    println!(
        "cargo:rustc-env=FERRYMQ_RUSTC={}",
        run(&rustc, &["--version"]).unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=FERRYMQ_PROFILE={}",
        std::env::var("PROFILE").unwrap_or_default()
    );
}
