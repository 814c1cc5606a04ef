//! `deploy/seccomp-io_uring.json` is what its comment says: the container runtime's default allowlist plus
//! the `io_uring_*` calls. No container engine runs here, so the profile is loaded the way runc does it,
//! with libseccomp (`tests/seccomp/launch.py`, through ctypes), and Prism is run under it: it starts, checks
//! its providers and serves calls. Without the `io_uring_*` calls (the runtime default alone) it does not
//! start, which shows the filter is in force.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::prism::{free_port, Scratch, BIN};
use crate::support::{call, expect_http_result, FakeProvider};

fn launch(dir: &Scratch, config: &str, without: Option<&str>) -> (std::process::Child, std::path::PathBuf) {
    let root = env!("CARGO_MANIFEST_DIR");
    let path = dir.file("prism.toml", config);
    let log = dir.0.join("prism.log");
    let mut cmd = Command::new("python3");
    cmd.arg(format!("{root}/tests/seccomp/launch.py"))
        .arg(format!("{root}/deploy/seccomp-io_uring.json"));
    if let Some(names) = without {
        cmd.args(["--without", names]);
    }
    cmd.args(["--", BIN, "serve", "--config", path.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.0.join("stderr.log")).unwrap());
    (cmd.spawn().expect("python3 runs the launcher"), dir.0.clone())
}

fn config(listen: SocketAddr, fake: &FakeProvider) -> String {
    format!(
        "[server]\nlisten = \"{listen}\"\nshards = 2\npin_cores = false\n\n[[networks]]\nname = \"testnet\"\nkind = \"evm\"\nchain_id = 4663\n  [[networks.providers]]\n  name = \"p1\"\n  url = \"{}\"\n",
        fake.url()
    )
}

#[test]
fn prism_starts_and_serves_under_the_container_seccomp_profile() {
    let fake = FakeProvider::start();
    let listen: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let dir = Scratch::new();
    let (mut child, logs) = launch(&dir, &config(listen, &fake), None);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut answered = false;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "prism exited ({status}) under the profile:\n{}\n{}",
                std::fs::read_to_string(logs.join("stderr.log")).unwrap_or_default(),
                std::fs::read_to_string(logs.join("prism.log")).unwrap_or_default()
            );
        }
        if let Ok(mut c) = crate::support::Conn::try_connect(listen) {
            for i in 0..20 {
                let body = call(&i.to_string(), "eth_getBalance", crate::support::BALANCE_PARAMS);
                let r = c.request(&crate::support::http::post("/", body.as_bytes()));
                expect_http_result(&r, &i.to_string());
            }
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let launcher = std::fs::read_to_string(logs.join("stderr.log")).unwrap_or_default();
    assert!(answered, "no answer under the profile:\n{launcher}");
    assert!(launcher.contains("rules loaded"), "{launcher}");
    assert!(fake.client_calls().len() >= 20);
}

#[test]
fn without_the_io_uring_calls_the_runtime_default_alone_stops_prism() {
    let fake = FakeProvider::start();
    let listen: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let dir = Scratch::new();
    let (mut child, logs) = launch(
        &dir,
        &config(listen, &fake),
        Some("io_uring_setup,io_uring_enter,io_uring_register"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "prism kept running without io_uring");
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = std::fs::read_to_string(logs.join("prism.log")).unwrap_or_default();
    let stderr = std::fs::read_to_string(logs.join("stderr.log")).unwrap_or_default();
    assert!(!status.success(), "{log}{stderr}");
    assert!(
        format!("{log}{stderr}").to_lowercase().contains("io_uring"),
        "the refusal should name io_uring:\n{log}\n{stderr}"
    );
}
