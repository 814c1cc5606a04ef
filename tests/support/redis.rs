//! A real `redis-server` child process on a loopback port, for cluster tests.
//!
//! Include it from a test file next to `mod support;` with
//! `#[path = "support/redis.rs"] mod redis_server;` (it uses `crate::support::prism` for ports and temp
//! dirs). No persistence (`--save "" --appendonly no`); killed on drop. Fails loudly, naming the Debian
//! package, when `redis-server` is not installed.
//!
//! [`RedisOptions`] adds what managed and self-run deployments use: a TLS port (next to the plain one, which
//! only the test's own commands use), ACL users, replication; [`Sentinel`] is `redis-server --sentinel`
//! (the same binary, so no second package is needed) monitoring one master.
#![allow(dead_code)]

use std::fs::{self, File};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::prism::{free_port, temp_dir};

/// How to run a [`RedisServer`] beyond the plain default.
#[derive(Default, Clone)]
pub struct RedisOptions {
    /// `--tls-port` with (certificate, key, CA) PEM files.
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// With `tls`: require a client certificate signed by the CA (`--tls-auth-clients yes`).
    pub tls_client_certs: bool,
    /// (user, password) the test's own commands authenticate with (when the default user is off).
    pub auth: Option<(String, String)>,
    /// More `redis-server` arguments, e.g. `--user NAME on >PASS ~* &* +@all`, `--replicaof HOST PORT`.
    pub args: Vec<String>,
}

pub struct RedisServer {
    port: u16,
    tls_port: u16,
    opts: RedisOptions,
    child: Option<Child>,
    dir: PathBuf,
    starts: usize,
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        Self::start_with(RedisOptions::default())
    }

    pub fn start_with(opts: RedisOptions) -> RedisServer {
        let mut r = RedisServer {
            port: free_port(),
            tls_port: if opts.tls.is_some() { free_port() } else { 0 },
            opts,
            child: None,
            dir: temp_dir(),
            starts: 0,
        };
        r.spawn();
        r
    }

    /// The TLS port (0 without [`RedisOptions::tls`]).
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// `rediss://127.0.0.1:TLS_PORT`.
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(format!("redis-{}.log", self.starts))
    }

    /// Everything the current (or last) process wrote.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "redis-server already running");
        self.starts += 1;
        let log = File::create(self.log_path()).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--protected-mode", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(self.tls_args())
            .args(&self.opts.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::NotFound => panic!(
                "redis-server is not installed (or not on PATH): the cluster tests need a real Redis; \
                 install the Debian package `redis-server` (apt-get install -y redis-server)"
            ),
            Err(e) => panic!("spawning redis-server: {e}"),
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!(
                    "redis-server exited ({st}) before answering on port {}; log:\n{}",
                    self.port,
                    self.log()
                );
            }
            if self.command(&["PING"]).is_ok_and(|r| r == "+PONG") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING on port {} within 10 s; log:\n{}",
                self.port,
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn tls_args(&self) -> Vec<String> {
        let Some((cert, key, ca)) = &self.opts.tls else {
            return Vec::new();
        };
        let path = |p: &PathBuf| p.display().to_string();
        [
            "--tls-port".to_string(),
            self.tls_port.to_string(),
            "--tls-cert-file".into(),
            path(cert),
            "--tls-key-file".into(),
            path(key),
            "--tls-ca-cert-file".into(),
            path(ca),
            "--tls-auth-clients".into(),
            if self.opts.tls_client_certs { "yes" } else { "no" }.into(),
        ]
        .into()
    }

    /// SIGKILLs the server (no goodbye to its clients) and waits until its port refuses connections.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&self.addr(), Duration::from_millis(100)).is_ok() {
            assert!(Instant::now() < deadline, "port {} still accepts after kill", self.port);
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts a fresh (empty) server on the same port after [`RedisServer::kill`].
    pub fn restart(&mut self) {
        self.spawn();
    }

    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    /// Sends one command (RESP array of bulk strings) on a new connection; returns the first reply line
    /// (`+PONG`, `:1`, `$-1` ...), or the I/O error.
    pub fn command(&self, args: &[&str]) -> std::io::Result<String> {
        let auth = self.opts.auth.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
        command_at(self.addr(), auth, args)
    }
}

/// One command on a new plain connection to `addr` (after `AUTH user pass` when given): the first line of
/// its reply.
pub fn command_at(addr: SocketAddr, auth: Option<(&str, &str)>, args: &[&str]) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    let encode = |args: &[&str]| {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        req
    };
    let mut req = String::new();
    if let Some((user, pass)) = auth {
        req.push_str(&encode(&["AUTH", user, pass]));
    }
    req.push_str(&encode(args));
    s.write_all(req.as_bytes())?;
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    if auth.is_some() {
        reader.read_line(&mut line)?;
        line.clear();
    }
    reader.read_line(&mut line)?;
    Ok(line.trim_end().to_string())
}

/// `redis-server --sentinel` on a free loopback port, monitoring `master` as `name` with a quorum of 1
/// and short timeouts (down after 1 s, failover timeout 5 s). Killed on drop.
pub struct Sentinel {
    port: u16,
    child: Option<Child>,
    dir: PathBuf,
}

impl Sentinel {
    pub fn start(name: &str, master: u16) -> Sentinel {
        let port = free_port();
        let dir = temp_dir();
        let conf = dir.join("sentinel.conf");
        fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {}\n\
                 sentinel monitor {name} 127.0.0.1 {master} 1\n\
                 sentinel down-after-milliseconds {name} 1000\n\
                 sentinel failover-timeout {name} 5000\n\
                 sentinel parallel-syncs {name} 1\n",
                dir.display()
            ),
        )
        .unwrap();
        let log = File::create(dir.join("sentinel.log")).unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning redis-server --sentinel (Debian package redis-server)");
        let mut s = Sentinel {
            port,
            child: Some(child),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !s.command(&["PING"]).is_ok_and(|r| r == "+PONG") {
            if let Some(st) = s.child.as_mut().unwrap().try_wait().unwrap() {
                s.child = None;
                panic!("sentinel exited ({st}); log:\n{}", s.log());
            }
            assert!(
                Instant::now() < deadline,
                "sentinel did not answer PING within 10 s:\n{}",
                s.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
        s
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }

    pub fn command(&self, args: &[&str]) -> std::io::Result<String> {
        command_at(self.addr(), None, args)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if thread::panicking() {
            eprintln!(
                "---- sentinel log (port {}) ----\n{}\n---- end ----",
                self.port,
                self.log()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if thread::panicking() {
            eprintln!(
                "---- redis-server log (port {}) ----\n{}\n---- end ----",
                self.port,
                self.log()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
