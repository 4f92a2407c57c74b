//! Quotas on a tenant across its runs in one [`crate::Runtime`]: how many of its runs go at
//! once and how much memory they may hold (past either a run waits for others to end, for as
//! long as the quota says, or is refused), an API budget all its runs share, per API host (the
//! Airbyte CDK's `HTTPAPIBudget` holds within one sync only), and per window of time: requests
//! (a request past the window's allowance waits for the next window), guest CPU and response
//! bytes (once the window's allowance is used, a new run waits for the next window or is
//! refused). What the tenant's runs used is readable at any time.

use super::request::RunRequest;
use super::request::{Outcome, RunError, RunReport};
use crate::data::protocol::FailureType;
use crate::net::budget::{CallBudget, Limit, Policy};
use crate::net::hooks::{Attempt, BoxFuture, HttpHooks};
use crate::net::pace::Pacer;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The window of the per-window quotas when the quota names none.
pub const DEFAULT_QUOTA_WINDOW: Duration = Duration::from_secs(60);

/// What one tenant's runs may do together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantQuota {
    /// Runs of the tenant at once (`None`: no limit).
    pub max_runs: Option<usize>,
    /// How long a run past `max_runs` waits for another to end before it is refused (`None`:
    /// refused at once).
    pub wait_for_run: Option<Duration>,
    /// Requests per second to each API host, shared by all the tenant's runs (`None`: each
    /// run's own `--http-max-rate` only).
    pub api_rate_per_host: Option<f64>,
    /// Memory the tenant's runs may hold at once: a run holds its memory limit for each
    /// partition it reads at once (the most its instances can take). A run that would pass it
    /// waits for others to end as long as `wait_for_run` says, else is refused.
    pub max_memory_bytes: Option<u64>,
    /// The window of the three quotas below (`None`: [`DEFAULT_QUOTA_WINDOW`]), counted from
    /// when the quota was set.
    pub window: Option<Duration>,
    /// HTTP requests (attempts) of all the tenant's runs per window: a request past it waits
    /// for the next window.
    pub requests_per_window: Option<u64>,
    /// Guest CPU of the tenant's runs that ended in the window: once used, a new run waits for
    /// the next window as long as `wait_for_run` says, else is refused.
    pub guest_cpu_per_window: Option<Duration>,
    /// Response bytes of the tenant's runs that ended in the window, as `guest_cpu_per_window`.
    pub bytes_per_window: Option<u64>,
    /// The tenant's weight in the runtime's shared partition slots
    /// ([`crate::Runtime::share_partition_slots`]; `None`: 1).
    pub weight: Option<f64>,
}

/// What a tenant's runs used, since the tenant was first named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantUsage {
    /// Runs going now, and the most that went at once.
    pub runs_active: u64,
    pub peak_runs_active: u64,
    pub runs_started: u64,
    /// Runs refused by the quota (never started).
    pub runs_refused: u64,
    /// Of the reads that ended: records written, HTTP requests, response bytes, guest CPU.
    pub records: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub guest_cpu: Duration,
    /// Memory the runs going hold under `max_memory_bytes` (0 without that quota).
    pub memory_held: u64,
    /// Of the current window: guest CPU and response bytes of the runs that ended in it.
    pub window_guest_cpu: Duration,
    pub window_bytes_in: u64,
    /// Partition slots of the runtime's shared ones granted to the tenant's runs.
    pub partition_slots: u64,
    /// Runs that ended (read or failed), and of them those that failed.
    pub runs_ended: u64,
    pub runs_failed: u64,
    /// Of the reads that ended: HTTP retries and denials, time busy guests were paused,
    /// instances made, partitions read and partitions failed.
    pub retries: u64,
    pub denied: u64,
    pub throttled: Duration,
    pub instances: u64,
    pub partitions: u64,
    pub failed_partitions: u64,
    /// How long the runs that ended took, from their start (after the quota let them in).
    pub run_seconds: RunSeconds,
}

