//! Property checks for the fuzz targets that read provider bytes (and the envelope cost target), in one
//! place: each `fuzz/fuzz_targets/<t>.rs` calls its function here, and `tests/fuzz_replay.rs` replays every
//! file of `fuzz/corpus/<t>/` and `fuzz/crashes/<t>/` through the same function under plain `cargo test`,
//! so an input that failed once keeps failing until fixed. Included with `#[path]` (no crate of its own):
//! it sees only Prism's public API and `serde_json`.
//!
//! Each function panics (with the input described) when a property fails.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use prism::http1::ChunkedDecoder;
use prism::jsonscan;
use prism::transport::validate::check_response;
use prism::transport::{parse_head, Framing, MAX_HEAD};

/// Largest body the checks decode (the targets run with `-max_len=65536`).
const MAX_BODY: usize = 1 << 16;

fn show(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(&data[..data.len().min(300)]).into_owned();
    if data.len() > 300 {
        format!("{text:?}... ({} bytes)", data.len())
    } else {
        format!("{text:?}")
    }
}

/// `inner` is a sub-slice of `outer` (a span Prism reports lies within the input).
fn assert_within(outer: &[u8], inner: &[u8], what: &str) {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    assert!(
        i >= o && i + inner.len() <= o + outer.len(),
        "{what}: span outside the input {}",
        show(outer)
    );
}

fn trim(b: &[u8]) -> &[u8] {
    let start = jsonscan::skip_ws(b, 0);
    let mut end = b.len();
    while end > start && matches!(b[end - 1], b' ' | b'\t' | b'\n' | b'\r') {
        end -= 1;
    }
    &b[start..end]
}

// ---------------------------------------------------------------------------------------------------------
// upstream_answer

/// An upstream HTTP answer: the head parser, the body framing (Content-Length, chunked, until close), then
/// the body through validation, classification and head extraction. No panic, every span within the input,
/// and `jsonscan` agrees with serde_json on what is JSON.
pub fn upstream_answer(data: &[u8]) {
    match parse_head(data) {
        Ok(Some(head)) => {
            assert!(head.len <= data.len(), "head len {} > input {}", head.len, data.len());
            let rest = &data[head.len..];
            let body = match head.framing {
                Framing::Length(n) => (n <= MAX_BODY && n <= rest.len()).then(|| rest[..n].to_vec()),
                Framing::UntilClose => Some(rest.to_vec()),
                Framing::Chunked => {
                    let mut d = ChunkedDecoder::new(MAX_BODY);
                    let mut out = Vec::new();
                    match d.decode(rest, &mut out) {
                        Ok(used) => {
                            assert!(used <= rest.len(), "chunked decoder used {used} of {}", rest.len());
                            assert!(out.len() <= MAX_BODY, "chunked body past its cap");
                            d.is_done().then_some(out)
                        }
                        Err(_) => None,
                    }
                }
            };
            if let Some(body) = body {
                answer_body(head.status, &body);
            }
        }
        Ok(None) => assert!(
            data.len() <= MAX_HEAD,
            "{} bytes and no verdict on the head",
            data.len()
        ),
        Err(_) => {}
    }
    // The whole input as a body, with a status taken from it.
    let status = match data.first() {
        Some(b) if b % 3 == 0 => 500,
        Some(b) if b % 3 == 1 => 429,
        _ => 200,
    };
    answer_body(status, data);
    answer_body(200, data);
}

