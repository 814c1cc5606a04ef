//! Foundry's anvil (a real EVM node, from `tests/evm/node_modules/@foundry-rs/anvil-linux-amd64`), one per
//! test, on a free loopback port: HTTP and WebSocket on the same port, chain id 4663, its ten well-known
//! unlocked accounts. [`Anvil::start`] gives it **no mining of its own** (`--no-mining`): blocks are mined when the
//! test says so ([`Anvil::mine`]), so which transaction lands in which block is the test's choice.
//!
//! What makes it worth a second node beside ganache: `anvil_reorg` replaces the last blocks with others (the
//! transactions of the replaced blocks are gone unless given again), `anvil_rollback` removes the last blocks,
//! and both show on `newHeads` as geth shows them (replaced heights re-announced with their new hashes).
//!
//! The process is killed on drop, and by `PR_SET_PDEATHSIG` when the thread that started it ends.
#![allow(dead_code)]

use super::http::{self, Conn};
use super::relay::{hex_u64, EvmNode};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// anvil's default accounts (mnemonic "test test test test test test test test test test test junk").
pub const ACCOUNTS: &[&str] = &[
    "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
    "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
];

/// `Probe.set(uint256)` (tests/evm/contracts/Probe.sol): stores the value and emits `Set(who, value)`.
pub const SET: &str = "0x60fe47b1";

/// `tests/evm/node_modules/.../anvil`.
pub fn binary() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/evm/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")
}

pub struct Anvil {
    pub addr: SocketAddr,
    child: Child,
    pub log: PathBuf,
}

impl Anvil {
    /// Starts anvil with `--no-mining` and waits until it answers.
    pub fn start() -> Anvil {
        Self::start_with(&["--no-mining"])
    }

    /// anvil as it runs by default: every transaction mined into a block of its own at once (automine).
    pub fn start_automine() -> Anvil {
        Self::start_with(&[])
    }

    /// anvil with these arguments (e.g. `--no-mining`, `--block-time 1`, `--slots-in-an-epoch 1`).
    pub fn start_with(args: &[&str]) -> Anvil {
        let bin = binary();
        assert!(
            bin.exists(),
            "{} is missing: run scripts/deps/evm.sh (npm ci in tests/evm)",
            bin.display()
        );
        let port = super::prism::free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let log = super::prism::temp_dir().join("anvil.log");
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(&bin);
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--chain-id", "4663", "--silent"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        // SAFETY: the hook runs in the forked child before exec and only calls prctl, which is
        // async-signal-safe; it touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn anvil");
        let anvil = Anvil { addr, child, log };
        let up = super::wait_until(Duration::from_secs(20), || {
            let Ok(mut c) = Conn::try_connect(addr) else {
                return false;
            };
            let body = br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#;
            c.send(&http::post("/", body)).is_ok() && c.read_response().map(|r| r.status == 200).unwrap_or(false)
        });
        assert!(
            up,
            "anvil did not answer on {addr}; log:\n{}",
            std::fs::read_to_string(&anvil.log).unwrap_or_default()
        );
        anvil
    }

    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.addr)
    }
    /// `ws_url = "..."` for a Prism provider table.
    pub fn ws_option(&self) -> String {
        format!("ws_url = \"{}\"", self.ws_url())
    }
    /// This node as the relays of `support::relay` see one (they forward to its address).
    pub fn as_node(&self) -> EvmNode {
        EvmNode {
            addr: self.addr,
            pid: self.child.id(),
            log: self.log.clone(),
        }
    }

    /// One JSON-RPC call straight to anvil; the whole response object.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}).to_string();
        let r = Conn::connect(self.addr).request(&http::post("/", body.as_bytes()));
        assert_eq!(r.status, 200, "anvil {method}: {}", r.describe());
        r.json()
    }
    /// The `result` of a call straight to anvil (panics on an error answer).
    pub fn result(&self, method: &str, params: Value) -> Value {
        let r = self.rpc(method, params.clone());
        assert!(r.get("error").is_none(), "anvil {method} {params}: {r}");
        r["result"].clone()
    }
    pub fn head(&self) -> u64 {
        hex_u64(&self.result("eth_blockNumber", json!([]))).expect("anvil eth_blockNumber")
    }
    /// Mines `n` blocks (with whatever the pool holds in the first).
    pub fn mine(&self, n: u64) {
        for _ in 0..n {
            self.result("evm_mine", json!([]));
        }
    }
    /// `anvil_reorg`: the last `depth` blocks are replaced by as many new ones; `txs` are `[tx, offset]`
    /// pairs (a raw signed transaction or a request, and the new block it goes in, 0 = the first replaced).
    pub fn reorg(&self, depth: u64, txs: Value) {
        self.result("anvil_reorg", json!([depth, txs]));
    }
    /// `anvil_rollback`: the last `depth` blocks are removed (nothing is announced until the next block).
    pub fn rollback(&self, depth: u64) {
        self.result("anvil_rollback", json!([depth]));
    }
    pub fn block(&self, n: u64) -> Value {
        self.result("eth_getBlockByNumber", json!([format!("0x{n:x}"), false]))
    }
    /// `eth_sendTransaction` from an unlocked account; the transaction hash (mined by the next [`Anvil::mine`]).
    pub fn send(&self, tx: Value) -> String {
        self.result("eth_sendTransaction", json!([tx]))
            .as_str()
            .expect("a transaction hash")
            .to_string()
    }
    /// A signed `Probe.set(value)` from `from`, as raw bytes (so the same transaction can be given to
    /// `anvil_reorg` again), not sent.
    pub fn sign_set(&self, from: &str, contract: &str, value: u64, nonce: u64) -> String {
        let tx = json!({
            "from": from, "to": contract, "data": set_data(value), "gas": "0x186a0",
            "nonce": format!("0x{nonce:x}"), "gasPrice": "0x77359400", "chainId": "0x1237",
        });
        let signed = self.result("eth_signTransaction", json!([tx]));
        signed.as_str().expect("raw signed transaction").to_string()
    }
    /// Deploys `Probe` (tests/evm/probe.json) from `ACCOUNTS[0]` and mines it; its address.
    pub fn deploy_probe(&self) -> String {
        let probe: Value = serde_json::from_str(
            &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/evm/probe.json")).unwrap(),
        )
        .unwrap();
        let hash = self.send(json!({"from": ACCOUNTS[0], "data": probe["bytecode"], "gas": "0xf4240"}));
        self.mine(1);
        let receipt = self.result("eth_getTransactionReceipt", json!([hash]));
        receipt["contractAddress"]
            .as_str()
            .unwrap_or_else(|| panic!("deploy receipt: {receipt}"))
            .to_string()
    }
    pub fn nonce(&self, who: &str) -> u64 {
        hex_u64(&self.result("eth_getTransactionCount", json!([who, "pending"]))).unwrap()
    }
}

/// Calldata of `Probe.set(value)`.
pub fn set_data(value: u64) -> String {
    format!("{SET}{value:064x}")
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