/// The upper bounds, in seconds, of [`RunSeconds`]' buckets.
pub const RUN_SECONDS_BUCKETS: [f64; 10] = [0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

/// How long runs took, as a Prometheus histogram counts it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSeconds {
    /// Runs that took at most each bound of [`RUN_SECONDS_BUCKETS`] (cumulative; empty before
    /// the first run).
    pub buckets: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl RunSeconds {
    pub fn observe(&mut self, seconds: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; RUN_SECONDS_BUCKETS.len()];
        }
        for (count, bound) in self.buckets.iter_mut().zip(RUN_SECONDS_BUCKETS) {
            *count += u64::from(seconds <= bound);
        }
        self.sum += seconds;
        self.count += 1;
    }
}

/// One tenant: its quota, the slots of its runs, its shared API budget, its usage.
pub(crate) struct Tenant {
    name: String,
    quota: TenantQuota,
    runs: Option<Arc<Semaphore>>,
    /// Permits of a MiB each, for `max_memory_bytes`.
    memory: Option<Arc<Semaphore>>,
    budget: Option<Arc<ApiBudget>>,
    /// The requests per window, shared by the tenant's runs.
    requests: Option<Arc<CallBudget>>,
    /// When the current window of the per-window quotas ends.
    window_ends: Mutex<Instant>,
    /// Shared with the tenant as it was before its quota was last set: its runs still going
    /// count here when they end.
    usage: Arc<Mutex<TenantUsage>>,
}

/// The tenants of a runtime, by name.
#[derive(Default)]
pub(crate) struct Tenants(Mutex<HashMap<String, Arc<Tenant>>>);

impl Tenants {
    /// Sets a tenant's quota, keeping its usage (runs already going keep the slots they hold,
    /// outside the new quota's count).
    pub fn set(&self, name: &str, quota: TenantQuota) {
        let mut tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let usage = tenants.get(name).map(|t| t.usage.clone()).unwrap_or_default();
        tenants.insert(name.to_string(), Arc::new(Tenant::new(name, quota, usage)));
    }

    /// The tenant, with no quota when none was set.
    pub fn get(&self, name: &str) -> Arc<Tenant> {
        let mut tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let tenant = tenants.entry(name.to_string());
        tenant.or_insert_with(|| Arc::new(Tenant::new(name, TenantQuota::default(), Arc::default()))).clone()
    }

    pub fn usage(&self, name: &str) -> Option<TenantUsage> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(name).map(|t| t.usage())
    }

    /// Every tenant named so far, with its usage, by name.
    pub fn all(&self) -> Vec<(String, TenantUsage)> {
        let tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = tenants.iter().map(|(name, t)| (name.clone(), t.usage())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// The memory a run holds under a tenant's `max_memory_bytes`: its memory limit for each
/// partition it reads at once (the most its instances can take).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemoryAsk {
    pub per_partition: u64,
    pub partitions: usize,
}

impl MemoryAsk {
    pub fn of(request: &RunRequest) -> Self {
        MemoryAsk { per_partition: request.policy.limits.memory_bytes, partitions: request.concurrency.partitions }
    }
}

/// A run of a tenant, counted while it goes.
pub(crate) struct Admitted {
    tenant: Arc<Tenant>,
    _slot: Option<OwnedSemaphorePermit>,
    memory: Option<(OwnedSemaphorePermit, u64)>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let held = self.memory.as_ref().map_or(0, |(_, bytes)| *bytes);
        self.tenant.with_usage(|u| {
            u.runs_active -= 1;
            u.memory_held -= held;
        });
    }
}

const MIB: u64 = 1 << 20;

impl Tenant {
    fn new(name: &str, quota: TenantQuota, usage: Arc<Mutex<TenantUsage>>) -> Self {
        let runs = quota.max_runs.map(|n| Arc::new(Semaphore::new(n.max(1))));
        let budget = quota.api_rate_per_host.map(|rate| Arc::new(ApiBudget(Pacer::new(rate))));
        let memory = quota.max_memory_bytes.map(|b| Arc::new(Semaphore::new(mib(b).min(Semaphore::MAX_PERMITS))));
        let window = window_of(&quota);
        let requests = quota.requests_per_window.map(|n| {
            let limit = Limit::Fixed { limit: u32::try_from(n.max(1)).unwrap_or(u32::MAX), period: window };
            Arc::new(CallBudget::new(vec![Policy { limit, matchers: Vec::new() }]))
        });
        let window_ends = Mutex::new(Instant::now() + window);
        Tenant { name: name.to_string(), quota, runs, memory, budget, requests, window_ends, usage }
    }

