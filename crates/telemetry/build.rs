//! Names the commit the binary is built from (`prism --version`, `prism_build_info`, `/status`): `PRISM_COMMIT`
//! from the environment when set (a container build without `.git`), else `git rev-parse`, else "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PRISM_COMMIT");
    let commit = std::env::var("PRISM_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=PRISM_COMMIT={commit}");
    // Rebuilt when HEAD moves: HEAD itself (a branch switch) and the branch's ref (a commit).
    // Only files that exist: cargo takes a missing one as changed, and would rerun this script (and rebuild
    // every crate above telemetry) on every build.
    let watch = |path: String| {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    };
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch(format!("{dir}/HEAD"));
    }
    if let (Some(common), Some(head)) = (
        git(&["rev-parse", "--git-common-dir"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
    ) {
        if head.starts_with("refs/") {
            watch(format!("{common}/{head}"));
        }
        watch(format!("{common}/packed-refs"));
    }
}
