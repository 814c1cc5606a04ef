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
        Command::Serve { config } => {
            let config = Config::load(&config).with_context(|| format!("invalid config {}", config.display()))?;
            let shutdown = Shutdown::new();
            shutdown
                .install_signal_handlers()
                .context("installing signal handlers")?;
            prism::runtime::hangup::install().context("catching SIGHUP")?;
            prism::app::serve(config, shutdown, |_| {})?;
            tracing::info!("stopped");
            Ok(())
        }
        Command::Demo { listen, admin, seconds } => demo(listen, admin, seconds),
    }
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
    prism::app::serve(config, shutdown, move |view| {
        std::thread::spawn(move || prism::demo::drive(listen, &view, &driver_shutdown, seconds));
    })?;
    Ok(())
}
