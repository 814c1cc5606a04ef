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

/// A headless Chromium command with a fresh profile (removed by the caller), `budget_ms` of virtual time
/// for the page's scripts, and the window `size` (width, height) when given.
fn headless(profile: &std::path::Path, budget_ms: u64, size: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(chromium());
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
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--virtual-time-budget={budget_ms}"));
    if let Some((w, h)) = size {
        cmd.arg(format!("--window-size={w},{h}"));
    }
    cmd
}

/// Loads `url` in headless Chromium and returns the DOM after scripts ran (`--dump-dom`), giving the page
/// `budget_ms` of virtual time.
pub fn chromium_dump_dom(url: &str, budget_ms: u64) -> String {
    chromium_dump_dom_sized(url, budget_ms, None)
}

/// Headless Chromium's window is never narrower than this, whatever `--window-size` says.
const MIN_WINDOW_WIDTH: u32 = 500;

/// A page served over HTTP from this process until dropped (Chromium lets an http page read a frame of
/// another origin under `--disable-web-security`; a file:// page it never lets).
struct Served {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Served {
    fn start(html: String) -> Served {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let Ok(mut conn) = conn else { continue };
                let mut buf = [0u8; 4096];
                let _ = std::io::Read::read(&mut conn, &mut buf);
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                    html.len()
                );
            }
        });
        Served { addr, stop }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

/// For a viewport narrower than Chromium allows (a phone's 390 px): a page that shows `url` in an
/// `<iframe>` of exactly `size` (its media queries see that width) and copies the frame's DOM into its
/// own, escaped, once the frame's script ran. Returns the server, the page's URL and the window size.
fn framed(url: &str, (w, h): (u32, u32)) -> (Served, String, (u32, u32)) {
    let html = format!(
        "<!doctype html><html><body style=\"margin:0;background:#999\">\
         <iframe id=\"f\" src=\"{url}\" width=\"{w}\" height=\"{h}\" style=\"border:0;display:block;background:#fff\"></iframe>\
         <pre id=\"o\" style=\"display:none\"></pre><script>\
         setInterval(() => {{ try {{ const d = document.getElementById('f').contentDocument;\
         if (d && d.documentElement) document.getElementById('o').textContent = d.documentElement.outerHTML;\
         }} catch (e) {{ document.getElementById('o').textContent = 'no access: ' + e; }} }}, 250);\
         </script></body></html>"
    );
    let served = Served::start(html);
    let page = format!("http://{}/", served.addr);
    (served, page, (w.max(MIN_WINDOW_WIDTH), h))
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// [`chromium_dump_dom`] in a viewport of `size` (width, height), for layouts that depend on it. Below
/// Chromium's smallest window the page is loaded in an iframe of that size and the frame's DOM returned.
pub fn chromium_dump_dom_sized(url: &str, budget_ms: u64, size: Option<(u32, u32)>) -> String {
    let profile = super::prism::temp_dir();
    let narrow = size.filter(|s| s.0 < MIN_WINDOW_WIDTH);
    let (_served, load, window) = match narrow {
        Some(s) => {
            let (served, u, w) = framed(url, s);
            (Some(served), u, Some(w))
        }
        None => (None, url.to_string(), size),
    };
    let mut cmd = headless(&profile, budget_ms, window);
    if narrow.is_some() {
        // The wrapper reads the frame's DOM across origins.
        cmd.arg("--disable-web-security");
    }
    cmd.arg("--dump-dom").arg(&load);
    let ran = run_with_timeout(cmd, b"", Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        ran.ok && ran.stdout.contains("<html"),
        "{} --dump-dom {url} failed; stdout: {:?}\nstderr: {}",
        chromium().display(),
        ran.stdout,
        ran.stderr
    );
    if narrow.is_none() {
        return ran.stdout;
    }
    let inner = ran
        .stdout
        .split_once("<pre id=\"o\" style=\"display:none\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(inner, _)| unescape(inner))
        .unwrap_or_default();
    assert!(
        inner.starts_with("<html"),
        "the framed page's DOM was not read: {}",
        ran.stdout
    );
    inner
}

/// Loads `url` in a `width` x `height` viewport and writes a PNG screenshot to `path` after `budget_ms` of
/// virtual time. Below Chromium's smallest window (500 px) the viewport is an iframe of that size at the
/// left of a 500 px wide window, and the PNG is the window. Panics unless a PNG of the window's size was
/// written.
pub fn chromium_screenshot(url: &str, path: &std::path::Path, size: (u32, u32), budget_ms: u64) {
    let profile = super::prism::temp_dir();
    let _ = std::fs::remove_file(path);
    let (_served, load, (width, height)) = if size.0 < MIN_WINDOW_WIDTH {
        let (served, u, w) = framed(url, size);
        (Some(served), u, w)
    } else {
        (None, url.to_string(), size)
    };
    let mut cmd = headless(&profile, budget_ms, Some((width, height)));
    cmd.arg(format!("--screenshot={}", path.display())).arg(&load);
    let ran = run_with_timeout(cmd, b"", Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&profile);
    let png = std::fs::read(path).unwrap_or_default();
    assert!(
        ran.ok && png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 24,
        "{} --screenshot {url} wrote no PNG to {}; stderr: {}",
        chromium().display(),
        path.display(),
        ran.stderr
    );
    let dim = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    assert_eq!(
        (dim(16), dim(20)),
        (width, height),
        "screenshot {} has the wrong size",
        path.display()
    );
}

/// `target/test-artifacts/` (under `$CARGO_TARGET_DIR` when set), created: where tests keep files a person
/// may want to look at after the run (screenshots).
pub fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
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
