//! End-to-end tests: the `host` binary, real plugins built by `just build-plugins`, and the demo
//! API on a real loopback socket. Each test plugin is paired with the tests that use it.

mod support;

mod cdk;
mod certified;
mod commands;
mod concurrency;
mod conformance;
mod contract;
mod custom;
mod declarative;
mod guest_behaviour;
mod hostile;
mod init;
mod jobs;
mod languages;
mod metrics;
mod platform;
mod policy;
mod read;
mod recording;
mod replay;
mod shards;
mod singer;
mod tenants;
