//! MagicBlock's own SDKs, unchanged, through Prism's magic router: `@magicblock-labs/ephemeral-rollups-sdk`
//! (web3.js v1 flavour: `ConnectionMagicRouter`, `GetCommitmentSignature`, `Resolver`) and
//! `@magicblock-labs/ephemeral-rollups-kit` (@solana/kit flavour: `isRouter`, `Connection`), driven by
//! `tests/solana/magicblock/sdk.mjs` against Prism in front of a base layer and two ERs (the Solana fakes,
//! which refuse or drop a transaction whose blockhash they did not issue, as validators do).
//!
//! One step per SDK function. The driver checks what the SDK hands the application; this file checks at the
//! fakes what the user relies on: each transaction reached the side its accounts live on exactly once and
//! nowhere else, its blockhash was issued there, each blockhash the SDK got came from the side it was asked
//! for, commit signatures are the ones the ER reported, and the Resolver follows a delegation and an
//! undelegation made while it watches. Every step runs even when an earlier one failed; the test prints a
//! table of all of them and fails listing every failed step.
//!
//! Needs the SDKs (npm ci in tests/solana/magicblock): scripts/deps/solana.sh.

use crate::support::solana_fake::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ON_BASE: u64 = 1_111;
const ON_ER: u64 = 2_222;

/// A child process killed on drop (even on panic).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Base layer, ER 1 (the default) and ER 2 behind Prism: alice delegated to ER 1, carol to ER 2, bob and
/// dave on the base layer; every chain checks blockhashes.
fn deployment() -> Magic {
    // Node's fetch keeps idle connections 4 s and does not retry a POST on one the server closed meanwhile:
    // the test default (500 ms) made a step fail now and then with "fetch failed" (Prism's default is 60 s).
    let m = Magic::start_with(true, |b| b.limit("idle_timeout_ms", 60_000));
    for name in ["payer", "alice", "bob", "carol", "dave"] {
        m.base.set_lamports(&pk(name), ON_BASE);
    }
    m.er1
        .set_account(&pk("alice"), Account::new(ON_ER, &pk("program"), &[]));
    m.er2()
        .set_account(&pk("carol"), Account::new(ON_ER, &pk("program"), &[]));
    m.base.delegate(&pk("alice"), &pk("er1_identity"));
    m.base.delegate(&pk("carol"), &pk("er2_identity"));
    for side in [&m.base, &m.er1, m.er2()] {
        side.check_blockhashes(true);
    }
    m
}

