//! The Solana transaction parser (src/solana/tx.rs) on arbitrary bytes: `Transaction::parse` on the raw
//! wire bytes, and `decode_payload` (base58 and base64, as clients send them) followed by `parse` on what
//! it decodes. Neither may panic or hang; whatever parses must not claim more than the input held.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prism::solana::tx::{decode_payload, Encoding, Transaction};

fuzz_target!(|data: &[u8]| {
    let _ = Transaction::parse(data);
    for encoding in [Encoding::Base58, Encoding::Base64] {
        if let Ok(bytes) = decode_payload(data, encoding) {
            let _ = Transaction::parse(&bytes);
        }
    }
});
