//! Forwarding one call: build the upstream body with Prism's own id, send it, validate the answer.
//! The upstream's `result`/`error` bytes are kept as they came; only the id is ours on the way out and the
//! client's on the way back (the edge splices it).

use std::cell::Cell;
use std::ops::Range;
use std::time::Instant;

use crate::edge::envelope::Call;
use crate::transport::validate::check_response;
use crate::transport::TransportError;

use super::methods::is_write;
use super::route::NetworkRoute;

/// The answer to one call.
#[derive(Debug)]
pub enum CallOutcome {
    /// A valid JSON-RPC response: `body[value]` is the `result` or `error` value.
    Answer {
        body: Vec<u8>,
        value: Range<usize>,
        is_error: bool,
    },
    Failed(ProxyError),
}

/// Why Prism could not get an answer. Rendered to the client as a -32603 error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyError {
    NoUpstream,
    Transport {
        provider: String,
        error: TransportError,
    },
    Status {
        provider: String,
        status: u16,
    },
    BadResponse {
        provider: String,
        why: &'static str,
    },
    NotServed(&'static str),
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyError::NoUpstream => f.write_str("No healthy upstream available"),
            ProxyError::Transport {
                error: TransportError::Timeout { .. },
                ..
            } => f.write_str("Upstream timeout"),
            ProxyError::Transport { error, .. } => write!(f, "Upstream error: {error}"),
            ProxyError::Status { status, .. } => write!(f, "Upstream error: HTTP {status}"),
            ProxyError::BadResponse { why, .. } => write!(f, "Upstream error: {why}"),
            ProxyError::NotServed(why) => f.write_str(why),
        }
    }
}

/// Sends `call` to the next upstream of `route` and returns its validated answer.
pub async fn forward(
    route: &NetworkRoute,
    call: &Call<'_>,
    deadline: Instant,
    ids: &Cell<u64>,
) -> CallOutcome {
    let Some(upstream) = route.pick() else {
        return CallOutcome::Failed(ProxyError::NoUpstream);
    };
    let id = ids.get();
    ids.set(id.wrapping_add(1));
    let mut body = Vec::with_capacity(64 + call.method.len() + call.params.map_or(0, <[u8]>::len));
    write_upstream_call(&mut body, id, &call.method, call.params);
    let replay_safe = !is_write(&call.method);
    let resp = match upstream.pool.post(&body, deadline, replay_safe).await {
        Ok(r) => r,
        Err(error) => {
            tracing::debug!(provider = %upstream.name, method = %call.method, %error, "upstream call failed");
            return CallOutcome::Failed(ProxyError::Transport {
                provider: upstream.name.clone(),
                error,
            });
        }
    };
    let provider = || upstream.name.clone();
    match check_response(&resp.body, id) {
        // A 2xx answer, or a JSON-RPC error body carried by a 4xx other than 429, is the node's answer.
        Ok(a)
            if (200..300).contains(&resp.status)
                || (a.is_error && (400..500).contains(&resp.status) && resp.status != 429) =>
        {
            CallOutcome::Answer {
                body: resp.body,
                value: a.value,
                is_error: a.is_error,
            }
        }
        _ if !(200..300).contains(&resp.status) => CallOutcome::Failed(ProxyError::Status {
            provider: provider(),
            status: resp.status,
        }),
        Ok(_) => unreachable!("2xx handled above"),
        Err(why) => CallOutcome::Failed(ProxyError::BadResponse {
            provider: provider(),
            why: match why {
                crate::transport::validate::InvalidResponse::NotAnObject => {
                    "response is not a JSON-RPC object"
                }
                crate::transport::validate::InvalidResponse::Malformed => {
                    "malformed or truncated response"
                }
                crate::transport::validate::InvalidResponse::WrongId => {
                    "response id does not match the request"
                }
                crate::transport::validate::InvalidResponse::NoResult => {
                    "response has neither result nor error"
                }
            },
        }),
    }
}

/// `{"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params bytes>}`; params omitted when absent.
pub fn write_upstream_call(out: &mut Vec<u8>, id: u64, method: &str, params: Option<&[u8]>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
    out.extend_from_slice(br#","method":"#);
    write_json_str(out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p);
    }
    out.push(b'}');
}

/// Writes `s` as a JSON string literal.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_call_keeps_params_bytes() {
        let mut out = Vec::new();
        write_upstream_call(
            &mut out,
            42,
            "eth_call",
            Some(br#"[ {"to":"0xAB"} , "latest" ]"#),
        );
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":42,"method":"eth_call","params":[ {"to":"0xAB"} , "latest" ]}"#);
        out.clear();
        write_upstream_call(&mut out, 1, "we\"ird\n\u{1}", None);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":1,"method":"we\"ird\n\u0001"}"#
        );
    }
}
