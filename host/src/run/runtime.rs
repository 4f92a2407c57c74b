//! Many tenants in one process: one engine and one compiled-component cache shared by every run,
//! each run with its own policy, limits, egress, storage and accounting. The CLI runs through
//! it too, as a runtime of one run. The embedding example is in the crate docs (`lib.rs`) and docs/embedding.md.

use super::fair::FairShare;
use super::plugins::Plugins;
use super::policy::{Policy, PolicySource};
use super::request::{Outcome, RunError, RunReport, RunRequest};
use super::session::{self, HttpSetup};
use super::tenants::{MemoryAsk, TenantQuota, TenantUsage, Tenants};
use crate::data::protocol::Output;
use crate::guest::cache::ComponentCache;
use crate::guest::compile::CompileLimits;
use crate::guest::connector::Connector;
use crate::guest::engine::{Engine, Plugin};
use crate::guest::limits::Limits;
use crate::net::HttpOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a [`Runtime`] is built.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Where compiled components are cached.
    pub cache_dir: PathBuf,
    /// Instances from the pooling allocator (falls back to on-demand allocation where the
    /// address space does not allow it; [`Runtime::pooling`] tells which).
    pub pooling: bool,
    /// The guests' WebAssembly stack: an engine setting, the same for every run.
    pub wasm_stack_bytes: usize,
    /// Slots of the pool: instances alive at once (more wait for one). Reserving them costs
    /// start-up time, so a single run asks for what its concurrency needs.
    pub pooled_instances: u32,
    /// What compiling a plugin may cost, and where it happens (the default compiles in this
    /// process; [`CompileLimits::in_child_process`] bounds its time and memory as well).
    pub compile: CompileLimits,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            cache_dir: ComponentCache::default_dir(),
            pooling: false,
            wasm_stack_bytes: Limits::default().wasm_stack_bytes,
            pooled_instances: crate::guest::engine::POOLED_INSTANCES,
            compile: CompileLimits::default(),
        }
    }
}

/// Shared by every run of the process.
pub struct Runtime {
    plugins: Plugins,
    tenants: Tenants,
    /// The partition slots tenants share by weight, once [`Runtime::share_partition_slots`].
    fair: std::sync::OnceLock<Arc<FairShare>>,
}

impl Runtime {
    /// `pooling` asks for the pooling allocator, falling back to on-demand allocation where the
    /// address space does not allow it.
    pub fn new(cache_dir: PathBuf, pooling: bool) -> anyhow::Result<Self> {
        Self::with_options(RuntimeOptions { cache_dir, pooling, ..Default::default() })
    }

    pub fn with_options(options: RuntimeOptions) -> anyhow::Result<Self> {
        let engine = Engine::with_options(
            options.cache_dir,
            options.pooling,
            options.wasm_stack_bytes,
            options.pooled_instances,
        )?
        .with_compile(options.compile);
        Ok(Runtime { plugins: Plugins::new(Arc::new(engine)), tenants: Tenants::default(), fair: Default::default() })
    }

    /// True when instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.plugins.engine().pooling()
    }

    /// Runs one request to the end. Its messages go to the request's sink; the report says
    /// what the run did (per-stream results and guest usage for a read) or why it failed.
    pub async fn run(&self, request: RunRequest) -> RunReport {
        let span = tracing::info_span!(
            "run",
            command = request.action.name(),
            plugin = %request.plugin.file_name().unwrap_or_default().to_string_lossy(),
            outcome = tracing::field::Empty,
            records = tracing::field::Empty,
        );
        let report =
            tracing::Instrument::instrument(super::pipeline::execute(&self.plugins, request), span.clone()).await;
        span.record("outcome", report.outcome());
        if let Ok(Outcome::Read(read)) = &report.result {
            span.record("records", read.usage.records);
        }
        report
    }

    /// Shares `slots` partitions at once between the tenants' runs ([`Runtime::run_for`]) by
    /// their quotas' weights: while more partitions want to read, each slot that frees goes to
    /// the tenant furthest behind its share. Once per runtime; false when already shared.
    pub fn share_partition_slots(&self, slots: usize) -> bool {
        self.fair.set(FairShare::new(slots)).is_ok()
    }

    /// Sets a tenant's quota across its runs ([`Runtime::run_for`]); runs already going keep
    /// the slots they hold, and the tenant's usage is kept.
    pub fn set_tenant(&self, tenant: &str, quota: TenantQuota) {
        self.tenants.set(tenant, quota);
    }

    /// Runs `request` as one of `tenant`'s runs: it starts when the tenant's quota allows (runs
    /// at once, memory, the window's guest CPU and bytes: waiting as long as the quota says, else
    /// its report is the refusal, and nothing is written to its sink), its requests share the
    /// tenant's API budget and requests per window with the tenant's other runs, and what it used
    /// is added to the tenant's usage.
    pub async fn run_for(&self, tenant: &str, mut request: RunRequest) -> RunReport {
        let tenant = self.tenants.get(tenant);
        let admitted = match tenant.admit(MemoryAsk::of(&request)).await {
            Ok(admitted) => admitted,
            Err(refused) => return refused,
        };
        request.http_hooks.extend(tenant.hooks());
        if let Some(fair) = self.fair.get() {
            fair.set_weight(tenant.name(), tenant.weight());
            request.concurrency.fair_share = Some(fair.ticket(tenant.name()));
        }
        let started = std::time::Instant::now();
        let report = self.run(request).await;
        tenant.count(&report, started.elapsed());
        drop(admitted);
        report
    }

    /// Every tenant's usage in the Prometheus text format (version 0.0.4), each sample labelled
    /// with its `tenant`: for an embedder to serve on its metrics endpoint (`GET /metrics`) or
    /// push. Counters since each tenant was first named, gauges as they are now, and a histogram
    /// of how long its runs took.
    pub fn prometheus_text(&self) -> String {
        let tenants: Vec<(String, TenantUsage)> =
            self.tenants.all().into_iter().map(|(name, usage)| (name.clone(), self.with_slots(&name, usage))).collect();
        super::metrics::tenants_text(&tenants)
    }

    /// What `tenant`'s runs used so far (`None` for a tenant never named).
    pub fn tenant_usage(&self, tenant: &str) -> Option<TenantUsage> {
        Some(self.with_slots(tenant, self.tenants.usage(tenant)?))
    }

    /// A tenant's usage with the shared partition slots granted to it (the fair share keeps them).
    fn with_slots(&self, tenant: &str, mut usage: TenantUsage) -> TenantUsage {
        usage.partition_slots = self.fair.get().map_or(0, |fair| fair.granted(tenant));
        usage
    }

    /// The plugin at `path`, loaded once per content (see [`Plugins::plugin`]).
    pub(crate) async fn plugin(&self, path: &Path, policy: &str, out: &Output) -> Result<Arc<Plugin>, RunError> {
        self.plugins.plugin(path, policy, out).await
    }

    /// A plugin opened with a config as `check` and `discover` open it (for the conformance
    /// kit, which then calls the connector directly).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn open(
        &self,
        path: &Path,
        config: String,
        policy: &Policy,
        source: &PolicySource,
        http: HttpOptions,
        http_replay: Option<String>,
        out: &Output,
    ) -> Result<Connector, RunError> {
        let replay = session::load_recording(http_replay).await?;
        let plugin = self.plugins.plugin(path, &source.described, out).await?;
        for warning in &source.warnings {
            out.log("WARN", warning).await?;
        }
        let http = HttpSetup { options: http, replay, ..Default::default() };
        session::open(plugin, config, policy, http, out, false, false).await
    }
}
