//! `RealEr`: MagicBlock's own ephemeral rollup validator (npm `@magicblock-labs/ephemeral-validator-linux-x64`
//! 0.14.10, `--lifecycle ephemeral`) on loopback, with a base-layer [`SolanaFake`] as its remote: it clones
//! delegated accounts from it (records included), subscribes to the delegation program and the Clock sysvar,
//! and serves JSON-RPC on P and PubSub on P + 1 like any ER.
//!
//! It needs glibc 2.39 (Debian 12 has 2.36): `scripts/deps/solana.sh` unpacks Debian 13's libc6, libstdc++6
//! and libgcc-s1 into `tests/solana/magicblock/er-runtime/lib`, and the validator runs through that loader
//! with `nofile.so` preloaded (it insists on raising the open-file limit to 1 000 000; the shim clamps the raise
//! to the hard limit). Its ledger lives in a temp dir, wiped at start (`--reset`) and removed on drop. Killed on
//! drop; its log is printed (and kept) when a test panics.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::solana_fake::{Account, SolanaFake};

pub const CLOCK: &str = "SysvarC1ock11111111111111111111111111111111";
pub const SYSVAR_OWNER: &str = "Sysvar1111111111111111111111111111111111111";

pub struct RealEr {
    child: Child,
    port: u16,
    pub identity: String,
    /// Its logs and ledger (about 300 MB of RocksDB files: removed on drop; the logs stay after a panic).
    work: PathBuf,
    log: PathBuf,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Clock sysvar's 40 bytes at `slot`.
pub fn clock_data(slot: u64) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut d = Vec::with_capacity(40);
    d.extend_from_slice(&slot.to_le_bytes());
    d.extend_from_slice(&(now - 3600).to_le_bytes()); // epoch start
    d.extend_from_slice(&(slot / 432_000).to_le_bytes());
    d.extend_from_slice(&(slot / 432_000 + 1).to_le_bytes());
    d.extend_from_slice(&now.to_le_bytes());
    d
}

impl RealEr {
    /// Puts on `base` what the validator reads at start (the Clock sysvar, its identity's balance) and starts
    /// it with the identity whose 64-byte secret key is `secret`; returns once it answers JSON-RPC.
    pub fn start(base: &SolanaFake, secret: &[u8]) -> RealEr {
        let dir = root().join("tests/solana/magicblock");
        let bin = dir.join("node_modules/@magicblock-labs/ephemeral-validator-linux-x64/bin/ephemeral-validator");
        let rt = dir.join("er-runtime");
        let loader = rt.join("lib/ld-linux-x86-64.so.2");
        assert!(
            bin.exists() && loader.exists() && rt.join("nofile.so").exists(),
            "MagicBlock's ER validator or its runtime is not installed: run scripts/deps/solana.sh"
        );
        let identity = bs58::encode(&secret[32..64]).into_string();
        base.set_account(CLOCK, Account::new(1_169_280, SYSVAR_OWNER, &clock_data(base.slot())));
        base.set_lamports(&identity, 1_000_000_000_000);
        let work = super::prism::temp_dir();
        let log = work.join("er.log");
        let port = super::prism::free_port_pair();
        let child = Command::new(&loader)
            .arg("--library-path")
            .arg(rt.join("lib"))
            .arg("--preload")
            .arg(rt.join("nofile.so"))
            .arg(&bin)
            .args(["--lifecycle", "ephemeral", "--no-tui", "--reset"])
            .arg("--storage")
            .arg(work.join("ledger"))
            .args(["-k", &bs58::encode(secret).into_string()])
            .args(["-l", &format!("127.0.0.1:{port}")])
            .args(["--remotes", &base.url(), "--remotes", &base.ws_url()])
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(work.join("er.err")).unwrap())
            .spawn()
            .expect("start the ER validator");
        let mut er = RealEr {
            child,
            port,
            identity,
            work,
            log,
        };
        er.wait_ready(Duration::from_secs(60));
        er
    }

    fn wait_ready(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the ER validator exited ({status}):\n{}", self.logs());
            }
            let body = br#"{"jsonrpc":"2.0","id":1,"method":"getIdentity"}"#;
            let answered = super::http::Conn::try_connect(self.addr())
                .ok()
                .and_then(|mut c| {
                    c.send(&super::http::post("/", body)).ok()?;
                    c.read_response_within(Duration::from_secs(2)).ok()
                })
                .is_some_and(|r| r.status == 200);
            if answered && std::net::TcpStream::connect(self.ws_addr()).is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the ER validator did not answer within {within:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }
    pub fn ws_addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port + 1))
    }
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port + 1)
    }

    /// One JSON-RPC call straight to the validator; the whole response.
    pub fn call(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let r = super::http::Conn::connect(self.addr()).request(&super::http::post("/", body.as_bytes()));
        serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{method}: not JSON ({e}): {}", r.describe()))
    }

    pub fn logs(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!("{}\n{}", read(&self.log), read(&self.log.with_file_name("er.err")))
    }
}

impl Drop for RealEr {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(self.work.join("ledger"));
        if std::thread::panicking() {
            eprintln!("---- ER validator log ({}) ----\n{}", self.work.display(), self.logs());
        } else {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}
