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
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
    }
    if let (Some(common), Some(head)) = (
        git(&["rev-parse", "--git-common-dir"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"]),
    ) {
        if head.starts_with("refs/") {
            println!("cargo:rerun-if-changed={common}/{head}");
        }
        println!("cargo:rerun-if-changed={common}/packed-refs");
    }
}
