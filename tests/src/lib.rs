//! Shared helpers for Sluice's end-to-end tests and benchmarks: the demo API server, a mock API
//! of canned answers (for real connectors' manifests), and a real S3-protocol server on loopback.

pub mod components;
pub mod demo_api;
pub mod fixture_api;
pub mod otlp;
pub mod plain_http;
pub mod s3_server;
