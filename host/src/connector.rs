//! A loaded plugin bound to one config and one egress policy, and its instances. Every call goes
//! to an instance; an instance serves one partition (or one listing) and is dropped after it,
//! and after any trap.

use crate::bindings::{self, Capabilities, GuestError, Page, Partition, PartitionBatch, Stream};
use crate::egress::Egress;
use crate::engine::Plugin;
use crate::limits::{EPOCH_TICK, Limits};
use crate::protocol::FailureType;
use crate::sandbox::{GuestLog, GuestState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use wasmtime::{Store, UpdateDeadline};

/// What a guest call can end in besides success.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The connector returned an error.
    Guest(GuestError),
    /// The guest trapped or broke the contract; the instance is unusable.
    Trap(String),
}

impl CallError {
    pub fn failure_type(&self) -> FailureType {
        match self {
            CallError::Guest(GuestError::Config(_)) => FailureType::Config,
            CallError::Guest(GuestError::Transient(_)) => FailureType::Transient,
            CallError::Guest(GuestError::System(_)) | CallError::Trap(_) => FailureType::System,
        }
    }

    pub fn message(&self) -> String {
        match self {
            CallError::Guest(GuestError::Config(m) | GuestError::Transient(m) | GuestError::System(m)) => m.clone(),
            CallError::Trap(m) => format!("the connector crashed: {m}"),
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// CPU ticks a call may use at full speed; after that it runs one tick in `1 + BUSY_PAUSE_TICKS`.
const BUSY_GRACE_TICKS: u64 = 3;
const BUSY_PAUSE_TICKS: u32 = 9;

/// A plugin with a config, ready to make instances.
pub struct Connector {
    pub plugin: Arc<Plugin>,
    pub config: String,
    pub egress: Arc<Egress>,
    pub limits: Limits,
    /// Accounting across every instance of this connector.
    pub usage: Arc<Usage>,
}

/// What a run's guests used, for the run summary and the library API.
#[derive(Debug, Default)]
pub struct Usage {
    /// Time spent in guest code, in nanoseconds: calls' wall-clock time less their HTTP
    /// requests and throttling pauses. (The CPU budget counts epoch ticks instead, which is
    /// coarse: fine for stopping a loop, too coarse to report.)
    pub guest_nanos: AtomicU64,
    /// The largest linear memory any one instance grew to, bytes.
    pub peak_memory_bytes: AtomicU64,
    pub instances: AtomicU64,
}

impl Usage {
    pub fn guest_cpu(&self) -> Duration {
        Duration::from_nanos(self.guest_nanos.load(Ordering::Relaxed))
    }
}

/// One guest instance with its own store.
pub struct Instance {
    store: Store<GuestState>,
    bindings: bindings::Connector,
    /// The `async-jobs` exports, for plugins that have them.
    jobs: Option<bindings::AsyncJobs>,
    limits: Limits,
    usage: Arc<Usage>,
}

impl Connector {
    pub fn new(plugin: Arc<Plugin>, config: String, egress: Arc<Egress>, limits: Limits) -> Self {
        Connector { plugin, config, egress, limits, usage: Arc::default() }
    }

    pub async fn instance(&self) -> Result<Instance, CallError> {
        let mut store = Store::new(self.plugin.pre.engine(), GuestState::new(self.egress.clone(), &self.limits));
        store.limiter(|state| &mut state.limiter);
        // The CPU budget: every epoch tick spent in guest code counts; between ticks the guest
        // yields, so one busy guest cannot hold a worker thread. A call that keeps computing past
        // a grace period is paused between ticks as well, so an endless loop takes a small share
        // of the machine until its budget runs out instead of a whole core.
        let budget = self.limits.cpu_ticks_per_call();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            // The tick that passed while the host worked (HTTP) or while paused is not the guest's.
            if std::mem::take(&mut state.back_from_host) || std::mem::take(&mut state.paused) {
                return Ok(UpdateDeadline::Yield(1));
            }
            state.cpu_ticks += 1;
            if state.cpu_ticks > budget {
                return Err(wasmtime::format_err!("CPU budget exceeded"));
            }
            if state.cpu_ticks > BUSY_GRACE_TICKS {
                state.paused = true;
                state.not_guest += EPOCH_TICK * BUSY_PAUSE_TICKS;
                return Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::time::sleep(EPOCH_TICK * BUSY_PAUSE_TICKS))));
            }
            Ok(UpdateDeadline::Yield(1))
        });
        self.usage.instances.fetch_add(1, Ordering::Relaxed);
        let instance = match tokio::time::timeout(
            self.limits.call_timeout(),
            self.plugin.pre.instance_pre().instantiate_async(&mut store),
        )
        .await
        {
            Ok(Ok(i)) => i,
            Ok(Err(e)) => return Err(CallError::Trap(format!("cannot instantiate: {e:#}"))),
            Err(_) => return Err(CallError::Trap("instantiation timed out".into())),
        };
        let loaded = self.plugin.indices.load(&mut store, &instance).and_then(|bindings| {
            let jobs = self.plugin.jobs.as_ref().map(|j| j.load(&mut store, &instance)).transpose()?;
            Ok((bindings, jobs))
        });
        let (bindings, jobs) = loaded.map_err(|e| CallError::Trap(format!("cannot instantiate: {e:#}")))?;
        let mut instance = Instance { bindings, jobs, store, limits: self.limits.clone(), usage: self.usage.clone() };
        instance.store.data_mut().cpu_ticks = 0;
        Ok(instance)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let peak = self.store.data().limiter.peak_memory as u64;
        self.usage.peak_memory_bytes.fetch_max(peak, Ordering::Relaxed);
    }
}

