//! Micro-benchmarks of the per-request CPU work on Prism's data path:
//! - envelope parse: a small call, a 100-item batch, a 64 KiB raw transaction (`eth_sendRawTransaction`);
//! - the upstream request build: the JSON-RPC call with Prism's own id plus the HTTP/1.1 POST around it;
//! - the whole CPU path of one forwarded call without sockets: parse → build → validate the upstream answer →
//!   splice the client's id into the reply → HTTP response.
//!
//! Run: `cargo bench --bench envelope` (each bench ~2.5 s).

use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use prism::core::write_upstream_call;
use prism::edge::envelope::{Envelope, EnvelopeLimits, EnvelopeParser};
use prism::edge::reply::{write_answer, write_http, ResponseMeta};
use prism::transport::validate::check_response;
use prism::transport::write_post;

const SMALL: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#;

fn batch_100() -> Vec<u8> {
    let mut b = Vec::from(&b"["[..]);
    for i in 0..100 {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(
            format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"eth_getBalance","params":["0x{:040x}","latest"]}}"#,
                0xdead_beef_u64 + i
            )
            .as_bytes(),
        );
    }
    b.push(b']');
    b
}

fn raw_tx_64k() -> Vec<u8> {
    // 64 KiB of hex after the 0x prefix, as a large eth_sendRawTransaction carries.
    let hex: String = (0..64 * 1024)
        .map(|i| b"0123456789abcdef"[(i * 7 + 3) % 16] as char)
        .collect();
    format!(r#"{{"jsonrpc":"2.0","id":"tx-1","method":"eth_sendRawTransaction","params":["0x{hex}"]}}"#).into_bytes()
}

/// A call with `n` extra top-level keys (`"k0":0,...`): 24 is past the envelope's inline duplicate check,
/// 80 000 is the body that once took 30 s (pairwise duplicate-key comparison).
fn many_keys(n: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId""#);
    for i in 0..n {
        s.push_str(&format!(r#","k{i}":{i}"#));
    }
    s.push('}');
    s.into_bytes()
}

fn limits() -> EnvelopeLimits {
    EnvelopeLimits {
        max_batch: 1000,
        max_depth: 64,
    }
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope_parse");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut parser = EnvelopeParser::new(limits());

    // Sanity: every input parses to what the bench claims to measure.
    assert!(matches!(parser.parse(SMALL), Ok(Envelope::Single(Ok(_)))));
    let batch = batch_100();
    assert!(
        matches!(parser.parse(&batch), Ok(Envelope::Batch(ref v)) if v.len() == 100 && v.iter().all(|i| i.is_ok()))
    );
    let tx = raw_tx_64k();
    assert!(matches!(parser.parse(&tx), Ok(Envelope::Single(Ok(_)))));

    g.throughput(Throughput::Bytes(SMALL.len() as u64));
    g.bench_function("small_call", |b| {
        b.iter(|| drop(black_box(parser.parse(black_box(SMALL)))))
    });
    g.throughput(Throughput::Bytes(batch.len() as u64));
    g.bench_function("batch_100", |b| {
        b.iter(|| drop(black_box(parser.parse(black_box(&batch)))))
    });
    g.throughput(Throughput::Bytes(tx.len() as u64));
    g.bench_function("raw_tx_64k", |b| {
        b.iter(|| drop(black_box(parser.parse(black_box(&tx)))))
    });
    let keys_24 = many_keys(24);
    assert!(matches!(parser.parse(&keys_24), Ok(Envelope::Single(Ok(_)))));
    g.throughput(Throughput::Bytes(keys_24.len() as u64));
    g.bench_function("keys_24", |b| {
        b.iter(|| drop(black_box(parser.parse(black_box(&keys_24)))))
    });
    // One timed parse first: a quadratic parser would make the measured bench run for hours.
    let keys_80k = many_keys(80_000);
    let started = std::time::Instant::now();
    assert!(matches!(parser.parse(&keys_80k), Ok(Envelope::Single(Ok(_)))));
    let once = started.elapsed();
    eprintln!(
        "envelope_parse/keys_80k: one parse of {} bytes took {once:?}",
        keys_80k.len()
    );
    if once < Duration::from_secs(1) {
        g.throughput(Throughput::Bytes(keys_80k.len() as u64));
        g.sample_size(20);
        g.bench_function("keys_80k", |b| {
            b.iter(|| drop(black_box(parser.parse(black_box(&keys_80k)))))
        });
    }
    g.finish();
}

fn request_build(c: &mut Criterion) {
    let mut g = c.benchmark_group("upstream_request");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut parser = EnvelopeParser::new(limits());
    let Ok(Envelope::Single(Ok(call))) = parser.parse(SMALL) else {
        panic!("small call must parse")
    };
    let (method, params) = (call.method.to_string(), call.params.map(|p| p.to_vec()));
    let mut body = Vec::with_capacity(256);
    let mut out = Vec::with_capacity(512);
    let mut id = 0u64;
    g.bench_function("build_small_call", |b| {
        b.iter(|| {
            id += 1;
            body.clear();
            out.clear();
            write_upstream_call(
                &mut body,
                black_box(id),
                black_box(&method),
                black_box(params.as_deref()),
            );
            write_post(&mut out, black_box("/v2/key"), black_box("rpc.example.com"), b"", &body);
            black_box(out.len())
        })
    });

    let tx = raw_tx_64k();
    let Ok(Envelope::Single(Ok(call))) = parser.parse(&tx) else {
        panic!("raw tx must parse")
    };
    let (method, params) = (call.method.to_string(), call.params.map(|p| p.to_vec()));
    g.throughput(Throughput::Bytes(tx.len() as u64));
    g.bench_function("build_raw_tx_64k", |b| {
        b.iter(|| {
            id += 1;
            body.clear();
            out.clear();
            write_upstream_call(
                &mut body,
                black_box(id),
                black_box(&method),
                black_box(params.as_deref()),
            );
            write_post(&mut out, black_box("/v2/key"), black_box("rpc.example.com"), b"", &body);
            black_box(out.len())
        })
    });
    g.finish();
}

/// Everything a shard computes for one forwarded small call, minus the syscalls.
fn hot_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("forward_cpu_path");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut parser = EnvelopeParser::new(limits());
    let (mut body, mut req, mut reply, mut resp) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let upstream_answer: &[u8] = br#"{"jsonrpc":"2.0","id":42,"result":"0x1"}"#;
    g.bench_function("small_call", |b| {
        b.iter(|| {
            let Ok(Envelope::Single(Ok(call))) = parser.parse(black_box(SMALL)) else {
                unreachable!()
            };
            body.clear();
            req.clear();
            write_upstream_call(&mut body, 42, &call.method, call.params);
            write_post(&mut req, "/", "127.0.0.1:8545", b"", &body);
            let ans = check_response(black_box(upstream_answer), 42).expect("valid answer");
            reply.clear();
            resp.clear();
            write_answer(
                &mut reply,
                call.id.unwrap_or(b"null"),
                ans.is_error,
                &upstream_answer[ans.value],
            );
            write_http(
                &mut resp,
                200,
                &reply,
                &ResponseMeta {
                    keep_alive: true,
                    ..Default::default()
                },
            );
            black_box((req.len(), resp.len()))
        })
    });
    g.finish();
}

criterion_group!(benches, parse, request_build, hot_path);
criterion_main!(benches);
