//! A run, from request to report: the [`RunRequest`] and the one pipeline that executes it for
//! the CLI and the [`Runtime`] alike ([`pipeline`]); its steps ([`session`]: load, open,
//! discover, select, read); what the connector says of its streams before a read ([`asked`]); the scheduler of partitions ([`schedule`]) and the pagination loop
//! ([`read`]), resuming inside partitions ([`resume`]), pages read in steps ([`steps`]), states in a
//! connector's shape ([`shape`]) and sharded reads ([`shard`]); the
//! report-job orchestrator ([`jobs`]); the operator's [`policy`] and what a manifest hints at ([`hints`]); progress, the stop handle, a read's [`metrics`], and quotas across a tenant's runs ([`tenants`]).

pub mod asked;
pub mod fair;
pub mod hints;
pub mod jobs;
pub mod logs;
pub mod metrics;
pub mod pipeline;
pub mod plugins;
pub mod policy;
pub mod progress;
pub mod read;
pub mod request;
pub mod resume;
pub mod runtime;
pub mod schedule;
pub mod session;
pub mod shape;
pub mod shard;
pub mod steps;
pub mod stop;
pub mod tenants;
