//! A real Solana client (solana-py, `tests/solana/flow.py`) through Prism's magic router: take a blockhash
//! (getLatestBlockhash, or getBlockhashForAccounts for a delegated account), send a signed transaction and let
//! solana-py confirm it against `last_valid_block_height`, then read the account back. The base layer's block
//! height (300 000 000) and the ER's (5 000) differ so widely that a getBlockHeight answered by the wrong chain
//! makes solana-py declare the blockhash expired at once.
//!
//! The same flow with web3.js v1 (`tests/solana/web3/flow.mjs`): it derives the WebSocket as port + 1 and
//! confirms with signatureSubscribe + getBlockHeight; the fakes hold the transaction until web3.js has
//! subscribed through Prism, so only the signature notification can confirm it.
//!
//! Needs solana-py + solders (pip) and web3.js (npm ci in tests/solana/web3): scripts/deps/solana.sh.

use crate::support::solana_fake::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ON_BASE: u64 = 1_111;
const ON_ER1: u64 = 2_222;

/// A child process killed on drop (even on panic).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs flow.py against `url` with these `session:mode` jobs; returns (success, one JSON value per flow, all
/// output). Fails the test after 60 s.
fn run_flow(url: &str, jobs: &[&str]) -> (bool, Vec<Value>, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let probe = Command::new("python3")
        .args(["-c", "import solana, solders"])
        .status()
        .expect("python3 on PATH");
    assert!(
        probe.success(),
        "solana-py is not installed: run scripts/deps/solana.sh (python3 -m pip install solana solders)"
    );
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("tests/solana/flow.py"))
        .arg(url)
        .arg(root.join("tests/fixtures/solana/fixtures.json"))
        .args(jobs)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut kid = Kid(cmd.spawn().expect("spawn python3 flow.py"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = kid.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "flow.py {jobs:?} did not finish within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    kid.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    kid.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let results: Vec<Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let all = format!("stdout:\n{out}\nstderr:\n{err}");
    println!("flow.py {jobs:?}:\n{all}");
    (status.success(), results, all)
}

fn seeded() -> Magic {
    let m = Magic::start();
    for name in ["payer", "alice", "bob"] {
        m.base.set_lamports(&pk(name), ON_BASE);
        m.er1.set_account(&pk(name), Account::new(ON_ER1, &pk("program"), &[]));
    }
    m.base.delegate(&pk("alice"), &pk("er1_identity"));
    m
}

fn url(m: &Magic) -> String {
    format!("http://{}/", m.prism.addr())
}

#[test]
fn solana_py_flow_runs_against_the_fake_base_layer_directly() {
    // The client harness itself, with no router in between: a base flow confirms on the base fake.
    let base = SolanaFake::base();
    base.set_lamports(&pk("bob"), ON_BASE);
    let (ok, res, all) = run_flow(&format!("{}/", base.url()), &["-:base"]);
    assert!(ok, "{all}");
    assert_eq!(res.len(), 1, "{all}");
    assert!(base.knows_signature(res[0]["signature"].as_str().unwrap()));
    assert!(
        base.count("getBlockHeight") >= 1,
        "solana-py confirmed without getBlockHeight?"
    );
    assert!(base.count("getSignatureStatuses") >= 1);
}

#[test]
fn solana_py_confirms_a_base_transaction_and_then_an_er_transaction_through_prism() {
    let m = seeded();
    let (ok, res, all) = run_flow(&url(&m), &["-:base"]);
    assert!(ok, "base flow: {all}");
    let r = &res[0];
    assert_eq!(r["blockhash"], json!(m.base.blockhash()), "{all}");
    let sig = r["signature"].as_str().unwrap();
    assert!(m.base.knows_signature(sig), "the base transaction did not reach base");
    assert!(!m.er1.knows_signature(sig));
    assert_eq!(r["balance"], json!(ON_BASE), "bob read from base: {all}");

    let er_heights = m.er1.count("getBlockHeight");
    let (ok, res, all) = run_flow(&url(&m), &["-:er"]);
    assert!(ok, "ER flow (an ER blockhash confirmed with ER heights): {all}");
    let r = &res[0];
    assert_eq!(r["blockhash"], json!(m.er1.blockhash()), "{all}");
    assert_eq!(r["last_valid"], json!(m.er1.block_height() + 150), "{all}");
    let sig = r["signature"].as_str().unwrap();
    assert!(m.er1.knows_signature(sig), "the ER transaction did not reach the ER");
    assert!(!m.base.knows_signature(sig));
    assert!(
        m.er1.count("getBlockHeight") > er_heights,
        "solana-py's getBlockHeight was not answered by the ER"
    );
    assert!(m.er1.count("getSignatureStatuses") >= 1);
    assert_eq!(r["lamports"], json!(ON_ER1), "delegated alice read from the ER: {all}");
    assert_eq!(r["balance"], json!(ON_ER1), "{all}");
}

#[test]
fn concurrent_solana_py_clients_keep_their_own_chain_by_session() {
    let m = seeded();
    let (ok, res, all) = run_flow(&url(&m), &["er-a:er", "base-b:base", "er-c:er"]);
    assert!(ok, "{all}");
    assert_eq!(res.len(), 3, "{all}");
    for r in &res {
        let sig = r["signature"].as_str().unwrap_or_else(|| panic!("{r}"));
        match r["mode"].as_str().unwrap() {
            "er" => assert!(m.er1.knows_signature(sig), "{r}"),
            _ => assert!(m.base.knows_signature(sig), "{r}"),
        }
    }
}

/// Runs web3.js flow.mjs in `mode` against Prism; once it printed the signature it sent, waits until that
/// signature is subscribed on `side` (through Prism's port + 1 WebSocket) and lands it there. Returns the
/// JSON lines the flow printed; panics with its output when it fails.
fn run_web3(m: &Magic, mode: &str, side: &SolanaFake, other: &SolanaFake) -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/solana/web3");
    assert!(
        dir.join("node_modules/@solana/web3.js").exists(),
        "web3.js is not installed: run scripts/deps/solana.sh (npm ci in tests/solana/web3)"
    );
    side.hold_signatures(true);
    let mut kid = Kid(Command::new("node")
        .current_dir(&dir)
        .arg("flow.mjs")
        .arg(url(m))
        .arg(root.join("tests/fixtures/solana/fixtures.json"))
        .arg(mode)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node flow.mjs"));
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = kid.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut stderr = kid.0.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut lines: Vec<Value> = Vec::new();
    let mut landed = false;
    let status = loop {
        while let Ok(l) = rx.try_recv() {
            println!("flow.mjs: {l}");
            if let Ok(v) = serde_json::from_str::<Value>(&l) {
                lines.push(v);
            }
        }
        if !landed {
            if let Some(sig) = lines.iter().find_map(|v| v["signature"].as_str().map(str::to_string)) {
                if side.signature_subs(&sig) >= 1 {
                    assert!(
                        side.knows_signature(&sig),
                        "{mode}: the transaction did not reach its side"
                    );
                    assert!(
                        !other.knows_signature(&sig),
                        "{mode}: the transaction reached the other side"
                    );
                    assert_eq!(
                        other.signature_subs(&sig),
                        0,
                        "{mode}: signatureSubscribe on the other side"
                    );
                    side.land(&sig);
                    landed = true;
                }
            }
        }
        if let Some(st) = kid.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "web3.js {mode} flow did not finish within 60 s (landed: {landed}); lines so far: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(50)); // let the reader drain the pipe after exit
    while let Ok(l) = rx.try_recv() {
        println!("flow.mjs: {l}");
        if let Ok(v) = serde_json::from_str::<Value>(&l) {
            lines.push(v);
        }
    }
    let err = err_reader.join().unwrap_or_default();
    assert!(
        status.success() && landed,
        "web3.js {mode} flow failed ({status}, landed: {landed}); lines: {lines:?}\nstderr:\n{err}"
    );
    assert!(
        lines.iter().any(|v| v["confirmed"] == json!(true)),
        "{mode}: no confirmation: {lines:?}"
    );
    lines
}

#[test]
fn web3js_confirms_through_the_port_plus_one_websocket_on_both_chains() {
    let m = seeded();
    let lines = run_web3(&m, "base", &m.base, &m.er1);
    assert_eq!(lines[0]["blockhash"], json!(m.base.blockhash()));
    let lines = run_web3(&m, "er", &m.er1, &m.base);
    assert_eq!(lines[0]["blockhash"], json!(m.er1.blockhash()));
    assert!(
        m.er1.count("getBlockHeight") >= 1 || m.er1.count("getSignatureStatuses") >= 1,
        "web3.js confirmed an ER transaction without asking the ER anything"
    );
}

/// MagicBlock's SDK asks the router's `getIdentity` for the validator to delegate to: through Prism, both
/// the SDK's own request and web3.js' RPC client get the ER (default_er), with its public URL.
#[test]
fn the_er_sdks_closest_validator_request_gets_the_er() {
    let m = seeded();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/solana/web3");
    assert!(
        dir.join("node_modules/@solana/web3.js").exists(),
        "web3.js is not installed: run scripts/deps/solana.sh (npm ci in tests/solana/web3)"
    );
    let out = Command::new("node")
        .current_dir(&dir)
        .arg("closest.mjs")
        .arg(url(&m))
        .output()
        .expect("spawn node closest.mjs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let want = json!({"identity": pk("er1_identity"), "fqdn": m.er1.url()});
    assert_eq!(v["sdk"], want, "{v}");
    assert_eq!(v["web3"], want, "{v}");
}
