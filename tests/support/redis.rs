//! A real `redis-server` child process on a loopback port, for cluster tests.
//!
//! Include it from a test file next to `mod support;` with
//! `#[path = "support/redis.rs"] mod redis_server;` (it uses `crate::support::prism` for ports and temp
//! dirs). No persistence (`--save "" --appendonly no`); killed on drop. Fails loudly, naming the Debian
//! package, when `redis-server` is not installed.
#![allow(dead_code)]

use std::fs::{self, File};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::prism::{free_port, temp_dir};

pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    dir: PathBuf,
    starts: usize,
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        let mut r = RedisServer {
            port: free_port(),
            child: None,
            dir: temp_dir(),
            starts: 0,
        };
        r.spawn();
        r
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
        let mut s = TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200))?;
        s.set_read_timeout(Some(Duration::from_millis(500)))?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes())?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line)?;
        Ok(line.trim_end().to_string())
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
