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
    version = prism::telemetry::build::LONG_VERSION,
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
    /// Validate a config file and exit: errors name the field (exit 1); warnings name what looks wrong.
    /// Secrets that are not set here (`${NAME}`, secret files) are replaced by placeholders and listed, so
    /// a production config can be linted in CI; `--strict` requires them all.
    Check {
        #[arg(long, short)]
        config: PathBuf,
        /// `NAME=value` lines read for `${NAME}` instead of the config's `env_file`, before the environment.
        #[arg(long)]
        env_file: Option<PathBuf>,
        /// Every `${NAME}` and secret file must be readable here (as `prism serve` requires).
        #[arg(long)]
        strict: bool,
    },
    /// Print the live provider table of a running node, read from its admin listener's `/status`.
    Status {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Make a running node re-read its config file (as SIGHUP does) and print the outcome. Exit status 0 when
    /// applied, 1 when refused (the running config stays; the reason is printed).
    Reload {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Take a provider out of routing at once (every network's provider of that name), with a reason shown
    /// in `/status` and on the status page; `--undo` puts it back. Lasts until undone or a restart.
    Cordon {
        /// The provider's `name`.
        provider: String,
        /// Why (shown to other operators).
        #[arg(long, default_value = "")]
        reason: String,
        /// Put the provider back into routing.
        #[arg(long)]
        undo: bool,
        #[command(flatten)]
        admin: AdminArgs,
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

/// Where the node's admin listener is, and its token.
#[derive(clap::Args)]
struct AdminArgs {
    /// The node's `server.admin_listen`: `host:port`, `localhost:port` or a URL (`http://host:port/`).
    #[arg(long, default_value = DEFAULT_ADMIN)]
    admin: String,
    /// Read `server.admin_listen` (and `[admin] token`) from this config file instead.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// The `[admin] token`, for reload and cordon (or PRISM_ADMIN_TOKEN).
    #[arg(long, env = "PRISM_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// The admin address the demo and `deploy/prism.toml` use.
const DEFAULT_ADMIN: &str = "127.0.0.1:9090";

fn main() {
    let cli = Cli::parse();
    // One line per error (its causes after colons), never a backtrace: this is what a person reads.
    if let Err(e) = run(cli) {
        eprintln!("prism: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
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
        Command::Check {
            config,
            env_file,
            strict,
        } => check(&config, env_file, strict),
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
        Command::Status { admin } => status(&admin.target()?),
        Command::Reload { admin } => reload(&admin.target()?),
        Command::Cordon {
            provider,
            reason,
            undo,
            admin,
        } => cordon(&admin.target()?, &provider, &reason, undo),
    }
}

/// A resolved admin listener: its address as typed (for messages), where to connect, and the token.
struct AdminTarget {
    shown: String,
    addrs: Vec<SocketAddr>,
    token: Option<String>,
}

impl AdminArgs {
    fn target(&self) -> anyhow::Result<AdminTarget> {
        let (mut typed, mut token) = (self.admin.clone(), self.token.clone());
        if let Some(path) = &self.config {
            let reading = prism::config::Reading {
                base_dir: path.parent().map(std::path::Path::to_path_buf),
                lenient: true,
                ..Default::default()
            };
            let loaded = Config::read(path, &reading).with_context(|| format!("invalid config {}", path.display()))?;
            typed = loaded
                .config
                .server
                .admin_listen
                .clone()
                .with_context(|| format!("{} sets no server.admin_listen", path.display()))?;
            if token.is_none() && loaded.missing.is_empty() {
                token = loaded.config.admin.resolved.map(|t| t.expose().to_string());
            }
        }
        let authority = admin_authority(&typed)?;
        use std::net::ToSocketAddrs;
        let addrs: Vec<SocketAddr> = authority
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve the admin address {typed:?}"))?
            .collect();
        Ok(AdminTarget {
            shown: typed,
            addrs,
            token,
        })
    }
}

/// `host:port` from `host:port`, `localhost:port`, `[::1]:port` or `http://host:port/...` (a bare port too).
fn admin_authority(typed: &str) -> anyhow::Result<String> {
    let t = typed.trim();
    let rest = match t.split_once("://") {
        Some(("http", rest)) => rest,
        Some((scheme, _)) => anyhow::bail!("the admin listener speaks plain http, not {scheme}:// ({typed:?})"),
        None => t,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.parse::<u16>().is_ok() {
        return Ok(format!("127.0.0.1:{authority}"));
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']')));
    anyhow::ensure!(
        has_port,
        "{typed:?} is not an admin address: give host:port, localhost:port or http://host:port"
    );
    Ok(authority.to_string())
}

/// One request to the admin listener; the status code and body. A refused connection is one line naming
/// the address and where it comes from.
fn admin_request(admin: &AdminTarget, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let timeout = std::time::Duration::from_secs(5);
    let mut conn = None;
    let mut last = None;
    for a in &admin.addrs {
        match std::net::TcpStream::connect_timeout(a, timeout) {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(mut conn) = conn else {
        let why = last.map_or("no address".to_string(), |e| e.to_string());
        anyhow::bail!(
            "no Prism admin listener at {} ({why}); is the node running, and is that its server.admin_listen? (--admin ADDR or --config FILE)",
            admin.shown
        );
    };
    // A reload waits for every shard; give it more than its own bound.
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let auth = admin
        .token
        .as_deref()
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        admin.shown,
        body.len()
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
fn reload(admin: &AdminTarget) -> anyhow::Result<()> {
    let (status, body) = admin_request(admin, "POST", "/reload", "")?;
    if status != 200 && status != 422 {
        anyhow::bail!("/reload answered {status}: {}", String::from_utf8_lossy(&body).trim());
    }
    let outcome: prism::telemetry::status::ReloadOutcome =
        serde_json::from_slice(&body).context("/reload did not answer a reload outcome")?;
    if !outcome.applied {
        eprintln!("refused: {}", outcome.message);
        std::process::exit(1);
    }
    println!("{}", outcome.message);
    for change in &outcome.changes {
        println!("  {change}");
    }
    Ok(())
}

/// `prism cordon`: POST /providers/{name}/cordon (or /uncordon) with the reason.
fn cordon(admin: &AdminTarget, provider: &str, reason: &str, undo: bool) -> anyhow::Result<()> {
    let action = if undo { "uncordon" } else { "cordon" };
    let (status, body) = admin_request(admin, "POST", &format!("/providers/{provider}/{action}"), reason)?;
    let text = String::from_utf8_lossy(&body);
    anyhow::ensure!(status == 200, "{action} answered {status}: {}", text.trim());
    let what = if undo { "back in routing" } else { "out of routing" };
    println!("{provider}: {what}");
    Ok(())
}

/// `prism status`: GET /status (the same typed document the node writes) and print the provider table.
fn status(admin: &AdminTarget) -> anyhow::Result<()> {
    let (code, body) = admin_request(admin, "GET", "/status", "")?;
    anyhow::ensure!(
        code == 200,
        "/status answered {code}: {}",
        String::from_utf8_lossy(&body).trim()
    );
    let doc: prism::telemetry::status::StatusDoc =
        serde_json::from_slice(&body).context("/status did not answer a status document")?;
    println!(
        "prism {} (commit {}) up {}, {} open connections",
        doc.version,
        doc.commit,
        uptime(doc.uptime_seconds),
        doc.open_connections
    );
    print!("{}", prism::telemetry::status::render_table(&doc));
    Ok(())
}

fn uptime(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

fn check(path: &std::path::Path, env_file: Option<PathBuf>, strict: bool) -> anyhow::Result<()> {
    let reading = prism::config::Reading {
        base_dir: path.parent().map(std::path::Path::to_path_buf),
        env_file,
        lenient: !strict,
    };
    let loaded = match Config::read(path, &reading) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            std::process::exit(1);
        }
    };
    let config = loaded.config;
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
    for warning in prism::app::lint::warnings(&config) {
        println!("warning: {warning}");
    }
    for name in loaded.missing {
        println!("note: {name} is not available here (a placeholder was checked); `prism serve` needs it");
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