fn answer_body(status: u16, body: &[u8]) {
    use prism::core::judge::classify::{classify_http, classify_rpc_error_with_status, Dialect};
    match check_response(body, 1) {
        Ok(a) => {
            assert!(
                a.value.start <= a.value.end && a.value.end <= body.len(),
                "value {:?} outside {}",
                a.value,
                show(body)
            );
            let v = &body[a.value.clone()];
            assert_eq!(
                jsonscan::skip_value(v, 0),
                Some(v.len()),
                "the value is not one whole value"
            );
            assert!(
                std::str::from_utf8(body).is_ok(),
                "accepted invalid UTF-8: {}",
                show(body)
            );
            if jsonscan::depth_at_most(body, 100) {
                // serde_json refuses numbers beyond a double; they are valid JSON and pass unchanged.
                let refused = serde_json::from_slice::<serde_json::Value>(body)
                    .err()
                    .filter(|e| !e.to_string().starts_with("number out of range"));
                assert!(refused.is_none(), "accepted what serde_json refuses: {}", show(body));
            }
            if a.is_error {
                let _ = classify_rpc_error_with_status(status, v, false);
                let _ = classify_rpc_error_with_status(status, v, true);
            }
            head_extraction(v);
        }
        Err(_) => {
            let _ = classify_http(status, body);
        }
    }
    // The one judge the retry loop and the prober use, for a read and a write.
    for dialect in [Dialect::Evm, Dialect::Solana] {
        let _ = prism::core::judge::judge_answer(status, body.to_vec(), 1, false, dialect);
        let _ = prism::core::judge::judge_answer(status, body.to_vec(), 1, true, dialect);
    }
    head_extraction(body);
    scanner_agrees_with_serde(body);
}

/// What Prism reads out of a result: fields, elements, quantities. Spans within the input.
fn head_extraction(b: &[u8]) {
    for key in ["number", "result", "id", "hash", "blockNumber", "value", "context"] {
        if let Some(v) = jsonscan::object_field(b, key) {
            assert_within(b, v, "object_field");
            assert_eq!(
                jsonscan::skip_value(v, 0),
                Some(v.len()),
                "object_field value not whole"
            );
            let _ = jsonscan::hex_quantity(v);
            let _ = jsonscan::plain_u64(v);
            let _ = jsonscan::plain_str(v);
        }
    }
    for n in 0..3 {
        if let Some(v) = jsonscan::nth_element(b, n) {
            assert_within(b, v, "nth_element");
        }
    }
    if let Some(all) = jsonscan::elements(b) {
        for v in &all {
            assert_within(b, v, "elements");
        }
        if let Some(first) = all.first() {
            assert_eq!(
                jsonscan::nth_element(b, 0),
                Some(*first),
                "elements and nth_element disagree"
            );
        }
    }
    let _ = jsonscan::hex_quantity(b);
    // skip_value from the first positions: never past the input.
    for p in 0..b.len().min(64) {
        if let Some(end) = jsonscan::skip_value(b, p) {
            assert!(end > p && end <= b.len(), "skip_value({p}) = {end} for {}", show(b));
        }
        if let Some(end) = jsonscan::skip_string(b, p) {
            assert!(end > p + 1 && end <= b.len(), "skip_string({p}) = {end}");
        }
    }
}

/// Both directions: what serde_json reads as JSON, the scanner reads as one whole value; what the scanner
/// reads as one whole value, serde_json reads (where serde_json has an opinion: UTF-8, nesting within its
/// recursion limit).
fn scanner_agrees_with_serde(body: &[u8]) {
    let t = trim(body);
    let ours = !t.is_empty() && jsonscan::skip_value(t, 0) == Some(t.len());
    let parsed = serde_json::from_slice::<serde_json::Value>(body);
    // serde_json refuses numbers beyond a double; RFC 8259 does not, and neither does the scanner.
    let out_of_range = parsed
        .as_ref()
        .is_err_and(|e| e.to_string().starts_with("number out of range"));
    let theirs = parsed.is_ok();
    if theirs {
        assert!(ours, "serde_json reads JSON the scanner refuses: {}", show(body));
    }
    if ours && !out_of_range && std::str::from_utf8(body).is_ok() && jsonscan::depth_at_most(body, 100) {
        assert!(theirs, "the scanner accepts what serde_json refuses: {}", show(body));
    }
}

// ---------------------------------------------------------------------------------------------------------
// sub_frame

/// An upstream WebSocket: the input as raw server frames read by tungstenite with the limits Prism uses
/// (`transport::ws`), every message through the subscription hubs' parsers (EVM, Solana records, Solana
/// client subscriptions); and the input itself as one message. Spans within the input.
pub fn sub_frame(data: &[u8]) {
    frame_text(data);
    for message in ws_messages(data) {
        frame_text(&message);
    }
}

