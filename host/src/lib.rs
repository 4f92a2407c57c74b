//! Sluice: runs untrusted data-source connectors compiled to WebAssembly components.
//!
//! The host owns everything that is hard to get right or dangerous to hand to untrusted code:
//! HTTP (egress policy, retries), state, scheduling and the output stream. A connector only
//! knows its API: how to slice a stream into partitions and read a page of one.
//!
//! An embedder needs [`Runtime`] (one per process: the engine and the compiled-component cache),
//! a [`RunRequest`] per run (plugin, config, [`Action`], [`Policy`] with its [`Limits`], HTTP
//! and storage options, a sink), and gets a [`RunReport`] back ([`ReadReport`] and [`RunUsage`]
//! for a read). The CLI is built on exactly that; see docs/embedding.md and
//! docs/architecture.md.
//!
//! ```no_run
//! use sluice_host::{Policy, RunRequest, Runtime};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::new("/var/cache/sluice".into(), true)?;
//! let mut request = RunRequest::new("plugin.wasm", serde_json::json!({"base_url": "https://api.example.com"}),
//!     Box::new(std::io::stdout()));
//! request.policy = Policy { allow_hosts: vec!["api.example.com".into()], ..Default::default() };
//! let report = runtime.run(request).await.read()?;
//! println!("{}", report.summary_line());
//! # Ok(())
//! # }
//! ```
//!
//! The modules, bottom to top (a module imports only those below it): `bindings` (the WIT
//! contract), `data` (protocol and the writer, state, catalogs, secrets), `net` (egress),
//! `guest` (wasmtime: engine, sandbox, instances), `storage` (the replay lake, HTTP
//! recordings), `run` (the pipeline, scheduling, report jobs), `conformance` (`host test`) and
//! `cli`.

mod bindings;
mod cli;
mod conformance;
mod data;
#[cfg(test)]
mod fuzz;
mod guest;
mod net;
mod run;
mod storage;

// The unit tests' allocator counts what each thread holds: the fuzz targets' memory bounds.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: fuzz::alloc::Counting = fuzz::alloc::Counting;

pub use data::catalog::Selected;
pub use data::protocol::{FailureType, Format, PluginInfo};
pub use data::state::InputState;
pub use guest::compile::{COMPILE_CHILD_ARG, CompileLimits, compile_child_main, enable_compile_helper};
pub use guest::limits::{Limits, Throttle};
pub use net::HttpOptions;
pub use net::hooks::{Answer, Attempt, BoxFuture, HttpHooks, Outcome as AttemptOutcome, Timing};
pub use run::fair::FairShareTicket;
pub use run::jobs::JobOptions;
pub use run::policy::{Policy, PolicySource};
pub use run::read::StreamSummary;
pub use run::request::{Action, Outcome, ReadReport, RunError, RunReport, RunRequest, RunUsage, Selection};
pub use run::runtime::{Runtime, RuntimeOptions};
pub use run::schedule::Concurrency;
pub use run::shard::Shard;
pub use run::stop::Stop;
pub use run::tenants::{RUN_SECONDS_BUCKETS, RunSeconds, TenantQuota, TenantUsage};
pub use storage::replay::{
    Cadence, Compression, LakeOptions, Location, Manifest, ReplayOptions, ReplayReport, Segment, StorageOptions,
    current_manifest, rebuild_manifest, replay,
};

/// The HTTP bindings' types a hook sees.
pub use bindings::{HttpError, Request as HttpRequest, Response as HttpResponse};

/// Declarative manifests: how the host tells one from a component, and the JSON the declarative
/// engine takes (a `RunRequest` whose plugin is a `.yaml` file runs it in the engine).
pub mod manifest {
    pub use crate::guest::manifest::{MANIFEST_KEY, is_manifest, parse};
}

/// Internals the benchmark binaries measure in isolation (a guest call, the writer). Not a
/// stable API.
/// The `host` command line, for the binary and the benches: not part of the library's API.
#[doc(hidden)]
pub mod command_line {
    pub use crate::cli::package::packaged_args;
    pub use crate::cli::{Cli, end_with_process, execute};
}

#[doc(hidden)]
pub mod internals {
    pub use crate::data::protocol::{Output, checked_record};
    pub use crate::guest::connector::Connector;
    pub use crate::guest::engine::Engine;
    pub use crate::net::{Egress, EgressPolicy};
}

/// docs/embedding.md, whose example is compiled as a doc test so the guide stays true.
#[cfg(doctest)]
#[doc = include_str!("../../docs/embedding.md")]
pub struct EmbeddingGuide;