fn sides(m: &Magic) -> [(&'static str, &SolanaFake); 3] {
    [("base", &m.base), ("er1", &m.er1), ("er2", m.er2())]
}

/// What sdk.mjs is told: the router's URL, the keys, the ERs (`ers`: (identity, url) of ER 1 and ER 2) and
/// which steps to run (`only`: "web3", "kit" or "real").
fn setup(prism: std::net::SocketAddr, ers: [(String, String); 2], er_lamports: u64, only: &str) -> Value {
    let accounts: serde_json::Map<String, Value> = ["alice", "bob", "carol", "dave"]
        .iter()
        .map(|n| (n.to_string(), json!(pk(n))))
        .collect();
    json!({
        "url": format!("http://{prism}"),
        "payer_secret": fixtures()["accounts"]["payer"]["secret"],
        "accounts": accounts,
        "program": pk("program"),
        "ers": {
            "er1": {"identity": ers[0].0, "url": ers[0].1},
            "er2": {"identity": ers[1].0, "url": ers[1].1},
        },
        "lamports": {"base": ON_BASE, "er1": er_lamports},
        "only": only,
    })
}

/// Runs sdk.mjs with `setup`, doing what it asks for with `act`; returns its step lines.
fn run_sdk(setup: &Value, act: impl Fn(&Value)) -> Vec<Value> {
    let only = setup["only"].as_str().unwrap_or("");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/solana/magicblock");
    assert!(
        dir.join("node_modules/@magicblock-labs/ephemeral-rollups-sdk").exists()
            && dir.join("node_modules/@magicblock-labs/ephemeral-rollups-kit").exists(),
        "MagicBlock's SDKs are not installed: run scripts/deps/solana.sh (npm ci in tests/solana/magicblock)"
    );
    let scratch = crate::support::prism::Scratch::new();
    let setup_path = scratch.file("setup.json", &setup.to_string());
    let mut kid = Kid(Command::new("node")
        .current_dir(&dir)
        .arg("sdk.mjs")
        .arg(&setup_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node sdk.mjs"));
    let mut stdin = kid.0.stdin.take().unwrap();
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
    // Every step is bounded by the driver (8 s each); this only catches a driver that hangs outright.
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut steps = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("sdk.mjs {only} did not finish within 300 s: {steps:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        println!("sdk.mjs: {line}");
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(need) = v.get("need") {
            act(need);
            writeln!(stdin, "ok").expect("write to sdk.mjs");
        } else if v.get("step").is_some() {
            steps.push(v);
        } else if v.get("done").is_some() {
            break;
        }
    }
    let status = kid.0.wait().expect("wait for sdk.mjs");
    let err = err_reader.join().unwrap_or_default();
    assert!(status.success(), "sdk.mjs {only} exited {status}\nstderr:\n{err}");
    steps
}

/// What the driver asks of the chain while the SDK watches.
fn act(m: &Magic, need: &Value) {
    if let Some(account) = need["delegate"].as_str() {
        let (fake, identity) = match need["to"].as_str() {
            Some("er2") => (m.er2(), pk("er2_identity")),
            _ => (&m.er1, pk("er1_identity")),
        };
        // The ER takes the account over, then the base layer records the delegation.
        fake.set_account(account, Account::new(ON_ER, &pk("program"), &[]));
        m.base.delegate(account, &identity);
    } else if let Some(account) = need["undelegate"].as_str() {
        m.base.undelegate(account);
    } else {
        panic!("sdk.mjs asked for something unknown: {need}");
    }
}

/// The blockhash of the transaction `sig` as `fake` received it.
fn sent_blockhash(fake: &SolanaFake, sig: &str) -> Option<String> {
    fake.params_of("sendTransaction").iter().find_map(|p| {
        let text = p[0].as_str()?;
        let raw = match p[1]["encoding"].as_str() {
            Some("base64") => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.decode(text).ok()?
            }
            _ => bs58::decode(text).into_vec().ok()?,
        };
        (raw.len() > 65 && b58(&raw[1..65]) == sig).then(|| message_keys(&raw).map(|(_, h)| b58(&h)))?
    })
}

/// Checks one step at the fakes; the reason it failed otherwise.
fn verify(m: &Magic, step: &Value) -> Result<(), String> {
    if step["ok"] != json!(true) {
        return Err(step["error"].as_str().unwrap_or("failed").to_string());
    }
    let name = step["step"].as_str().unwrap_or("");
    let side = step["side"].as_str();
    let all = sides(m);
    if let Some(want) = side {
        let (_, fake) = all.iter().find(|(n, _)| *n == want).expect("a known side");
        if let Some(sig) = step["signature"].as_str() {
            for (n, f) in &all {
                let sends = f.sends_of(sig);
                let expected = usize::from(*n == want);
                if sends != expected {
                    return Err(format!(
                        "the transaction reached {n} {sends} times (expected {expected})"
                    ));
                }
            }
            let bh = sent_blockhash(fake, sig).ok_or("the transaction's blockhash is unreadable")?;
            if !fake.blockhash_valid(&bh) {
                return Err(format!("its blockhash {bh} was not issued by {want}"));
            }
        }
        if let Some(bh) = step["blockhash"].as_str() {
            if !fake.blockhash_valid(bh) {
                let from = all
                    .iter()
                    .find(|(_, f)| f.blockhash_valid(bh))
                    .map_or("nowhere", |(n, _)| n);
                return Err(format!("blockhash from {from}, expected {want}"));
            }
        }
        if let Some(h) = step["lastValidBlockHeight"].as_u64() {
            if h != fake.block_height() + 150 {
                return Err(format!(
                    "lastValidBlockHeight {h}, {want}'s is {}",
                    fake.block_height() + 150
                ));
            }
        }
    }
    match name {
        "web3.getClosestValidator" if step["fqdn"] != json!(m.er1.url()) => {
            return Err(format!("fqdn {}, expected ER 1's public URL", step["fqdn"]));
        }
        "web3.getDelegationStatus.delegated" => {
            let s = &step["status"];
            if s["fqdn"] != json!(m.er1.url()) || s["delegationRecord"]["authority"] != json!(pk("er1_identity")) {
                return Err(format!("status {s}"));
            }
        }
        "web3.isBlockhashValid" => {
            let bh = step["blockhash"].as_str().unwrap_or("");
            let asked: Vec<usize> = all.iter().map(|(_, f)| f.count_for("isBlockhashValid", bh)).collect();
            if asked[1] == 0 || asked[0] + asked[2] > 0 {
                return Err(format!("isBlockhashValid asked of base/er1/er2: {asked:?}"));
            }
        }
        "web3.GetCommitmentSignature" | "kit.getCommitmentSignature" => {
            let sig = step["signature"].as_str().unwrap_or("");
            let (_, commit) = m.er1.commit_of(sig).ok_or("the ER saw no commit for the transaction")?;
            if step["commit"] != json!(commit) {
                return Err(format!("commit signature {}, the ER reported {commit}", step["commit"]));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Runs one SDK flavour's steps; prints the table and fails listing every failed step.
fn sdk_flavour(only: &str, expected_steps: usize) {
    let m = deployment();
    let ers = [(m.er1.identity(), m.er1.url()), (m.er2().identity(), m.er2().url())];
    let steps = run_sdk(&setup(m.prism.addr(), ers, ON_ER, only), |need| act(&m, need));
    report(only, &steps, expected_steps, |s| verify(&m, s));
}

/// Prints the table of `steps` with `verify`'s verdicts; fails listing every failed step.
fn report(only: &str, steps: &[Value], expected_steps: usize, verify: impl Fn(&Value) -> Result<(), String>) {
    let mut failed = Vec::new();
    let mut table = String::new();
    for s in steps {
        let name = s["step"].as_str().unwrap_or("?");
        let verdict = verify(s);
        table.push_str(&format!(
            "{:<48} {}\n",
            name,
            match &verdict {
                Ok(()) => "pass".to_string(),
                Err(e) => format!("FAIL: {e}"),
            }
        ));
        if let Err(e) = verdict {
            failed.push(format!("{name}: {e}"));
        }
    }
    println!(
        "{only} SDK through Prism, {} of {} steps pass:\n{table}",
        steps.len() - failed.len(),
        steps.len()
    );
    assert_eq!(steps.len(), expected_steps, "steps run: {table}");
    assert!(failed.is_empty(), "failed steps:\n{}\n\n{table}", failed.join("\n"));
}

#[test]
fn the_web3js_sdk_works_unchanged_through_prism() {
    sdk_flavour("web3", 18);
}

#[test]
fn the_kit_sdk_works_unchanged_through_prism() {
    sdk_flavour("kit", 9);
}

// ---- MagicBlock's real ER validator --------------------------------------------------------------------

/// The web3.js SDK through Prism in front of a base-layer fake and MagicBlock's real ER validator
/// (`tests/support/real_er.rs`): the payer and bob are delegated to the ER on the base layer, the ER clones
/// them, and a transfer between them is sent, executed and confirmed on the real ER through Prism.
#[test]
fn the_web3js_sdk_transacts_on_magicblocks_real_er_through_prism() {
    use crate::support::real_er::RealEr;
    const CLONED: u64 = 5_000_000_000;
    let base = SolanaFake::base();
    let secret: Vec<u8> = fixtures()["accounts"]["er1_identity"]["secret"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect();
    for name in ["payer", "bob"] {
        base.set_lamports(&pk(name), CLONED);
        base.delegate(&pk(name), &pk("er1_identity"));
    }
    let er = RealEr::start(&base, &secret);
    assert_eq!(er.identity, pk("er1_identity"));
    let net = format!(
        "[[networks]]\nname = \"solana\"\nkind = \"solana-magic\"\ndefault_er = \"er-1\"\nslot_stall_ms = 0\n\n\
         [[networks.providers]]\nname = \"base-1\"\nrole = \"base\"\nurl = \"{}\"\nws_url = \"{}\"\n\n\
         [[networks.providers]]\nname = \"er-1\"\nrole = \"ephemeral\"\nidentity = \"{}\"\nurl = \"{}\"\n\
         ws_url = \"{}\"\npublic_url = \"{}\"\n",
        base.url(),
        base.ws_url(),
        er.identity,
        er.url(),
        er.ws_url(),
        er.url()
    );
    let prism = crate::support::Prism::builder().listen_pair().extra_toml(&net).start();
    let ers = [
        (er.identity.clone(), er.url()),
        (pk("er2_identity"), "http://127.0.0.1:9".into()),
    ];
    let steps = run_sdk(&setup(prism.addr(), ers, CLONED, "real"), |need| {
        panic!("unexpected {need}")
    });
    report("web3 on the real ER", &steps, 6, |s| {
        if s["ok"] != json!(true) {
            return Err(s["error"].as_str().unwrap_or("failed").to_string());
        }
        if let Some(sig) = s["signature"].as_str() {
            if base.sends_of(sig) != 0 {
                return Err("the transaction reached the base layer".into());
            }
            let st = er.call("getSignatureStatuses", json!([[sig]]));
            if !st["result"]["value"][0].is_object() {
                return Err(format!("the ER does not know the transaction: {st}"));
            }
        }
        if let Some(bh) = s["blockhash"].as_str() {
            let v = er.call("isBlockhashValid", json!([bh, {"commitment": "confirmed"}]));
            if v["result"]["value"] != json!(true) || base.blockhash_valid(bh) {
                return Err(format!("blockhash {bh} is not the ER's: {v}"));
            }
        }
        if let Some(h) = s["lastValidBlockHeight"].as_u64() {
            let er_height = er.call("getBlockHeight", json!([]))["result"].as_u64().unwrap_or(0);
            if h <= er_height || h >= base.block_height() {
                return Err(format!(
                    "lastValidBlockHeight {h} is not on the ER's chain (at {er_height})"
                ));
            }
        }
        Ok(())
    });
}