    fn window(&self) -> Duration {
        window_of(&self.quota)
    }

    /// Starts a new window when the current one is over (its counts back to zero); answers
    /// when the current one ends.
    fn roll_window(&self) -> Instant {
        let mut ends = self.window_ends.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if now >= *ends {
            let window = self.window();
            let passed = now.duration_since(*ends).as_nanos() / window.as_nanos() + 1;
            *ends += window.saturating_mul(u32::try_from(passed).unwrap_or(u32::MAX));
            self.with_usage(|u| {
                u.window_guest_cpu = Duration::ZERO;
                u.window_bytes_in = 0;
            });
        }
        *ends
    }

    /// Which per-window quota the window has used up, if any.
    fn window_used_up(&self) -> Option<String> {
        let usage = self.usage();
        let window = self.window().as_secs_f64();
        if let Some(cpu) = self.quota.guest_cpu_per_window.filter(|q| usage.window_guest_cpu >= *q) {
            return Some(format!("its guest CPU quota of {:.3} s per {window} s", cpu.as_secs_f64()));
        }
        if let Some(bytes) = self.quota.bytes_per_window.filter(|q| usage.window_bytes_in >= *q) {
            return Some(format!("its quota of {bytes} response bytes per {window} s"));
        }
        None
    }

    /// Waits for a window with CPU and bytes left, as long as `wait_for_run` allows: the reason
    /// of a refusal otherwise.
    async fn wait_for_window(&self) -> Result<(), String> {
        let deadline = self.quota.wait_for_run.map(|w| Instant::now() + w);
        loop {
            let ends = self.roll_window();
            let Some(used) = self.window_used_up() else { return Ok(()) };
            match deadline {
                Some(deadline) if ends <= deadline => tokio::time::sleep_until(ends).await,
                _ => return Err(format!("tenant {:?} used {used}: this run was not started", self.name)),
            }
        }
    }

