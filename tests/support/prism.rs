//! The `Prism` harness: runs the real `prism` binary on a config written to a temp dir.
//!
//! ```ignore
//! let fake = FakeProvider::start();
//! let prism = Prism::builder().provider(&fake).limit("max_batch", 5).start();
//! let resp = prism.rpc(br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#);
//! ```
//!
//! - the listen port is picked once (bind 127.0.0.1:0, read, drop; never handed out twice in this process)
//!   because every shard binds the same port with SO_REUSEPORT;
//! - `start` polls until the port accepts connections (deadline 15 s) and fails early, with the log, when
//!   the process exits first;
//! - stdout and stderr go to `prism.log` in the temp dir; the log is printed when a test panics while the
//!   harness is alive;
//! - the process is killed on drop.

use super::http::{self, Conn, Response};
use std::collections::BTreeSet;
use std::fmt::Display;
use std::fs::{self, File};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_prism");

/// The binary `Prism` runs: [`BIN`], or `PRISM_TEST_BIN` when set (a build from before a change, so a
/// scenario test can print its figures for both).
fn binary() -> String {
    std::env::var("PRISM_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// Every port [`free_port`] and [`free_port_pair`] handed out in this process.
static USED_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port that is free now and was never handed out before in this process. Drawn below the
/// kernel's ephemeral range like [`free_port_pair`]: a port taken from the ephemeral range can be grabbed by
/// any outgoing connection between this check and Prism's bind ("Address already in use" at start-up).
pub fn free_port() -> u16 {
    free_ports(1)
}

/// A loopback port P such that P and P+1 are both free now and neither was handed out before in this process
/// (Solana listeners: Prism serves WebSocket on listen port + 1, as validators do).
pub fn free_port_pair() -> u16 {
    free_ports(2)
}

/// A cheap pseudo-random u16 (no extra dependency): the clock's nanoseconds, mixed.
fn fastrand_u16() -> u16 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    (n ^ (n >> 16)).wrapping_mul(2_654_435_761) as u16
}

/// `n` consecutive loopback ports, all free now and none handed out before in this process.
///
/// They are drawn below the kernel's ephemeral range (32768 and up), so no socket bound to port 0 and no
/// outgoing connection can take one between this check and Prism's bind. Each is checked with a plain
/// bind, without SO_REUSEADDR (std's `TcpListener::bind` sets it): a port still held by a closed connection
/// in TIME_WAIT passes std's check but not a SO_REUSEPORT-only listener such as Prism's.
fn free_ports(n: u16) -> u16 {
    fn strictly_free(port: u16) -> bool {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into()).is_ok()
    }
    for attempt in 0u32.. {
        // This process's own slice of the range first (test binaries running side by side rarely meet);
        // the whole 10 000..32 000 once the slice is crowded.
        let port = if attempt < 200 {
            20_000 + (std::process::id() as u16 % 97) * 120 + fastrand_u16() % 120
        } else {
            10_000 + fastrand_u16() % 22_000
        };
        if !(0..n).all(|k| strictly_free(port + k)) {
            continue;
        }
        let mut used = USED_PORTS.lock().unwrap();
        if (0..n).all(|k| !used.contains(&(port + k))) {
            for k in 0..n {
                used.insert(port + k);
            }
            return port;
        }
    }
    unreachable!()
}

/// A fresh directory under cargo's target tmp dir, named after the running test.
pub fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name: String = thread::current()
        .name()
        .unwrap_or("test")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "prism-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A [`temp_dir`] removed on drop (kept when the test panics, for a look).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        Scratch(temp_dir())
    }
    /// Writes `text` to `name` in the dir; returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !thread::panicking() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Limits every test config starts from (small and fast; override with [`PrismBuilder::limit`]).
pub const DEFAULT_LIMITS: &[(&str, &str)] = &[
    ("max_body_bytes", "65536"),
    ("max_header_bytes", "8192"),
    ("max_batch", "10"),
    ("max_depth", "16"),
    ("max_connections", "100"),
    ("request_deadline_ms", "2000"),
    ("idle_timeout_ms", "500"),
    ("client_timeout_ms", "500"),
    ("upstream_connect_timeout_ms", "500"),
    ("drain_timeout_ms", "3000"),
];

/// One `[[networks]]` entry of a generated config.
struct NetworkSpec {
    name: String,
    chain_id: u64,
    /// Extra `key = value` lines of the network table (probe interval, drift ...).
    options: Vec<String>,
    /// (provider name, url, extra `key = value` lines)
    providers: Vec<(String, String, String)>,
}

