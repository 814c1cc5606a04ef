//! External tools some tests drive: a headless Chromium (the status page) and Python's
//! `prometheus_client` (a real Prometheus text parser). A missing tool fails the test with a message that
//! says what to install; it never turns the test into a silent pass.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A command's exit, stdout and stderr.
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with `stdin` fed, killed after `within` (which panics, naming the command).
pub fn run_with_timeout(mut cmd: Command, stdin: &[u8], within: Duration) -> Ran {
    let what = format!("{cmd:?}");
    let dir = super::prism::temp_dir();
    let out_path = dir.join("stdout");
    let err_path = dir.join("stderr");
    cmd.stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin);
    }
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not finish within {within:?}; stderr: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ran = Ran {
        ok: status.success(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    ran
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The Chromium binary: `$PRISM_CHROMIUM`, else `chromium`, `chromium-browser`, `google-chrome` on PATH.
/// Panics with installation advice when there is none.
pub fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("PRISM_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        if let Some(p) = on_path(name) {
            return p;
        }
    }
    panic!(
        "this test needs a headless Chromium and none was found (looked for $PRISM_CHROMIUM, chromium, \
         chromium-browser, google-chrome on PATH). On Debian: apt-get install -y chromium \
         (scripts/test.sh installs it)."
    );
}

/// Loads `url` in headless Chromium and returns the DOM after scripts ran (`--dump-dom`), giving the page
/// `budget_ms` of virtual time.
pub fn chromium_dump_dom(url: &str, budget_ms: u64) -> String {
    let bin = chromium();
    let profile = super::prism::temp_dir();
    let mut cmd = Command::new(&bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--mute-audio",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--virtual-time-budget={budget_ms}"))
    .arg("--dump-dom")
    .arg(url);
    let ran = run_with_timeout(cmd, b"", Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        ran.ok && ran.stdout.contains("<html"),
        "{} --dump-dom {url} failed; stdout: {:?}\nstderr: {}",
        bin.display(),
        ran.stdout,
        ran.stderr
    );
    ran.stdout
}

/// A `python3` that can `import prometheus_client`: installs it with pip when missing; panics with advice
/// when that is impossible.
pub fn python_with_prometheus_client() -> PathBuf {
    let py = on_path("python3").unwrap_or_else(|| {
        panic!("this test needs python3 with prometheus_client (Debian: apt-get install -y python3 python3-prometheus-client)")
    });
    let has = |py: &PathBuf| {
        Command::new(py)
            .args(["-c", "import prometheus_client.parser"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if has(&py) {
        return py;
    }
    let mut cmd = Command::new(&py);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "prometheus_client",
    ]);
    let ran = run_with_timeout(cmd, b"", Duration::from_secs(120));
    if !has(&py) {
        panic!(
            "this test needs the Python package prometheus_client (a real Prometheus text parser); \
             `python3 -m pip install prometheus_client` failed: {}{}\n\
             Debian: apt-get install -y python3-prometheus-client",
            ran.stdout, ran.stderr
        );
    }
    py
}