fn frame_text(text: &[u8]) {
    use prism::core::subs::{parse_upstream_frame, UpstreamFrame};
    match parse_upstream_frame(text) {
        UpstreamFrame::Notification { subscription, result } => {
            assert_within(text, subscription.as_bytes(), "subscription id");
            assert_within(text, result, "notification result");
            if let Some(n) = jsonscan::object_field(result, "number") {
                assert_within(result, n, "head number");
                let _ = jsonscan::hex_quantity(n);
            }
            for key in ["blockHash", "logIndex", "removed", "blockNumber"] {
                if let Some(v) = jsonscan::object_field(result, key) {
                    assert_within(result, v, key);
                }
            }
        }
        UpstreamFrame::Reply { subscription, .. } => {
            if let Some(s) = subscription {
                assert_within(text, s.as_bytes(), "reply subscription id");
            }
        }
        UpstreamFrame::Ignored => {}
    }
    record_frame(text);
    solana_sub_frame(text);
}

/// A frame on a shared Solana subscription socket (`solana::subs_link`): spans within the input; a
/// notification's method is a JSON string.
fn solana_sub_frame(text: &[u8]) {
    use prism::solana::subs_link::{parse_sub_frame, SubFrame};
    match parse_sub_frame(text) {
        SubFrame::Notification { method, result, .. } => {
            assert_within(text, method, "notification method");
            assert_within(text, result, "notification result");
            assert_eq!(method.first(), Some(&b'"'), "a notification's method is a string");
        }
        SubFrame::Reply { refused, .. } => {
            if let Some(why) = refused {
                assert_within(text, why.as_bytes(), "refusal message");
            }
        }
        SubFrame::Ignored => {}
    }
}

/// An in-memory socket: reads come from the input, writes (pongs, close replies) are dropped.
struct Wire<'a> {
    input: &'a [u8],
}

