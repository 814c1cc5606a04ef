//! WebSocket fan-out through Prism, measured in one process on loopback (issue 40): a fake EVM node mines
//! a block every INTERVAL and sends `newHeads` and a log per block to Prism's upstream subscriptions;
//! N clients subscribed through Prism (one shard) receive them. Prints Prism's memory per idle subscriber,
//! its CPU per delivered notification, the latency from the node's write to each client and to the last
//! client of each block, whether every client got every block exactly once, the tool's own CPU (so a
//! reader sees the client was not the bound), and with `--slow K` what K clients that never read do to
//! the others and when Prism drops them. See perf/README.md and `fanout --help`.

mod client;
mod json;
mod node;
mod prism;
mod report;
mod ws;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use client::{Plan, Shared};

const USAGE: &str = "\
usage: fanout PRISM_BIN [options]
  --heads N          newHeads subscribers (10000)
  --logs N           logs subscribers, one filter shared by all (1000)
  --slow K           extra newHeads subscribers that never read after subscribing (0)
  --slow-rcvbuf B    SO_RCVBUF of the slow clients' sockets, 0 = the system's default (0)
  --slow-wait-s S    after the window, how long to wait for Prism to drop the slow clients (30)
  --interval-ms MS   a block every MS (200)
  --warmup-s S       after every client subscribed and the idle memory reading (3)
  --window-s S       the measuring window (20)
  --threads T        client threads (1)
  --max-pending P    connections connecting or subscribing at once (256)
  --prism-cpu C      pin Prism to core C (1); --tool-cpu C pins the tool (0); --no-pin: neither
  --limit 'K = V'    an extra [limits] line for Prism's config (repeatable; replaces the tool's own K)
  --json             one JSON object instead of the table
  --keep             keep the temporary directory (config, prism.log)";

/// The tool's clock: ns since it started (monotonic; the node and the clients share it).
pub fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Pins process or thread `pid` (0: the caller) to `cpu`.
pub fn pin(pid: i32, cpu: usize) -> bool {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

pub struct Args {
    pub bin: PathBuf,
    pub heads: usize,
    pub logs: usize,
    pub slow: usize,
    pub slow_rcvbuf: usize,
    pub interval_ms: u64,
    pub warmup_s: f64,
    pub window_s: f64,
    pub slow_wait_s: f64,
    pub threads: usize,
    pub max_pending: usize,
    pub prism_cpu: Option<usize>,
    pub tool_cpu: Option<usize>,
    pub limits: Vec<String>,
    pub json: bool,
    pub keep: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        bin: PathBuf::new(),
        heads: 10_000,
        logs: 1_000,
        slow: 0,
        slow_rcvbuf: 0,
        interval_ms: 200,
        warmup_s: 3.0,
        window_s: 20.0,
        slow_wait_s: 30.0,
        threads: 1,
        max_pending: 256,
        prism_cpu: Some(1),
        tool_cpu: Some(0),
        limits: Vec::new(),
        json: false,
        keep: false,
    };
    let mut bin = None;
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{name}: not a number: {v}"))
        }
        match arg.as_str() {
            "--heads" => a.heads = num(&arg, val(&arg)?)?,
            "--logs" => a.logs = num(&arg, val(&arg)?)?,
            "--slow" => a.slow = num(&arg, val(&arg)?)?,
            "--slow-rcvbuf" => a.slow_rcvbuf = num(&arg, val(&arg)?)?,
            "--interval-ms" => a.interval_ms = num(&arg, val(&arg)?)?,
            "--warmup-s" => a.warmup_s = num(&arg, val(&arg)?)?,
            "--window-s" => a.window_s = num(&arg, val(&arg)?)?,
            "--slow-wait-s" => a.slow_wait_s = num(&arg, val(&arg)?)?,
            "--threads" => a.threads = num::<usize>(&arg, val(&arg)?)?.max(1),
            "--max-pending" => a.max_pending = num::<usize>(&arg, val(&arg)?)?.max(1),
            "--prism-cpu" => a.prism_cpu = Some(num(&arg, val(&arg)?)?),
            "--tool-cpu" => a.tool_cpu = Some(num(&arg, val(&arg)?)?),
            "--no-pin" => {
                a.prism_cpu = None;
                a.tool_cpu = None;
            }
            "--limit" => a.limits.push(val(&arg)?),
            "--json" => a.json = true,
            "--keep" => a.keep = true,
            "-h" | "--help" => return Err(USAGE.into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{USAGE}")),
            s => bin = Some(PathBuf::from(s)),
        }
    }
    a.bin = bin.ok_or(USAGE)?;
    if a.interval_ms == 0 || a.window_s <= 0.0 {
        return Err("--interval-ms and --window-s must be above 0".into());
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if a.prism_cpu.is_some_and(|c| c >= cores) || a.tool_cpu.is_some_and(|c| c >= cores) {
        eprintln!("fanout: fewer than 2 cores here: not pinning");
        a.prism_cpu = None;
        a.tool_cpu = None;
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    now_ns();
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let dir = std::env::temp_dir().join(format!("fanout.{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("fanout: {}: {e}", dir.display());
        std::process::exit(1);
    }
    let result = run(&args, &dir);
    if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("fanout: kept {}", dir.display());
    }
    match result {
        Ok(r) => {
            if args.json {
                println!("{}", r.json());
            } else {
                print!("{}", r.table());
            }
        }
        Err(e) => {
            eprintln!("fanout: {e}");
            std::process::exit(1);
        }
    }
}

fn raise_nofile(want: u64) -> Result<(), String> {
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur >= want {
            return Ok(());
        }
        let new = libc::rlimit {
            rlim_cur: want,
            rlim_max: r.rlim_max.max(want),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &new) != 0 {
            return Err(format!(
                "need {want} open files, the hard limit is {} (raise it: ulimit -Hn {want}, as root)",
                r.rlim_max
            ));
        }
    }
    Ok(())
}