// The generated export bindings take `&String`; passing ours through avoids a copy per call.
#[allow(clippy::ptr_arg)]
impl Instance {
    pub fn take_logs(&mut self) -> Vec<GuestLog> {
        self.store.data_mut().take_logs()
    }

    /// Starts a call; `context` (JSON) labels its HTTP requests in recordings.
    fn begin(&mut self, context: String) {
        let state = self.store.data_mut();
        state.cpu_ticks = 0;
        state.context = context;
        state.call_started = std::time::Instant::now();
        state.not_guest = Duration::ZERO;
    }

    /// Turns the outcome of a call into a clear error: the limit that stopped the guest, or
    /// its trap.
    fn finish<T>(&mut self, outcome: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>) -> Result<T, CallError> {
        let state = self.store.data();
        let ticks = state.cpu_ticks;
        let guest = state.call_started.elapsed().saturating_sub(state.not_guest);
        self.usage.guest_nanos.fetch_add(guest.as_nanos() as u64, Ordering::Relaxed);
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Err(_) => Err(CallError::Trap(format!(
                "the call took longer than its wall-clock limit of {} ms",
                self.limits.call_timeout_ms
            ))),
            Ok(Err(e)) => {
                let state = self.store.data();
                let message = if let Some(memory) = &state.limiter.exceeded {
                    memory.clone()
                } else if ticks > self.limits.cpu_ticks_per_call() {
                    format!(
                        "the connector used more than its CPU budget of {} ms in one call (an endless loop?)",
                        self.limits.cpu_ms_per_call
                    )
                } else {
                    match e.downcast_ref::<wasmtime::Trap>() {
                        Some(wasmtime::Trap::StackOverflow) => {
                            "the connector overflowed its stack (recursion too deep)".to_string()
                        }
                        // The trap itself; its wasm backtrace is noise to an operator.
                        Some(trap) => trap.to_string(),
                        None => e.to_string(),
                    }
                };
                Err(CallError::Trap(message))
            }
        }
    }

    fn flatten<T>(
        &mut self,
        outcome: Result<wasmtime::Result<Result<T, GuestError>>, tokio::time::error::Elapsed>,
    ) -> Result<T, CallError> {
        self.finish(outcome)?.map_err(CallError::Guest)
    }

    pub async fn spec(&mut self) -> Result<String, CallError> {
        self.begin(r#"{"call":"spec"}"#.to_string());
        let call = self.bindings.sluice_connector_source().call_spec(&mut self.store);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.finish(outcome)
    }

    pub async fn capabilities(&mut self, config: &String) -> Result<Capabilities, CallError> {
        self.begin(r#"{"call":"capabilities"}"#.to_string());
        let call = self.bindings.sluice_connector_source().call_capabilities(&mut self.store, config);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    pub async fn check(&mut self, config: &String) -> Result<(), CallError> {
        self.begin(r#"{"call":"check"}"#.to_string());
        let call = self.bindings.sluice_connector_source().call_check(&mut self.store, config);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    pub async fn discover(&mut self, config: &String) -> Result<Vec<Stream>, CallError> {
        self.begin(r#"{"call":"discover"}"#.to_string());
        let call = self.bindings.sluice_connector_source().call_discover(&mut self.store, config);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    pub async fn partitions(
        &mut self,
        config: &String,
        stream: &String,
        state: Option<&String>,
        token: Option<&String>,
    ) -> Result<PartitionBatch, CallError> {
        self.begin(serde_json::json!({"stream": stream, "listing": true}).to_string());
        let call =
            self.bindings.sluice_connector_source().call_partitions(&mut self.store, config, stream, state, token);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    pub async fn read_page(
        &mut self,
        config: &String,
        partition: &Partition,
        token: Option<&String>,
    ) -> Result<Page, CallError> {
        let key: serde_json::Value = serde_json::from_str(&partition.key).unwrap_or(serde_json::Value::Null);
        self.begin(serde_json::json!({"stream": partition.stream, "partition": key}).to_string());
        let call = self.bindings.sluice_connector_source().call_read_page(&mut self.store, config, partition, token);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    fn jobs(&self) -> Result<&bindings::AsyncJobs, CallError> {
        self.jobs
            .as_ref()
            .ok_or_else(|| CallError::Guest(GuestError::System("the connector does not export async-jobs".into())))
    }

    /// Which streams are read through jobs; `None` for connectors without `async-jobs`.
    pub async fn job_settings(&mut self, config: &String) -> Result<Option<bindings::JobSettings>, CallError> {
        if self.jobs.is_none() {
            return Ok(None);
        }
        self.begin(r#"{"call":"job-settings"}"#.to_string());
        let jobs = self.jobs()?.clone();
        let call = jobs.call_settings(&mut self.store, config);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome).map(Some)
    }

    pub async fn create_job(&mut self, config: &String, partition: &Partition) -> Result<String, CallError> {
        self.begin(job_context(partition, "create"));
        let jobs = self.jobs()?.clone();
        let call = jobs.call_create_job(&mut self.store, config, partition);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    pub async fn poll_job(
        &mut self,
        config: &String,
        partition: &Partition,
        job: &String,
    ) -> Result<bindings::JobStatus, CallError> {
        self.begin(job_context(partition, "poll"));
        let jobs = self.jobs()?.clone();
        let call = jobs.call_poll_job(&mut self.store, config, job);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    pub async fn read_result(
        &mut self,
        config: &String,
        partition: &Partition,
        job: &String,
        download: &String,
        token: Option<&String>,
    ) -> Result<Page, CallError> {
        self.begin(job_context(partition, "read-result"));
        let jobs = self.jobs()?.clone();
        let call = jobs.call_read_result(&mut self.store, config, job, download, token);
        let outcome = tokio::time::timeout(self.limits.call_timeout(), call).await;
        self.flatten(outcome)
    }

    /// Aborts (`abort`) or deletes a job.
    pub async fn end_job(
        &mut self,
        config: &String,
        partition: &Partition,
        job: &String,
        abort: bool,
    ) -> Result<(), CallError> {
        self.begin(job_context(partition, if abort { "abort" } else { "delete" }));
        let jobs = self.jobs()?.clone();
        let outcome = if abort {
            tokio::time::timeout(self.limits.call_timeout(), jobs.call_abort_job(&mut self.store, config, job)).await
        } else {
            tokio::time::timeout(self.limits.call_timeout(), jobs.call_delete_job(&mut self.store, config, job)).await
        };
        self.flatten(outcome)
    }
}

/// The recording label of a job call for `partition`.
fn job_context(partition: &Partition, step: &str) -> String {
    let key: serde_json::Value = serde_json::from_str(&partition.key).unwrap_or(serde_json::Value::Null);
    serde_json::json!({"stream": partition.stream, "partition": key, "job": step}).to_string()
}
