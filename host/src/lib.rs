//! Sluice: runs untrusted data-source connectors compiled to WebAssembly components.
//!
//! The host owns everything that is hard to get right or dangerous to hand to untrusted code:
//! HTTP (egress policy, retries), state, scheduling and the output stream. A connector only
//! knows its API: how to slice a stream into partitions and read a page of one.
//!
//! Modules, one per concern: [`engine`] (wasmtime, the compiled-component cache), [`sandbox`]
//! (what a guest can see), [`egress`] (HTTP), [`connector`] (instances and calls), [`read`] (the
//! pagination loop), [`state`] (cursors), [`catalog`], [`protocol`] (messages and the writer),
//! [`replay`] (runs kept in object storage, and re-emitted), [`cli`] and [`commands`].

pub mod bindings;
pub mod catalog;
pub mod cli;
pub mod commands;
pub mod conformance;
pub mod connector;
pub mod egress;
pub mod engine;
pub mod jobs;
pub mod limits;
pub mod policy;
pub mod progress;
pub mod protocol;
pub mod read;
pub mod recording;
pub mod replay;
pub mod runtime;
pub mod sandbox;
pub mod schedule;
pub mod secrets;
pub mod session;
pub mod signals;
pub mod state;
