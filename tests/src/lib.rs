//! Shared helpers for Sluice's end-to-end tests and benchmarks, chiefly the demo API server.

pub mod demo_api;