pub struct PrismBuilder {
    shards: u32,
    /// Extra `key = value` lines of the `[server]` table.
    server: Vec<String>,
    limits: Vec<(String, String)>,
    networks: Vec<NetworkSpec>,
    extra: String,
    env: Vec<(String, String)>,
    args: Vec<String>,
    /// The admin listener's address once chosen (by `start`, or `admin_port`).
    admin: Option<SocketAddr>,
    /// Pick a listen port P with P+1 free too ([`PrismBuilder::listen_pair`]).
    pair: bool,
}

impl PrismBuilder {
    /// Shards 1, [`DEFAULT_LIMITS`], no network yet.
    pub fn new() -> PrismBuilder {
        PrismBuilder {
            shards: 1,
            server: Vec::new(),
            limits: DEFAULT_LIMITS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            networks: Vec::new(),
            extra: String::new(),
            env: Vec::new(),
            args: Vec::new(),
            admin: None,
            pair: false,
        }
    }
    /// Listens on a port P whose neighbour P+1 is free as well (a Solana network's WebSocket listener).
    pub fn listen_pair(mut self) -> Self {
        self.pair = true;
        self
    }
    /// Sets `key = value` (TOML value text) in the `[server]` table.
    pub fn server_option(mut self, key: &str, value: impl Display) -> Self {
        self.server.push(format!("{key} = {value}"));
        self
    }
    pub fn shards(mut self, n: u32) -> Self {
        self.shards = n;
        self
    }
    /// Sets a `[limits]` key (TOML value text: numbers as is, strings quoted by the caller).
    pub fn limit(mut self, key: &str, value: impl Display) -> Self {
        let value = value.to_string();
        match self.limits.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.limits.push((key.to_string(), value)),
        }
        self
    }
    /// Adds a network (providers added next go to it).
    pub fn network(mut self, name: &str, chain_id: u64) -> Self {
        self.networks.push(NetworkSpec {
            name: name.to_string(),
            chain_id,
            options: Vec::new(),
            providers: Vec::new(),
        });
        self
    }
    /// Sets `key = value` (TOML value text) in the last network's table (creating network "testnet",
    /// chain 4663, if none): `probe_interval_ms`, `max_drift_blocks`, `hwm_tolerance_blocks` ...
    pub fn network_option(mut self, key: &str, value: impl Display) -> Self {
        if self.networks.is_empty() {
            self = self.network("testnet", 4663);
        }
        let net = self.networks.last_mut().unwrap();
        net.options.retain(|l| !l.starts_with(&format!("{key} =")));
        net.options.push(format!("{key} = {value}"));
        self
    }
    /// Adds a fake provider with extra lines for its `[[networks.providers]]` table (e.g.
    /// `"weight = 4"`, `"overflow = true"`).
    pub fn provider_with(self, fake: &super::FakeProvider, options: &str) -> Self {
        let url = fake.url();
        self.provider_url_with(&url, options)
    }
    /// Adds a fake provider to the last network (creating network "testnet", chain 4663, if none).
    pub fn provider(self, fake: &super::FakeProvider) -> Self {
        let url = fake.url();
        self.provider_url(&url)
    }
    /// Adds a provider by URL to the last network; it is named `p1`, `p2` ... within its network.
    pub fn provider_url(self, url: &str) -> Self {
        self.provider_url_with(url, "")
    }
    /// [`PrismBuilder::provider_url`] with extra lines for the provider's table.
    pub fn provider_url_with(mut self, url: &str, options: &str) -> Self {
        if self.networks.is_empty() {
            self = self.network("testnet", 4663);
        }
        let net = self.networks.last_mut().unwrap();
        let name = format!("p{}", net.providers.len() + 1);
        net.providers.push((name, url.to_string(), options.to_string()));
        self
    }
    pub fn providers(mut self, fakes: &[&super::FakeProvider]) -> Self {
        for f in fakes {
            self = self.provider(f);
        }
        self
    }
    /// TOML appended after everything else (e.g. `[policy.retry]` tables).
    pub fn extra_toml(mut self, toml: &str) -> Self {
        self.extra.push_str(toml);
        self.extra.push('\n');
        self
    }
    /// An environment variable for the process.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }
    /// A command-line argument placed before `serve` (global flags such as `--log-format json`).
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_string());
        self
    }
    /// `--log-level LEVEL`, with `RUST_LOG` set to the same (it would override the flag otherwise).
    pub fn log_level(self, level: &str) -> Self {
        self.arg("--log-level").arg(level).env("RUST_LOG", level)
    }
    /// Uses this admin port (otherwise `start` picks a free one).
    pub fn admin_port(mut self, port: u16) -> Self {
        self.admin = Some(([127, 0, 0, 1], port).into());
        self
    }

    /// The config text for a given listen address.
    pub fn config_toml(&self, listen: SocketAddr) -> String {
        let admin = self.admin.map_or_else(|| "127.0.0.1:0".to_string(), |a| a.to_string());
        let mut t = format!(
            "[server]\nlisten = \"{listen}\"\nadmin_listen = \"{admin}\"\nshards = {}\npin_cores = false\n{}\n[limits]\n",
            self.shards,
            self.server.iter().map(|l| format!("{l}\n")).collect::<String>()
        );
        for (k, v) in &self.limits {
            t.push_str(&format!("{k} = {v}\n"));
        }
        for net in &self.networks {
            t.push_str(&format!(
                "\n[[networks]]\nname = \"{}\"\nkind = \"evm\"\nchain_id = {}\n",
                net.name, net.chain_id
            ));
            for line in &net.options {
                t.push_str(line);
                t.push('\n');
            }
            for (pname, url, options) in &net.providers {
                t.push_str(&format!(
                    "\n  [[networks.providers]]\n  name = \"{pname}\"\n  url = \"{url}\"\n"
                ));
                for line in options.lines().map(str::trim).filter(|l| !l.is_empty()) {
                    t.push_str(&format!("  {line}\n"));
                }
            }
        }
        if !self.extra.is_empty() {
            t.push('\n');
            t.push_str(&self.extra);
        }
        t
    }

    /// Writes the config, spawns `prism serve`, waits until the listen port (and the admin port) accept
    /// connections.
    pub fn start(mut self) -> Prism {
        let port = if self.pair { free_port_pair() } else { free_port() };
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        if self.admin.is_none() {
            self.admin = Some(([127, 0, 0, 1], free_port()).into());
        }
        let toml = self.config_toml(addr);
        Prism::spawn_full(&toml, addr, self.admin, &self.env, &self.args)
    }
}

