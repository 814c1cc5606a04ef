//! The `prism` command line: serve, check, demo. The only place that uses anyhow.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use prism::config::Config;
use prism::runtime::Shutdown;
use prism::telemetry::logging::{self, LogFormat};

#[derive(Parser)]
#[command(
    name = "prism",
    version,
    about = "One JSON-RPC endpoint in front of many blockchain RPC providers"
)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// Log filter (RUST_LOG overrides), e.g. `info` or `prism=debug`.
    #[arg(long, global = true, default_value = "info")]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve JSON-RPC with the given config.
    Serve {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Validate a config file and exit.
    Check {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Print the live provider table of a running node, read from its admin listener's `/status`.
    Status {
        /// The node's `server.admin_listen` address.
        #[arg(long, default_value = "127.0.0.1:9091")]
        admin: SocketAddr,
    },
    /// Make a running node re-read its config file (as SIGHUP does) and print the outcome. Exit status 0 when
    /// applied, 1 when refused (the running config stays; the reason is printed).
    Reload {
        /// The node's `server.admin_listen` address.
        #[arg(long, default_value = "127.0.0.1:9091")]
        admin: SocketAddr,
    },
    /// Run Prism in front of built-in misbehaving providers on loopback (no network, no account needed).
    Demo {
        #[arg(long, default_value = "127.0.0.1:8545")]
        listen: SocketAddr,
        /// Admin listener: status page and metrics.
        #[arg(long, default_value = "127.0.0.1:9090")]
        admin: SocketAddr,
        /// Stop after this many seconds (default: run until Ctrl-C).
        #[arg(long)]
        seconds: Option<u64>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // A panic on a shard would leave its share of the port accepting connections nobody serves: report it
    // and exit, so a supervisor restarts a whole Prism.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("prism: a thread panicked; exiting so a supervisor can restart the whole process");
        std::process::exit(70);
    }));
    let _log = logging::init(cli.log_format, &cli.log_level);
    match cli.command {
        Command::Check { config } => check(&config),
        Command::Serve { config: path } => {
            let config = Config::load(&path).with_context(|| format!("invalid config {}", path.display()))?;
            let shutdown = Shutdown::new();
            shutdown
                .install_signal_handlers()
                .context("installing signal handlers")?;
            prism::runtime::hangup::install().context("catching SIGHUP")?;
            prism::app::serve(config, Some(path), shutdown, |_| {})?;
            tracing::info!("stopped");
            Ok(())
        }
        Command::Demo { listen, admin, seconds } => demo(listen, admin, seconds),
        Command::Status { admin } => status(admin),
        Command::Reload { admin } => reload(admin),
    }
}

