//! Prism under test: its config (one shard, the fake node as its one provider, limits raised for the
//! connection and subscription counts), the process (a copy of the binary under a neutral name, as the
//! other perf scripts run it, pinned to one core, killed with the tool), and what /proc says about it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Prism {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

pub struct Setup<'a> {
    pub bin: &'a Path,
    pub dir: &'a Path,
    pub node_port: u16,
    pub connections: usize,
    pub subscriptions: usize,
    /// Extra `[limits]` lines (`key = value`), after the tool's own.
    pub limits: &'a [String],
    /// The core to pin Prism to (None: not pinned).
    pub cpu: Option<usize>,
}

pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Prism {
    pub fn start(s: &Setup) -> Result<Prism, String> {
        let port = free_port().map_err(|e| e.to_string())?;
        let admin = free_port().map_err(|e| e.to_string())?;
        let mut limits = format!(
            "max_connections = {}\nmax_subscriptions_per_shard = {}\nidle_timeout_ms = 600000\n",
            s.connections, s.subscriptions
        );
        for l in s.limits {
            let key = l.split('=').next().unwrap_or("").trim();
            // A line the caller gives replaces the tool's own for that key.
            limits = limits
                .lines()
                .filter(|x| x.split('=').next().unwrap_or("").trim() != key)
                .map(|x| format!("{x}\n"))
                .collect();
            limits.push_str(l);
            limits.push('\n');
        }
        let config = format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\nshards = 1\npin_cores = false\n\n\
             [limits]\n{limits}\n\
             [[networks]]\nname = \"main\"\nkind = \"evm\"\nchain_id = {chain}\n\n\
             [[networks.providers]]\nname = \"node\"\nurl = \"http://127.0.0.1:{node}\"\nws_url = \"ws://127.0.0.1:{node}/\"\n",
            node = s.node_port,
            chain = crate::node::CHAIN_ID,
        );
        let cfg = s.dir.join("config.toml");
        std::fs::write(&cfg, config).map_err(|e| format!("{}: {e}", cfg.display()))?;
        // A neutral name: a `pkill -f prism` elsewhere on the machine cannot stop it mid-run.
        let exe = s.dir.join("rpc-proxy");
        std::fs::copy(s.bin, &exe).map_err(|e| format!("copy {}: {e}", s.bin.display()))?;
        let log = s.dir.join("prism.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&exe);
        cmd.arg("serve")
            .arg("--config")
            .arg(&cfg)
            .stdout(out)
            .stderr(err)
            .stdin(Stdio::null());
        let cpu = s.cpu;
        unsafe {
            cmd.pre_exec(move || {
                // Prism dies with the tool, whatever ends the tool.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(cpu) = cpu {
                    crate::pin(0, cpu);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("start {}: {e}", exe.display()))?;
        let mut p = Prism { child, port, log };
        p.wait_ready()?;
        Ok(p)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Until Prism answers `eth_blockNumber` through the fake node.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "Prism exited at start-up ({status}); log:\n{}",
                    self.log_tail()
                ));
            }
            match call(
                self.port,
                r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#,
            ) {
                Ok(body) if body.contains("\"result\"") => return Ok(()),
                Ok(body) => last = body,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "Prism not ready in 30 s (last: {last}); log:\n{}",
            self.log_tail()
        ))
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn stats(&self) -> Stats {
        Stats::of(self.pid())
    }
}

impl Drop for Prism {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            unsafe { libc::kill(self.pid(), libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One HTTP JSON-RPC call (a fresh connection).
pub fn call(port: u16, body: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let req = format!(
        "POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// A process's CPU and memory as /proc shows them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// utime + stime, in clock ticks.
    pub ticks: u64,
    /// On-CPU time of its live threads (schedstat), ns.
    pub sched_ns: u64,
    pub rss_kib: u64,
}

pub fn ticks_per_s() -> u64 {
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

impl Stats {
    pub fn of(pid: i32) -> Stats {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<u64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
        let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss_kib = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Stats {
            ticks,
            sched_ns: sched_ns(&format!("/proc/{pid}/task")),
            rss_kib,
        }
    }
}

/// Sum of the on-CPU ns of the threads under `/proc/PID/task` (or a list of them).
pub fn sched_ns(task_dir: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir(task_dir) else { return 0 };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

/// On-CPU ns of one thread of this process.
pub fn thread_ns(tid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Busy and total jiffies of one core, from /proc/stat.
pub fn core_jiffies(cpu: usize) -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let name = format!("cpu{cpu} ");
    let Some(line) = stat.lines().find(|l| l.starts_with(&name)) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}