fn log(args: &Args, msg: &str) {
    if !args.json || std::env::var_os("FANOUT_QUIET").is_none() {
        eprintln!("fanout: {msg}");
    }
}

/// Set by SIGINT / SIGTERM: the run stops as if it failed, so Prism is stopped and the temp dir removed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Waits `d`, watching the slow clients and Prism; an error if Prism died or the tool was interrupted.
fn wait(d: Duration, p: &mut prism::Prism, slow: &mut report::SlowWatch, shared: &Shared) -> Result<(), String> {
    let until = Instant::now() + d;
    loop {
        slow.watch(shared);
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Err("interrupted".into());
        }
        if !p.alive() {
            return Err(format!("Prism exited during the run; log:\n{}", p.log_tail()));
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

fn run(args: &Args, dir: &std::path::Path) -> Result<report::Report, String> {
    let plan = Arc::new(Plan {
        port: 0,
        heads: args.heads,
        logs: args.logs,
        slow: args.slow,
        threads: args.threads,
        slow_rcvbuf: args.slow_rcvbuf,
        max_pending: args.max_pending,
    });
    let total = plan.total();
    // Each side holds one end of every client connection, plus a few of its own.
    raise_nofile(total as u64 + 1024)?;
    if let Some(c) = args.tool_cpu {
        pin(0, c);
    }
    let node = node::Node::start(Duration::from_millis(args.interval_ms)).map_err(|e| format!("fake node: {e}"))?;
    let mut prism = prism::Prism::start(&prism::Setup {
        bin: &args.bin,
        dir,
        node_port: node.port,
        connections: total + 1000,
        subscriptions: total + 1000,
        limits: &args.limits,
        cpu: args.prism_cpu,
    })?;
    let plan = Arc::new(Plan {
        port: prism.port,
        ..*plan
    });
    let shared = Shared::new(total);
    let mut slow = report::SlowWatch::default();
    log(
        args,
        &format!(
            "Prism pid {} on port {}, fake node on {}",
            prism.pid(),
            prism.port,
            node.port
        ),
    );

    // Before any client: the idle process (one block interval at least, so the heads feed has run).
    wait(
        Duration::from_millis(1000.max(2 * args.interval_ms)),
        &mut prism,
        &mut slow,
        &shared,
    )?;
    let rss_before = prism.stats().rss_kib;

    let started = Instant::now();
    let threads: Vec<_> = (0..args.threads)
        .map(|t| {
            let (plan, shared) = (plan.clone(), shared.clone());
            std::thread::Builder::new()
                .name(format!("client-{t}"))
                .spawn(move || client::run(plan, shared, t))
                .map_err(|e| format!("client thread: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let stop = |shared: &Shared, node: &node::Node| {
        shared.stop.store(true, Ordering::SeqCst);
        node.stop.store(true, Ordering::SeqCst);
    };
    let result = (|| {
        let deadline = Duration::from_secs(60) + Duration::from_millis(total as u64 * 5);
        let mut shown = Instant::now();
        loop {
            let done = shared.subscribed.load(Ordering::SeqCst) + shared.failed.load(Ordering::SeqCst);
            if done >= total {
                break;
            }
            if started.elapsed() > deadline {
                return Err(format!(
                    "only {done} of {total} clients subscribed or failed in {deadline:?}; ends: {:?}",
                    shared.ends.lock().unwrap()
                ));
            }
            if shown.elapsed() > Duration::from_secs(2) {
                shown = Instant::now();
                log(
                    args,
                    &format!("{} of {total} subscribed", shared.subscribed.load(Ordering::SeqCst)),
                );
            }
            wait(Duration::from_millis(50), &mut prism, &mut slow, &shared)?;
        }
        let subscribe_s = started.elapsed().as_secs_f64();
        log(
            args,
            &format!(
                "{} subscribed, {} failed in {subscribe_s:.1} s",
                shared.subscribed.load(Ordering::SeqCst),
                shared.failed.load(Ordering::SeqCst)
            ),
        );
        // Every client subscribed and idle: mining paused, so nothing is on its way.
        node.paused.store(true, Ordering::SeqCst);
        wait(Duration::from_millis(1500), &mut prism, &mut slow, &shared)?;
        let rss_subscribed = prism.stats().rss_kib;
        let (up_heads, up_logs) = node.subscriptions();
        let upstream = (up_heads, up_logs, node.ws_connections.load(Ordering::SeqCst));
        node.paused.store(false, Ordering::SeqCst);
        wait(Duration::from_secs_f64(args.warmup_s), &mut prism, &mut slow, &shared)?;

        // The window.
        let live_at_start: Vec<bool> = shared
            .state
            .iter()
            .map(|s| s.load(Ordering::SeqCst) == client::LIVE)
            .collect();
        let tids = shared.tids.lock().unwrap().clone();
        let t0 = now_ns();
        shared.record_from.store(t0, Ordering::SeqCst);
        let p0 = prism.stats();
        let c0: u64 = tids.iter().map(|&t| prism::thread_ns(t)).sum();
        let s0 = prism::sched_ns("/proc/self/task");
        let (pc0, tc0) = (
            args.prism_cpu.map(prism::core_jiffies),
            args.tool_cpu.map(prism::core_jiffies),
        );
        wait(Duration::from_secs_f64(args.window_s), &mut prism, &mut slow, &shared)?;
        let t1 = now_ns();
        let p1 = prism.stats();
        let c1: u64 = tids.iter().map(|&t| prism::thread_ns(t)).sum();
        let s1 = prism::sched_ns("/proc/self/task");
        let (pc1, tc1) = (
            args.prism_cpu.map(prism::core_jiffies),
            args.tool_cpu.map(prism::core_jiffies),
        );
        let emitted = node.emitted.lock().unwrap().clone();
        let in_window: Vec<node::Emitted> = emitted
            .iter()
            .filter(|e| e.heads_ns >= t0 && e.heads_ns <= t1)
            .copied()
            .collect();
        let last = in_window.last().map(|e| e.block).unwrap_or(0);
        // Drain: until every client still live has the window's last block (or 10 s).
        let drain_until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < drain_until {
            let behind = (0..args.heads + args.logs).any(|i| {
                shared.state[i].load(Ordering::SeqCst) == client::LIVE
                    && shared.last_block[i].load(Ordering::SeqCst) < last
            });
            if !behind {
                break;
            }
            wait(Duration::from_millis(50), &mut prism, &mut slow, &shared)?;
        }
        // The slow clients get longer: Prism may take `client_timeout_ms` after their socket filled.
        let slow_until = Instant::now() + Duration::from_secs_f64(args.slow_wait_s);
        while args.slow > 0 && Instant::now() < slow_until && slow.dropped() < args.slow {
            wait(Duration::from_millis(50), &mut prism, &mut slow, &shared)?;
        }
        Ok(report::Window {
            t0,
            t1,
            rss_before,
            rss_subscribed,
            rss_load: p1.rss_kib,
            prism_ticks: p1.ticks - p0.ticks,
            prism_sched_ns: p1.sched_ns - p0.sched_ns,
            client_ns: c1 - c0,
            tool_ns: s1 - s0,
            prism_core: pc0.zip(pc1).map(|(a, b)| (b.0 - a.0, b.1 - a.1)),
            tool_core: tc0.zip(tc1).map(|(a, b)| (b.0 - a.0, b.1 - a.1)),
            emitted: in_window,
            live_at_start,
            subscribe_s,
            upstream,
        })
    })();
    stop(&shared, &node);
    let mut arrivals = Vec::new();
    for t in threads {
        match t.join() {
            Ok(a) => arrivals.extend(a),
            Err(_) => return Err("a client thread panicked".into()),
        }
    }
    let window = result?;
    slow.watch(&shared);
    let slow_report = slow.finish(&shared);
    let calls = node.calls.lock().unwrap().clone();
    let unknown = node.unknown.lock().unwrap().clone();
    Ok(report::Report::build(report::Inputs {
        args,
        window,
        arrivals,
        shared: &shared,
        slow: slow_report,
        calls,
        unknown,
        head_bytes: node.head_bytes.load(Ordering::Relaxed),
        ticks_per_s: prism::ticks_per_s(),
        prism_threads: std::fs::read_dir(format!("/proc/{}/task", prism.pid()))
            .map(|d| d.count())
            .unwrap_or(0),
    }))
}
