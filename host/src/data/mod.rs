//! The data a run reads and writes, in plain Rust with no wasmtime: the messages and the single
//! writer ([`protocol`]), a connector's `--about` ([`about`]), incremental state ([`state`]), catalogs ([`catalog`]), the bounded
//! reader of every file the host takes as input ([`files`]), the config's
//! check against the spec ([`config`]), the bounds on a connector's JSON Schemas ([`schema`]) and the secrets masked out of everything the host says
//! ([`secrets`]).

pub mod about;
pub mod catalog;
pub mod config;
pub mod files;
pub mod protocol;
pub mod schema;
pub mod secrets;
pub mod state;