impl std::io::Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl std::io::Write for Wire<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The text and binary messages tungstenite reads from `data` as a client (server frames), with Prism's
/// upstream limits scaled to the input.
fn ws_messages(data: &[u8]) -> Vec<Vec<u8>> {
    use tungstenite::protocol::{Role, WebSocket, WebSocketConfig};
    use tungstenite::Message;
    let config = WebSocketConfig {
        max_message_size: Some(MAX_BODY),
        max_frame_size: Some(MAX_BODY),
        ..Default::default()
    };
    let mut ws = WebSocket::from_raw_socket(Wire { input: data }, Role::Client, Some(config));
    let mut out = Vec::new();
    // Each read consumes input or ends it; the bound is a backstop against a loop.
    for _ in 0..=data.len() {
        match ws.read() {
            Ok(Message::Text(t)) => out.push(t.into_bytes()),
            Ok(Message::Binary(b)) => out.push(b.to_vec()),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// solana_account

/// A Solana record-link frame: spans within the input.
fn record_frame(text: &[u8]) {
    use prism::solana::sync::{parse_record_frame, RecordFrame};
    if let RecordFrame::Notification { value, .. } = parse_record_frame(text) {
        assert_within(text, value, "account notification value");
    }
}

/// Delegation records, account data, lookup tables and account notifications: no panic; the record read
/// from an account's JSON is exactly `DelegationRecord::parse` of its data, base64 or base58; base58 data
/// past the cap is refused unread.
pub fn solana_account(data: &[u8]) {
    use base64::Engine;
    use prism::solana::record::{DelegationRecord, DISCRIMINATOR, MIN_LEN};
    use prism::solana::table::{account_data, delegation_record, MAX_BASE58_DATA};
    use prism::solana::tx::lookup_table_addresses;
    use prism::solana::Pubkey;

    let record = DelegationRecord::parse(data);
    if record.is_some() {
        assert!(data.len() >= MIN_LEN, "record from {} bytes", data.len());
        assert_eq!(u64::from_le_bytes(data[..8].try_into().unwrap()), DISCRIMINATOR);
    }
    if let Some(keys) = lookup_table_addresses(data) {
        assert_eq!(keys.len() * 32 + 56, data.len());
    }
    // The input as JSON from an upstream: an account value, account data, a notification.
    let program = Pubkey([7; 32]);
    let _ = delegation_record(&program, data);
    if let Some(d) = account_data(data) {
        let _ = DelegationRecord::parse(&d);
        let _ = lookup_table_addresses(&d);
    }
    record_frame(data);

    // The input as the bytes of a record account, wrapped as getAccountInfo's value would be.
    let owner = program.to_base58();
    let b64 = base64::engine::general_purpose::STANDARD.encode(data);
    let lamports = data.first().map_or(1, |b| u64::from(*b % 2));
    let value = format!(r#"{{"lamports":{lamports},"owner":"{owner}","data":["{b64}","base64"],"executable":false}}"#);
    let want = if lamports == 0 { None } else { record };
    assert_eq!(
        delegation_record(&program, value.as_bytes()),
        want,
        "base64 account of {data:?}"
    );
    let b58 = bs58::encode(data).into_string();
    let value = format!(r#"{{"data":["{b58}","base58"],"owner":"{owner}","lamports":{lamports}}}"#);
    let want = if b58.len() > MAX_BASE58_DATA { None } else { want };
    assert_eq!(
        delegation_record(&program, value.as_bytes()),
        want,
        "base58 account of {data:?}"
    );
    // Someone else's account never holds a record.
    let value = format!(
        r#"{{"lamports":1,"owner":"{}","data":["{b64}","base64"]}}"#,
        Pubkey([8; 32])
    );
    assert_eq!(delegation_record(&program, value.as_bytes()), None);
    // A notification carrying it.
    let frame = format!(
        r#"{{"jsonrpc":"2.0","method":"accountNotification","params":{{"result":{{"context":{{"slot":{}}},"value":{{"lamports":1,"owner":"{owner}","data":["{b64}","base64"]}}}},"subscription":{}}}}}"#,
        data.len(),
        lamports
    );
    match prism::solana::sync::parse_record_frame(frame.as_bytes()) {
        prism::solana::sync::RecordFrame::Notification {
            subscription,
            slot,
            value,
        } => {
            assert_eq!((subscription, slot), (lamports, data.len() as u64));
            assert_eq!(delegation_record(&program, value), record);
        }
        other => panic!("notification not read: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------------------
// envelope_cost

/// One structure repeated `n` times, as a request body. `unit` (from the input) varies what repeats.
fn shaped_body(shape: u8, unit: &[u8], n: usize) -> Vec<u8> {
    // Keep the repeated piece JSON-safe: letters and digits from the input.
    let word: String = unit
        .iter()
        .map(|b| (b'a' + b % 26) as char)
        .take(12)
        .collect::<String>();
    let word = if word.is_empty() { "k".to_string() } else { word };
    let mut b = String::with_capacity(n * (word.len() + 16));
    match shape % 6 {
        // Many distinct keys in the call object.
        0 => {
            b.push_str(r#"{"jsonrpc":"2.0","id":1,"method":"eth_call""#);
            for i in 0..n {
                b.push_str(&format!(r#","{word}{i}":0"#));
            }
            b.push('}');
        }
        // Many distinct keys inside params.
        1 => {
            b.push_str(r#"{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"#);
            for i in 0..n {
                if i > 0 {
                    b.push(',');
                }
                b.push_str(&format!(r#""{word}{i}":"0x{i:x}""#));
            }
            b.push_str("}]}");
        }
        // A long run of escapes in the method and in params.
        2 => {
            let esc: String = unit
                .iter()
                .map(|c| ["\\n", "\\\"", "\\u0041", "\\\\", "\\/"][*c as usize % 5])
                .collect();
            let esc = if esc.is_empty() { "\\n".to_string() } else { esc };
            let run = esc.repeat(n.div_ceil(esc.len().max(1)).max(1));
            b.push_str(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m{run}","params":["{run}"]}}"#
            ));
        }
        // Nesting up to the depth limit, many times over.
        3 => {
            b.push_str(r#"{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["#);
            for i in 0..n.div_ceil(24) {
                if i > 0 {
                    b.push(',');
                }
                b.push_str(&"[".repeat(12));
                b.push_str(&"]".repeat(12));
            }
            b.push_str("]}");
        }
        // A big batch of small calls.
        4 => {
            b.push('[');
            for i in 0..n.div_ceil(40) {
                if i > 0 {
                    b.push(',');
                }
                b.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"{word}"}}"#));
            }
            b.push(']');
        }
        // A long array of numbers and literals.
        _ => {
            b.push_str(r#"{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["#);
            for i in 0..n.div_ceil(6) {
                if i > 0 {
                    b.push(',');
                }
                b.push_str(["1e5", "true", "-0.5", "null", "12345"][i % 5]);
            }
            b.push_str("]}");
        }
    }
    b.into_bytes()
}

fn parse_time(parser: &mut prism::edge::envelope::EnvelopeParser, body: &[u8]) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            let _ = std::hint::black_box(parser.parse(std::hint::black_box(body)));
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// The client envelope parser's cost is linear: the same structure four times as big may take at most
/// about four times as long (bound: 12×, noise included), checked only where the bigger parse takes long
/// enough to measure (2 ms). A quadratic parser takes 16× and is caught.
pub fn envelope_cost(data: &[u8]) {
    use prism::edge::envelope::{EnvelopeLimits, EnvelopeParser};
    let (shape, size, unit) = match data {
        [s, z, rest @ ..] => (*s, *z, rest),
        _ => return,
    };
    // 500 to 4 580 repetitions (4× that for the big one): bodies of kilobytes to a few hundred.
    let n = 500 + usize::from(size) * 16;
    let mut parser = EnvelopeParser::new(EnvelopeLimits {
        max_batch: 1_000_000,
        max_depth: 16,
    });
    let small = shaped_body(shape, unit, n);
    let big = shaped_body(shape, unit, 4 * n);
    // A ratio over the bound must hold on every one of four measurements: one slow run on a loaded
    // machine (a 20 ms scheduling stall after a 1 ms parse: fuzz/crashes/envelope_cost/noise-*) is noise.
    let mut last = String::new();
    for _ in 0..4 {
        let (ts, tb) = (parse_time(&mut parser, &small), parse_time(&mut parser, &big));
        assert!(
            tb < Duration::from_secs(2),
            "{} bytes took {tb:?} (shape {})",
            big.len(),
            shape % 6
        );
        let ratio = tb.as_secs_f64() / ts.as_secs_f64().max(1e-9);
        if tb <= Duration::from_millis(2) || ratio < 12.0 {
            return;
        }
        last = format!(
            "4× the input took {ratio:.1}× the time (shape {}, {} → {} bytes, {ts:?} → {tb:?}): superlinear",
            shape % 6,
            small.len(),
            big.len()
        );
    }
    panic!("{last}");
}

/// Client WebSocket bytes as the edge reads them (`http1::ws_frame::WsReader`, 64 KiB messages): never a
/// panic; `Need` always asks for more than it was given (so the read loop makes progress) and never more
/// than one frame's head and the limit; a message is never over the limit and a text message is UTF-8; and
/// the messages are the same whether the bytes come at once or in the pieces `Need` asks for.
pub fn client_ws(data: &[u8]) {
    use prism::http1::ws_frame::{Progress, WsMessage, WsReader};
    const MAX: usize = 64 * 1024;
    let read = |pieces: bool| {
        let mut r = WsReader::new(MAX);
        let mut got = Vec::new();
        let (mut at, mut have) = (0, if pieces { data.len().min(1) } else { data.len() });
        loop {
            match r.next(&data[at..at + have]) {
                Ok(Progress::Message(used, m)) => {
                    assert!(used <= have, "{}: used {used} of {have}", show(data));
                    if let WsMessage::Text(t) | WsMessage::Binary(t) = &m {
                        assert!(t.len() <= MAX, "{}: a message over the limit", show(data));
                    }
                    if let WsMessage::Text(t) = &m {
                        assert!(std::str::from_utf8(t).is_ok(), "{}: text not UTF-8", show(data));
                    }
                    got.push(m);
                    at += used;
                    have -= used;
                }
                Ok(Progress::Fragment(used)) => {
                    assert!(
                        used <= have && used > 0,
                        "{}: fragment used {used} of {have}",
                        show(data)
                    );
                    at += used;
                    have -= used;
                }
                Ok(Progress::Need(n)) => {
                    assert!(n > have && n <= MAX + 14, "{}: need {n} with {have}", show(data));
                    if at + have == data.len() {
                        return (got, None);
                    }
                    have = if pieces {
                        n.min(data.len() - at)
                    } else {
                        data.len() - at
                    };
                }
                Err(e) => return (got, Some(e)),
            }
        }
    };
    assert_eq!(read(false), read(true), "{}: split reads disagree", show(data));
}
