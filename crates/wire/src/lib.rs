//! Prism's wire vocabulary and the byte codecs both sides of the proxy share: bounds-checked, non-recursive
//! JSON scanning (`jsonscan`), HTTP/1.1 pieces (`http1`: read buffers, the chunked decoder, server-side
//! WebSocket framing) and the JSON-RPC vocabulary every layer speaks (`rpc`: calls, the method table, topic
//! kinds, Solana keys, JSON writers). The lowest layer: it names no other Prism crate.

pub mod http1;
pub mod jsonscan;
pub mod rpc;