impl Default for PrismBuilder {
    fn default() -> Self {
        Self::new()
    }
}

pub struct Prism {
    child: Child,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    pub dir: PathBuf,
    pub config_path: PathBuf,
    log_path: PathBuf,
    exit: Option<ExitStatus>,
}

impl Prism {
    pub fn builder() -> PrismBuilder {
        PrismBuilder::new()
    }

    /// Prism with default limits in front of these providers (network "testnet").
    pub fn start(fakes: &[&super::FakeProvider]) -> Prism {
        PrismBuilder::new().providers(fakes).start()
    }

    /// Spawns `prism serve` on a given config text whose `server.listen` is `addr`.
    pub fn spawn_with_config(toml: &str, addr: SocketAddr, env: &[(String, String)]) -> Prism {
        Prism::spawn_full(toml, addr, None, env, &[])
    }

    /// Spawns `prism [ARGS] serve` on a config whose `server.listen` is `addr` and whose
    /// `server.admin_listen` is `admin` (when given, `start` also waits for it to accept).
    pub fn spawn_full(
        toml: &str,
        addr: SocketAddr,
        admin: Option<SocketAddr>,
        env: &[(String, String)],
        args: &[String],
    ) -> Prism {
        let dir = temp_dir();
        let config_path = dir.join("prism.toml");
        fs::write(&config_path, toml).unwrap();
        let log_path = dir.join("prism.log");
        let log = File::create(&log_path).unwrap();
        let mut cmd = Command::new(binary());
        cmd.args(args);
        cmd.arg("serve").arg("--config").arg(&config_path);
        cmd.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd.env("RUST_BACKTRACE", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", binary()));
        let mut p = Prism {
            child,
            addr,
            admin,
            dir,
            config_path,
            log_path,
            exit: None,
        };
        p.wait_listening(Duration::from_secs(15));
        p
    }

    fn wait_listening(&mut self, within: Duration) {
        let deadline = Instant::now() + within;
        let targets: Vec<SocketAddr> = std::iter::once(self.addr).chain(self.admin).collect();
        for target in targets {
            self.wait_port(target, deadline, within);
        }
    }

    fn wait_port(&mut self, target: SocketAddr, deadline: Instant, within: Duration) {
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                self.exit = Some(st);
                panic!(
                    "prism exited ({st}) before listening on {}; config:\n{}\nlog:\n{}",
                    self.addr,
                    self.config(),
                    self.log()
                );
            }
            if TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "prism did not listen on {target} within {within:?}; log:\n{}",
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    pub fn config(&self) -> String {
        fs::read_to_string(&self.config_path).unwrap_or_default()
    }
    /// Where the config file is (a reload re-reads it).
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }
    /// Everything the process wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// A new client connection.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.addr)
    }
    /// POSTs `body` to `/` on a new connection and reads the response.
    pub fn rpc(&self, body: &[u8]) -> Response {
        self.rpc_at("/", body)
    }
    /// POSTs `body` to `path` on a new connection and reads the response.
    pub fn rpc_at(&self, path: &str, body: &[u8]) -> Response {
        self.conn().request(&http::post(path, body))
    }

    /// POSTs `body` to `path` with extra header lines (`"x-api-key: k"` ...) on a new connection.
    pub fn rpc_with(&self, path: &str, body: &[u8], headers: &[&str]) -> Response {
        self.conn().request(&http::post_with(path, body, headers))
    }

    /// The admin listener's address (set by [`PrismBuilder::start`]).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .expect("this Prism was started without a known admin address")
    }
    /// `GET path` on the admin listener (new connection, `Connection: close`).
    pub fn admin_get(&self, path: &str) -> Response {
        let mut c = Conn::connect(self.admin_addr());
        c.request(&http::bodyless("GET", path, &["Connection: close"]))
    }
    /// The value of one `/metrics` line; `name` may carry labels (`prism_ws_upstream_subscriptions{type="logs"}`).
    /// Panics when the line is absent.
    pub fn metric(&self, name: &str) -> f64 {
        let r = self.admin_get("/metrics");
        assert_eq!(r.status, 200, "/metrics: {}", r.describe());
        let text = r.text();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }
    /// `/status` as JSON.
    pub fn status(&self) -> serde_json::Value {
        let r = self.admin_get("/status");
        assert_eq!(r.status, 200, "/status: {}", r.describe());
        r.json()
    }
    /// The `/status` row of provider `name` (in the first network that has it).
    pub fn provider_status(&self, name: &str) -> serde_json::Value {
        let s = self.status();
        find_provider(&s, name).unwrap_or_else(|| panic!("no provider {name:?} in /status: {s}"))
    }
    /// The `state` of provider `name` in `/status`.
    pub fn provider_state(&self, name: &str) -> String {
        self.provider_status(name)["state"].as_str().unwrap_or("").to_string()
    }
    /// Polls `/status` every 10 ms until `pred` holds for provider `name`'s row, or `within` passes;
    /// returns the last row seen. Panics (with the row and the log tail) when it never held.
    pub fn wait_provider(
        &self,
        name: &str,
        within: Duration,
        what: &str,
        mut pred: impl FnMut(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let row = self.provider_status(name);
            if pred(&row) {
                return row;
            }
            if Instant::now() >= deadline {
                panic!("provider {name}: {what} did not happen within {within:?}; last /status row: {row}");
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
    /// Waits until provider `name` shows `state` in `/status`.
    pub fn wait_state(&self, name: &str, state: &str, within: Duration) -> serde_json::Value {
        self.wait_provider(name, within, &format!("state {state:?}"), |r| r["state"] == state)
    }

    /// Sends a signal (libc::SIGTERM, SIGINT ...).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) takes plain integers and touches no memory of this process.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0, "kill({}, {sig}) failed", self.child.id());
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.try_exit().is_none()
    }

    fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().unwrap();
        }
        self.exit
    }

    /// Waits up to `within` for the process to exit.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = self.try_exit() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Prism {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if thread::panicking() {
            let log = self.log();
            let tail = if log.len() > 12000 {
                &log[log.len() - 12000..]
            } else {
                &log[..]
            };
            eprintln!(
                "---- prism log ({}) ----\n{tail}\n---- end of prism log ----",
                self.log_path.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Output of a finished `prism` CLI run.
#[derive(Debug)]
pub struct CliOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    pub fn success(&self) -> bool {
        self.status.success()
    }
    /// stdout and stderr together.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `prism ARGS` to completion (killed after `within`, which fails the test), with extra env.
pub fn run_cli(args: &[&str], env: &[(&str, &str)], within: Duration) -> CliOutput {
    let dir = temp_dir();
    let out = dir.join("stdout");
    let err = dir.join("stderr");
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {BIN}: {e}"));
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`prism {}` did not finish within {within:?}; stdout {:?} stderr {:?}",
                args.join(" "),
                fs::read_to_string(&out).unwrap_or_default(),
                fs::read_to_string(&err).unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    let o = CliOutput {
        status,
        stdout: fs::read_to_string(&out).unwrap_or_default(),
        stderr: fs::read_to_string(&err).unwrap_or_default(),
    };
    let _ = fs::remove_dir_all(&dir);
    o
}

/// The row of provider `name` in a `/status` document (first network that has it).
pub fn find_provider(status: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    status["networks"]
        .as_array()?
        .iter()
        .flat_map(|n| n["providers"].as_array().into_iter().flatten())
        .find(|p| p["name"] == name)
        .cloned()
}