/// One request to the admin listener; the status code and body.
fn admin_request(admin: SocketAddr, method: &str, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect_timeout(&admin, std::time::Duration::from_secs(5))
        .with_context(|| format!("no admin listener at {admin} (server.admin_listen)"))?;
    // A reload waits for every shard; give it more than its own bound.
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    conn.take(64 << 20).read_to_end(&mut raw)?;
    let split = memchr::memmem::find(&raw, b"\r\n\r\n").context("the admin listener sent no HTTP answer")?;
    let status = std::str::from_utf8(&raw[..split])
        .ok()
        .and_then(|h| h.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .context("the admin listener sent no HTTP status")?;
    Ok((status, raw[split + 4..].to_vec()))
}

/// `prism reload`: POST /reload and print what happened; exit status 1 when the file was refused.
fn reload(admin: SocketAddr) -> anyhow::Result<()> {
    use simd_json::prelude::*;
    let (status, mut body) = admin_request(admin, "POST", "/reload")?;
    if status != 200 && status != 422 {
        anyhow::bail!("/reload answered {status}: {}", String::from_utf8_lossy(&body).trim());
    }
    let doc = simd_json::to_borrowed_value(&mut body).context("/reload did not answer JSON")?;
    let message = doc.get("message").and_then(|v| v.as_str()).unwrap_or("").to_string();
    if status == 422 {
        eprintln!("refused: {message}");
        std::process::exit(1);
    }
    println!("{message}");
    for change in doc
        .get("changes")
        .and_then(|c| c.as_array())
        .map_or(&[][..], |a| a.as_slice())
    {
        println!("  {}", change.as_str().unwrap_or(""));
    }
    Ok(())
}

/// `prism status`: GET /status from the admin listener and print one row per provider, as the demo does.
fn status(admin: SocketAddr) -> anyhow::Result<()> {
    use simd_json::prelude::*;
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(5);
    let mut conn = std::net::TcpStream::connect_timeout(&admin, timeout)
        .with_context(|| format!("no admin listener at {admin} (server.admin_listen)"))?;
    conn.set_read_timeout(Some(timeout))?;
    write!(
        conn,
        "GET /status HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    conn.take(64 << 20).read_to_end(&mut raw)?;
    let split = memchr::memmem::find(&raw, b"\r\n\r\n").context("the admin listener sent no HTTP answer")?;
    anyhow::ensure!(
        raw.starts_with(b"HTTP/1.1 200"),
        "/status answered {}",
        String::from_utf8_lossy(&raw[..split])
    );
    let mut body = raw[split + 4..].to_vec();
    let doc = simd_json::to_borrowed_value(&mut body).context("/status is not JSON")?;
    let text = |v: Option<&simd_json::BorrowedValue>| v.and_then(|v| v.as_str()).unwrap_or("").to_string();
    let num = |v: Option<&simd_json::BorrowedValue>| v.and_then(|v| v.as_f64()).unwrap_or(0.0);
    println!(
        "prism {} up {:.0} s, {} open connections",
        text(doc.get("version")),
        num(doc.get("uptimeSeconds")),
        num(doc.get("openConnections"))
    );
    for net in doc
        .get("networks")
        .and_then(|n| n.as_array())
        .map_or(&[][..], |a| a.as_slice())
    {
        println!(
            "{} ({}), best head {}",
            text(net.get("name")),
            text(net.get("kind")),
            num(net.get("bestHead"))
        );
        println!(
            "  {:<16} {:>9} {:>9} {:>9} {:>7} {:>12} {:>6}  {:<6} state",
            "provider", "p50", "p99", "success", "share", "head", "lag", "badge"
        );
        for p in net
            .get("providers")
            .and_then(|p| p.as_array())
            .map_or(&[][..], |a| a.as_slice())
        {
            println!(
                "  {:<16} {:>6.1} ms {:>6.1} ms {:>8.2}% {:>6.0}% {:>12} {:>6}  {:<6} {}",
                text(p.get("name")),
                num(p.get("p50Ms")),
                num(p.get("p99Ms")),
                num(p.get("success")) * 100.0,
                num(p.get("share")) * 100.0,
                num(p.get("head")),
                num(p.get("lag")),
                text(p.get("badge")),
                text(p.get("state"))
            );
        }
    }
    Ok(())
}

fn check(path: &PathBuf) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let (config, missing) = match Config::from_toml_lenient(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            std::process::exit(1);
        }
    };
    if let Err(e) = prism::app::declared_methods(&config) {
        eprintln!("{}: {e}", path.display());
        std::process::exit(1);
    }
    let providers: usize = config.networks.iter().map(|n| n.providers.len()).sum();
    println!(
        "ok: {} ({} network(s), {} provider(s), {} key(s))",
        path.display(),
        config.networks.len(),
        providers,
        config.keys.len()
    );
    for name in missing {
        println!("note: environment variable {name} is not set here; `prism serve` needs it");
    }
    Ok(())
}

fn demo(listen: SocketAddr, admin: SocketAddr, seconds: Option<u64>) -> anyhow::Result<()> {
    let providers = prism::demo::start_providers().context("starting demo providers")?;
    let config = prism::demo::demo_config(&listen.to_string(), &admin.to_string(), &providers);
    let shutdown = Shutdown::new();
    shutdown.install_signal_handlers()?;
    println!(
        "Prism demo: JSON-RPC on http://{listen}/ in front of {} loopback providers:",
        providers.len()
    );
    for p in &providers {
        println!("  {:<9} {:<22} {}", p.name, p.addr.to_string(), p.behaviour);
    }
    println!("Status page: http://{admin}/   Metrics: http://{admin}/metrics");
    println!(
        "Try: curl -s -XPOST http://{listen}/ -H 'content-type: application/json' -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_blockNumber\"}}'"
    );
    println!("Ctrl-C stops it.\n");
    let driver_shutdown = shutdown.clone();
    prism::app::serve(config, None, shutdown, move |view| {
        std::thread::spawn(move || prism::demo::drive(listen, &view, &driver_shutdown, seconds));
    })?;
    Ok(())
}
