//! The edge's request-head parser and the chunked body decoder on arbitrary bytes: no panic, no hang
//! (libFuzzer's `-timeout`), every length they report within the input and the limits, and the chunked
//! decoder gives the same body whether the bytes arrive at once or in pieces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prism::edge::http::parse_head;
use prism::http1::{ChunkError, ChunkedDecoder};

const MAX_HEADER_BYTES: usize = 8192;
const MAX_BODY: usize = 1 << 16;

/// Decodes `input` handed over in pieces of `piece` bytes (a growing buffer, as the edge keeps one).
/// Returns the outcome, the body and how much input was consumed in all.
fn decode_in_pieces(input: &[u8], piece: usize) -> (Result<bool, ChunkError>, Vec<u8>, usize) {
    let mut d = ChunkedDecoder::new(MAX_BODY);
    let mut out = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed = 0;
    for part in input.chunks(piece.max(1)) {
        pending.extend_from_slice(part);
        match d.decode(&pending, &mut out) {
            Ok(used) => {
                assert!(used <= pending.len(), "consumed {used} of {} bytes", pending.len());
                pending.drain(..used);
                consumed += used;
            }
            Err(e) => return (Err(e), out, consumed),
        }
        assert!(
            out.len() <= MAX_BODY,
            "decoded {} bytes past the {MAX_BODY} cap",
            out.len()
        );
        if d.is_done() {
            break;
        }
    }
    (Ok(d.is_done()), out, consumed)
}

/// `PRISM_FUZZ_STRICT=1` turns off the skips for known findings, to check a fix:
/// `PRISM_FUZZ_STRICT=1 cargo fuzz run TARGET crashes/TARGET -- -runs=0` (from fuzz/).
fn strict() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // The findings these skips were for are fixed (fuzz/RESULTS.md): strict unless PRISM_FUZZ_LENIENT is set.
    *STRICT.get_or_init(|| std::env::var_os("PRISM_FUZZ_LENIENT").is_none())
}

fuzz_target!(|data: &[u8]| {
    // The head: the first byte picks the limit so small limits get exercised too.
    let limit = match data.first() {
        Some(b) if b % 4 == 0 => usize::from(*b) * 8,
        _ => MAX_HEADER_BYTES,
    };
    match parse_head(data, limit) {
        Ok(Some(head)) => {
            assert!(head.len <= data.len(), "head len {} > input {}", head.len, data.len());
            assert!(head.len <= limit, "head len {} past the limit {limit}", head.len);
            assert!(
                !(head.chunked && head.content_length.is_some()),
                "both chunked and Content-Length accepted: {:?}",
                String::from_utf8_lossy(&data[..head.len])
            );
            // What follows the head is the body; decode it as chunked whenever the head says so.
            if head.chunked {
                let _ = decode_in_pieces(&data[head.len..], data.len());
            }
        }
        Ok(None) => assert!(
            data.len() <= limit,
            "{} bytes and still no verdict (limit {limit})",
            data.len()
        ),
        Err(_) => {}
    }

    // The whole input as a chunked body: at once, and in pieces of a size taken from the input.
    let (whole, body, used) = decode_in_pieces(data, data.len());
    assert!(used <= data.len());
    let piece = 1 + usize::from(data.last().copied().unwrap_or(0) % 17);
    let (split, split_body, split_used) = decode_in_pieces(data, piece);
    // Known finding (fuzz/RESULTS.md): a size or trailer line longer than 4096 bytes is refused when it
    // arrives in pieces but accepted when the whole line is in one read, so the decoder's verdict depends
    // on how TCP split the body. Inputs with such a line are left out of the comparison.
    let long_line = data.split(|b| *b == b'\n').any(|l| l.len() > 4096);
    if long_line && !strict() {
        return;
    }
    if whole == Ok(true) {
        assert_eq!(split, Ok(true), "done at once but not in pieces of {piece}");
        assert_eq!(body, split_body, "body differs in pieces of {piece}");
        assert_eq!(used, split_used, "consumed differs in pieces of {piece}");
    }
    if split == Ok(true) {
        assert_eq!(whole, Ok(true), "done in pieces of {piece} but not at once");
    }
});
