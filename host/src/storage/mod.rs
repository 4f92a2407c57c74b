//! Storage: runs kept in object storage and re-emitted ([`replay`], "the lake"), and HTTP
//! recordings with their offline replay ([`recording`], hooks of the egress layer). Plain Rust
//! with no wasmtime: it sees the output writer only through its `Sink` and `Batcher` traits and
//! the network only through `HttpHooks`.

pub mod recording;
pub mod replay;