    async fn hold_memory(&self, ask: MemoryAsk) -> Result<Option<(OwnedSemaphorePermit, u64)>, String> {
        let (Some(memory), Some(quota)) = (&self.memory, self.quota.max_memory_bytes) else { return Ok(None) };
        let bytes = ask.per_partition.saturating_mul(ask.partitions.max(1) as u64);
        let refused = |why: &str| {
            format!(
                "tenant {:?}: this run would hold {} MiB ({} MiB for each of {} partitions at once){why}, past its memory quota of {} MiB: it was not started",
                self.name,
                bytes / MIB,
                ask.per_partition / MIB,
                ask.partitions,
                quota / MIB
            )
        };
        let permits = u32::try_from(mib(bytes)).map_err(|_| refused(""))?;
        if mib(bytes) > mib(quota) {
            return Err(refused(""));
        }
        let acquired = match self.quota.wait_for_run {
            None => memory.clone().try_acquire_many_owned(permits).ok(),
            Some(wait) => {
                tokio::time::timeout(wait, memory.clone().acquire_many_owned(permits)).await.ok().and_then(Result::ok)
            }
        };
        let permit = acquired.ok_or_else(|| refused(" with the tenant's other runs"))?;
        self.with_usage(|u| u.memory_held += bytes);
        Ok(Some((permit, bytes)))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn weight(&self) -> f64 {
        self.quota.weight.unwrap_or(1.0)
    }

    fn with_usage(&self, change: impl FnOnce(&mut TenantUsage)) {
        change(&mut self.usage.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn usage(&self) -> TenantUsage {
        self.usage.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Lets a run start, when the quota allows: at once, after waiting for a slot (of runs at
    /// once, of memory, of a window with CPU and bytes left), or not at all (the report of a run
    /// that never started, saying why).
    pub async fn admit(self: &Arc<Self>, memory: MemoryAsk) -> Result<Admitted, RunReport> {
        let slot = match &self.runs {
            None => None,
            Some(runs) => {
                let acquired = match self.quota.wait_for_run {
                    None => runs.clone().try_acquire_owned().ok(),
                    Some(wait) => {
                        tokio::time::timeout(wait, runs.clone().acquire_owned()).await.ok().and_then(Result::ok)
                    }
                };
                match acquired {
                    Some(slot) => Some(slot),
                    None => return Err(self.refused(self.runs_message())),
                }
            }
        };
        if let Err(message) = self.wait_for_window().await {
            return Err(self.refused(message));
        }
        let memory = match self.hold_memory(memory).await {
            Ok(memory) => memory,
            Err(message) => return Err(self.refused(message)),
        };
        self.with_usage(|u| {
            u.runs_started += 1;
            u.runs_active += 1;
            u.peak_runs_active = u.peak_runs_active.max(u.runs_active);
        });
        Ok(Admitted { tenant: self.clone(), _slot: slot, memory })
    }

    fn runs_message(&self) -> String {
        let limit = self.quota.max_runs.unwrap_or_default();
        let waited = match self.quota.wait_for_run {
            Some(wait) => format!(" (waited {:.1} s for one to end)", wait.as_secs_f64()),
            None => String::new(),
        };
        format!(
            "tenant {:?} already has {limit} run(s) going, its quota of runs at once{waited}: this run was not started",
            self.name
        )
    }

    /// The report of a run the quota did not start (counted as refused).
    fn refused(&self, message: String) -> RunReport {
        self.with_usage(|u| u.runs_refused += 1);
        let result = Err(RunError { message, failure: FailureType::Transient });
        RunReport { result, kept_at: None, stopped: None, output: Ok(()) }
    }

    /// The hooks that hold the tenant's requests to its shared API budget and its requests per
    /// window, if it has them.
    pub fn hooks(&self) -> Vec<Arc<dyn HttpHooks>> {
        let budget = self.budget.clone().map(|b| b as Arc<dyn HttpHooks>);
        let requests = self.requests.clone().map(|b| b as Arc<dyn HttpHooks>);
        budget.into_iter().chain(requests).collect()
    }

    /// Counts what a run that ended used, and how long it took.
    pub fn count(&self, report: &RunReport, took: Duration) {
        self.roll_window();
        self.with_usage(|u| {
            u.runs_ended += 1;
            u.run_seconds.observe(took.as_secs_f64());
            let Ok(Outcome::Read(read)) = &report.result else {
                u.runs_failed += u64::from(report.result.is_err());
                return;
            };
            let usage = &read.usage;
            u.records += usage.records;
            u.requests += usage.requests;
            u.bytes_in += usage.bytes_in;
            u.guest_cpu += usage.guest_cpu;
            u.window_guest_cpu += usage.guest_cpu;
            u.window_bytes_in += usage.bytes_in;
            u.retries += usage.retries;
            u.denied += usage.denied;
            u.throttled += usage.throttled + usage.policy_throttled;
            u.instances += usage.instances;
            for stream in &read.streams {
                let [(_, read), (_, failed), ..] = stream.partitions_by_outcome();
                u.partitions += read;
                u.failed_partitions += failed;
            }
        });
    }
}

/// The window of a quota's per-window limits.
fn window_of(quota: &TenantQuota) -> Duration {
    quota.window.unwrap_or(DEFAULT_QUOTA_WINDOW).max(Duration::from_millis(1))
}

/// Whole MiB, rounded up.
fn mib(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(MIB)).unwrap_or(usize::MAX)
}

/// Requests of all a tenant's runs to one host, spaced at the tenant's rate.
struct ApiBudget(Pacer);

impl HttpHooks for ApiBudget {
    fn before_send<'a>(&'a self, attempt: &'a Attempt<'a>) -> BoxFuture<'a> {
        Box::pin(self.0.wait(attempt.url.host_str().unwrap_or_default()))
    }
}
