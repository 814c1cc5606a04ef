//! SIGHUP, the operator's "reload what you can" (`kill -HUP`, `systemctl reload`). Its default action ends
//! the process, so it is caught at start-up whatever the config says; each part that can reload (the config
//! file, the edge certificate) registers a hook. With no hook, the signal is logged and ignored.
#![allow(
    clippy::disallowed_types,
    reason = "the SIGHUP watcher is a thread of its own; hooks are added at start-up, never on a shard"
)]

use std::sync::{Mutex, OnceLock};

type Hook = Box<dyn Fn() + Send + 'static>;

struct Hangup {
    hooks: Mutex<Vec<Hook>>,
}

static HANGUP: OnceLock<Result<Hangup, String>> = OnceLock::new();

/// Catches SIGHUP from now on (idempotent). A small watcher thread, blocked until a signal arrives, runs
/// the hooks: a signal handler may only write to a pipe.
pub fn install() -> std::io::Result<()> {
    let state = HANGUP.get_or_init(|| {
        let mut signals =
            signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP]).map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("prism-sighup".into())
            .spawn(move || {
                for _ in signals.forever() {
                    run_hooks();
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Hangup {
            hooks: Mutex::new(Vec::new()),
        })
    });
    state.as_ref().map(|_| ()).map_err(|e| std::io::Error::other(e.clone()))
}

/// Runs `hook` on every SIGHUP from now on.
pub fn on_hangup(hook: impl Fn() + Send + 'static) {
    if let Some(Ok(h)) = HANGUP.get() {
        h.hooks.lock().unwrap_or_else(|p| p.into_inner()).push(Box::new(hook));
    }
}

fn run_hooks() {
    let Some(Ok(h)) = HANGUP.get() else { return };
    let hooks = h.hooks.lock().unwrap_or_else(|p| p.into_inner());
    if hooks.is_empty() {
        tracing::info!(
            "SIGHUP received: nothing to reload (not started from a config file, no TLS configured); ignored"
        );
        return;
    }
    tracing::info!(hooks = hooks.len(), "SIGHUP received: reloading what can be reloaded");
    for hook in hooks.iter() {
        hook();
    }
}
