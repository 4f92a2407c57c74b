//! A loaded plugin bound to one config and one egress policy, and its instances. Every call goes
//! to an instance; an instance serves one partition (or one listing) and is dropped after it,
//! and after any trap.

use crate::bindings::{self, Capabilities, GuestError, Page, Partition, PartitionBatch, Stream};
use crate::data::protocol::FailureType;
use crate::guest::engine::Plugin;
use crate::guest::limits::{Limits, Throttle};
use crate::guest::pool::PoolNeeds;
use crate::guest::sandbox::{GuestLog, GuestState};
use crate::net::Egress;
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

/// Guest time a call may use before it is busy: then it gives way to calls within theirs, and
/// shares the cores with other busy ones at one epoch tick in ten, while the cores are wanted.
const BUSY_GRACE: Duration = Duration::from_millis(10);
const BUSY_PAUSE: Duration = Duration::from_millis(90);

/// The most a busy call waits at once for calls within their grace to leave it a core; then it
/// runs a tick, so it is slowed, never starved.
const BUSY_GIVE_WAY: Duration = Duration::from_millis(500);
/// How often a waiting busy call looks whether the cores are free for it again.
const BUSY_LOOK_AGAIN: Duration = Duration::from_millis(5);

/// Why a busy call is paused at an epoch tick.
#[derive(Clone, Copy)]
enum Pause {
    /// Calls within their grace fill the cores: it waits while they do (at most
    /// [`BUSY_GIVE_WAY`]).
    GiveWay,
    /// Busy calls alone want more cores than there are: [`BUSY_PAUSE`].
    Contended,
    /// The policy throttles busy guests always: [`BUSY_PAUSE`].
    Policy,
}

impl Pause {
    /// Waits as the pause says, and counts the time waited in `usage`.
    async fn wait(self, usage: &Usage) {
        let started = std::time::Instant::now();
        match self {
            Pause::GiveWay => {
                let cores = crate::guest::limits::cores();
                while crate::guest::sandbox::fresh_guests_wanting_cpu() >= cores && started.elapsed() < BUSY_GIVE_WAY {
                    tokio::time::sleep(BUSY_LOOK_AGAIN).await;
                }
            }
            Pause::Contended | Pause::Policy => tokio::time::sleep(BUSY_PAUSE).await,
        }
        let counter = match self {
            Pause::Policy => &usage.policy_throttled_nanos,
            Pause::GiveWay | Pause::Contended => &usage.throttled_nanos,
        };
        counter.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// A plugin with a config, ready to make instances.
pub struct Connector {
    pub plugin: Arc<Plugin>,
    pub config: String,
    pub egress: Arc<Egress>,
    pub limits: Limits,
    /// Accounting across every instance of this connector.
    pub usage: Arc<Usage>,
    /// The config with only the fields the connector's partitions read (`partition-config`,
    /// contract 0.1.7), once the run has asked; the whole config until then.
    partition_config: std::sync::OnceLock<String>,
    /// The instance that answered the spec probe, kept for the run's next run-level call
    /// ([`Connector::run_level_instance`]: discover, the questions, a listing); never a
    /// partition's.
    spare: std::sync::Mutex<Option<Instance>>,
}

/// What a run's guests used, for the run summary and the library API.
#[derive(Debug, Default)]
pub struct Usage {
    /// Time spent in guest code, in nanoseconds: the guest clock of every call, the same
    /// measure the CPU budget is charged in.
    pub guest_nanos: AtomicU64,
    /// The most memory (all its memories and tables together) any one instance held, bytes.
    pub peak_memory_bytes: AtomicU64,
    pub instances: AtomicU64,
    /// Instances alive now, and the most alive at once.
    pub live_instances: AtomicU64,
    pub peak_live_instances: AtomicU64,
    /// Time busy guests were paused because others wanted the cores, in nanoseconds.
    pub throttled_nanos: AtomicU64,
    /// Time busy guests were paused because the policy throttles them always, in nanoseconds.
    pub policy_throttled_nanos: AtomicU64,
    /// Report job polls (`poll-job` calls).
    pub job_polls: AtomicU64,
    /// Partitions being read now (holding a partition slot), and the most at once.
    pub partitions_in_flight: AtomicU64,
    pub peak_partitions_in_flight: AtomicU64,
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
    /// The component instance, where the later contracts' exports are looked up on first use
    /// (most instances make one call, and each lookup type-checks its interface's functions:
    /// looking them all up in every instance was 3% of a run of one-record partitions).
    instance: wasmtime::component::Instance,
    /// The plugin, with where those exports are, when it has them.
    plugin: Arc<Plugin>,
    /// The `async-jobs` exports, once looked up.
    jobs: Option<bindings::AsyncJobs>,
    /// The `resume` export, once looked up.
    resume: Option<bindings::Resume>,
    /// The `stepped-pages` exports, once looked up.
    stepped: Option<bindings::SteppedPages>,
    /// The `state-shape` exports, once looked up.
    shape: Option<bindings::StateShape>,
    /// The `partition-config` export, once looked up.
    partition_config: Option<bindings::PartitionConfig>,
    limits: Limits,
    usage: Arc<Usage>,
    /// A manifest's spec, which `spec` answers instead of the engine's.
    declared_spec: Option<String>,
    /// The pool slot the instance holds, given back after the store is dropped (fields drop in
    /// order).
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Connector {
    /// For the declarative engine running a manifest, the manifest goes into the config here,
    /// so every call gets it.
    pub fn new(plugin: Arc<Plugin>, config: String, egress: Arc<Egress>, limits: Limits) -> Self {
        let config = match &plugin.manifest {
            Some(manifest) => crate::guest::manifest::inject(
                &config,
                &manifest.json,
                plugin.custom.as_ref().map(|c| c.code.sha256.as_str()),
            ),
            None => config,
        };
        Connector {
            plugin,
            config,
            egress,
            limits,
            usage: Arc::default(),
            partition_config: Default::default(),
            spare: Default::default(),
        }
    }

    /// This connector takes over `probe`'s accounting and the instance that answered it, with
    /// this connector's egress, for its run-level calls: for an interpreter each instance
    /// not made before a read is 1-2 ms of its start, more in a pool slot not used before.
    pub fn adopt(mut self, probe: Connector, mut instance: Instance) -> Self {
        instance.store.data_mut().set_egress(self.egress.clone());
        self.usage = probe.usage;
        self.spare = std::sync::Mutex::new(Some(instance));
        self
    }

    /// The spare instance, when there is one: the spec probe's ([`Connector::adopt`]), or the
    /// one that answered the questions ([`Connector::put_spare`]).
    pub fn take_spare(&self) -> Option<Instance> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Keeps `instance`, done with its run-level calls, for the next one.
    pub fn put_spare(&self, instance: Instance) {
        *self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(instance);
    }

    /// An instance for a run-level call (discover, check, the questions, a stream's listing):
    /// the spare one when there is one, else a fresh one.
    pub async fn run_level_instance(&self) -> Result<Instance, CallError> {
        match self.take_spare() {
            Some(instance) => Ok(instance),
            None => self.instance().await,
        }
    }

    /// The config a partition's calls get: the fields the connector named (see
    /// [`Connector::narrow_partition_config`]), or the whole config.
    pub fn partition_config(&self) -> &String {
        self.partition_config.get().unwrap_or(&self.config)
    }

    /// Hands partitions' calls only the top-level `fields` of the config (in its order; names it
    /// does not have are left out), and says which fields that leaves out. Once a run: a later
    /// call changes nothing.
    pub fn narrow_partition_config(&self, fields: &[String]) -> Vec<String> {
        let Some((narrowed, left_out)) = crate::data::config::only_fields(&self.config, fields) else {
            return Vec::new();
        };
        match self.partition_config.set(narrowed) {
            Ok(()) => left_out,
            Err(_) => Vec::new(),
        }
    }

    /// What an instance takes from the pool: the plugin's component, and the custom components'
    /// runtime that may be started in its store.
    fn pool_needs(&self) -> PoolNeeds {
        let needs = self.plugin.pool_needs;
        self.plugin.custom.as_ref().map_or(needs, |custom| needs.and(custom.pool_needs))
    }

    /// A fresh instance. Instantiating runs guest code (its start functions), so it is a call
    /// like any other: under the CPU budget and the wall-clock limit, and counted as guest time.
    pub async fn instance(&self) -> Result<Instance, CallError> {
        let slot = match &self.plugin.slots {
            Some(slots) => Some(slots.take(self.pool_needs()).await),
            None => None,
        };
        let mut store = Store::new(self.plugin.pre.engine(), GuestState::new(self.egress.clone(), &self.limits));
        store.limiter(|state| &mut state.limiter);
        store.data_mut().custom = self.plugin.custom.as_ref().map(|custom| custom.session());
        // The CPU budget: the guest clock runs whenever guest code does. At every epoch tick the
        // guest yields, so one busy guest cannot hold a worker thread; a call that keeps
        // computing past a grace period is paused between ticks as well, so an endless loop takes
        // a small share of the machine until its budget runs out instead of a whole core. The
        // clock stops while the guest is yielded or paused and restarts when it runs again.
        let budget = self.limits.cpu_budget();
        let usage = self.usage.clone();
        let throttle = self.limits.throttle;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            let spent = state.clock.pause();
            if spent > budget {
                state.cpu_exceeded = true;
                return Err(wasmtime::format_err!("CPU budget exceeded"));
            }
            let clock = state.clock.clone();
            // Paused only when more guests want a core than there are (alone, a busy guest runs
            // at full speed, yielding at every tick all the same), or always if the policy says.
            // A busy call gives way to calls within their grace first: while those fill the
            // cores it waits, for as long as they do (at most BUSY_GIVE_WAY at a time), so a
            // busy guest, an endless loop say, costs the others next to nothing.
            let pause = match spent > BUSY_GRACE {
                false => None,
                true => {
                    clock.mark_busy();
                    let cores = crate::guest::limits::cores();
                    if crate::guest::sandbox::fresh_guests_wanting_cpu() >= cores {
                        Some(Pause::GiveWay)
                    } else if crate::guest::sandbox::guests_wanting_cpu() > cores {
                        Some(Pause::Contended)
                    } else if throttle == Throttle::Always {
                        Some(Pause::Policy)
                    } else {
                        None
                    }
                }
            };
            let pause = pause.map(|pause| (pause, usage.clone()));
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(async move {
                    match pause {
                        Some((pause, usage)) => pause.wait(&usage).await,
                        None => tokio::task::yield_now().await,
                    }
                    clock.unpause();
                }),
            ))
        });
        self.usage.instances.fetch_add(1, Ordering::Relaxed);
        let pre = self.plugin.pre.instance_pre();
        let context = r#"{"call":"instantiate"}"#.to_string();
        let instance =
            guarded(&mut store, &self.limits, &self.usage, context, async |store| pre.instantiate_async(store).await)
                .await
                .map_err(|e| match e {
                    CallError::Trap(m) => CallError::Trap(format!("cannot instantiate: {m}")),
                    other => other,
                })?;
        let bindings = self
            .plugin
            .indices
            .load(&mut store, &instance)
            .map_err(|e| CallError::Trap(format!("cannot instantiate: {e:#}")))?;
        let declared_spec = self.plugin.manifest.as_ref().map(|m| m.spec.clone());
        let live = self.usage.live_instances.fetch_add(1, Ordering::Relaxed) + 1;
        self.usage.peak_live_instances.fetch_max(live, Ordering::Relaxed);
        Ok(Instance {
            bindings,
            instance,
            plugin: self.plugin.clone(),
            jobs: None,
            resume: None,
            stepped: None,
            shape: None,
            partition_config: None,
            store,
            limits: self.limits.clone(),
            usage: self.usage.clone(),
            declared_spec,
            _slot: slot,
        })
    }
}

/// The exports in `slot`, looked up with `load` on first use when the plugin has them
/// (`indices`); `None` when it does not.
fn loaded<'a, I, T>(
    slot: &'a mut Option<T>,
    indices: Option<&I>,
    load: impl FnOnce(&I) -> wasmtime::Result<T>,
) -> Result<Option<&'a T>, CallError> {
    if slot.is_none()
        && let Some(indices) = indices
    {
        *slot = Some(load(indices).map_err(|e| CallError::Trap(format!("cannot look up the exports: {e:#}")))?);
    }
    Ok(slot.as_ref())
}

/// A call of an exported interface `exports`: [`guarded`], with the connector's own error
/// apart from a trap.
async fn export_call<I, T>(
    store: &mut Store<GuestState>,
    limits: &Limits,
    usage: &Usage,
    context: String,
    exports: &I,
    call: impl AsyncFnOnce(&I, &mut Store<GuestState>) -> wasmtime::Result<Result<T, GuestError>>,
) -> Result<T, CallError> {
    guarded(store, limits, usage, context, async |store| call(exports, store).await).await?.map_err(CallError::Guest)
}

/// Runs one guest call under the instance's limits: CPU budget and wall-clock limit from zero,
/// `context` (JSON) labelling its HTTP requests in recordings, its guest time counted; a trap
/// becomes a clear error naming the limit that stopped the guest.
async fn guarded<T>(
    store: &mut Store<GuestState>,
    limits: &Limits,
    usage: &Usage,
    context: String,
    call: impl AsyncFnOnce(&mut Store<GuestState>) -> wasmtime::Result<T>,
) -> Result<T, CallError> {
    let state = store.data_mut();
    state.cpu_exceeded = false;
    state.context = context;
    state.clock.restart();
    let outcome = tokio::time::timeout(limits.call_timeout(), call(store)).await;
    let state = store.data();
    let guest = state.clock.suspend();
    usage.guest_nanos.fetch_add(guest.as_nanos() as u64, Ordering::Relaxed);
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Err(_) => Err(CallError::Trap(format!(
            "the call took longer than its wall-clock limit of {} ms",
            limits.call_timeout_ms
        ))),
        Ok(Err(e)) => {
            let message = if let Some(memory) = &state.limiter.exceeded {
                memory.clone()
            } else if state.cpu_exceeded {
                format!(
                    "the connector used more than its CPU budget of {} ms in one call (an endless loop?)",
                    limits.cpu_ms_per_call
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

impl Drop for Instance {
    fn drop(&mut self) {
        let peak = self.store.data().limiter.peak_memory as u64;
        self.usage.peak_memory_bytes.fetch_max(peak, Ordering::Relaxed);
        self.usage.live_instances.fetch_sub(1, Ordering::Relaxed);
    }
}

// The generated export bindings take `&String`; passing ours through avoids a copy per call.
#[allow(clippy::ptr_arg)]
impl Instance {
    pub fn take_logs(&mut self) -> Vec<GuestLog> {
        self.store.data_mut().take_logs()
    }

    /// A call of the `source` interface.
    async fn source<T>(
        &mut self,
        context: String,
        call: impl AsyncFnOnce(&bindings::Source, &mut Store<GuestState>) -> wasmtime::Result<Result<T, GuestError>>,
    ) -> Result<T, CallError> {
        let Instance { store, bindings, limits, usage, .. } = self;
        export_call(store, limits, usage, context, bindings.sluice_connector_source(), call).await
    }

    /// A call of the `async-jobs` interface; an error for plugins without it.
    async fn job_call<T>(
        &mut self,
        context: String,
        call: impl AsyncFnOnce(&bindings::AsyncJobs, &mut Store<GuestState>) -> wasmtime::Result<Result<T, GuestError>>,
    ) -> Result<T, CallError> {
        let Instance { store, instance, plugin, jobs, limits, usage, .. } = self;
        let jobs = loaded(jobs, plugin.jobs.as_ref(), |i| i.load(&mut *store, instance))?;
        let jobs = jobs
            .ok_or_else(|| CallError::Guest(GuestError::System("the connector does not export async-jobs".into())))?;
        export_call(store, limits, usage, context, jobs, call).await
    }

    pub async fn spec(&mut self) -> Result<String, CallError> {
        if let Some(spec) = &self.declared_spec {
            return Ok(spec.clone());
        }
        let Instance { store, bindings, limits, usage, .. } = self;
        let source = bindings.sluice_connector_source();
        let context = r#"{"call":"spec"}"#.to_string();
        guarded(store, limits, usage, context, async |store| source.call_spec(store).await).await
    }

    pub async fn capabilities(&mut self, config: &String) -> Result<Capabilities, CallError> {
        self.source(r#"{"call":"capabilities"}"#.into(), async |s, store| s.call_capabilities(store, config).await)
            .await
    }

    pub async fn check(&mut self, config: &String) -> Result<(), CallError> {
        self.source(r#"{"call":"check"}"#.into(), async |s, store| s.call_check(store, config).await).await
    }

    pub async fn discover(&mut self, config: &String) -> Result<Vec<Stream>, CallError> {
        self.source(r#"{"call":"discover"}"#.into(), async |s, store| s.call_discover(store, config).await).await
    }

    pub async fn partitions(
        &mut self,
        config: &String,
        stream: &String,
        state: Option<&String>,
        token: Option<&String>,
    ) -> Result<PartitionBatch, CallError> {
        let context = serde_json::json!({"stream": stream, "listing": true}).to_string();
        self.source(context, async |s, store| s.call_partitions(store, config, stream, state, token).await).await
    }

    pub async fn read_page(
        &mut self,
        config: &String,
        partition: &Partition,
        token: Option<&String>,
    ) -> Result<ReadPage, CallError> {
        let context = page_context(partition);
        self.store.data_mut().start_forwarding();
        let page = self.source(context, async |s, store| s.call_read_page(store, config, partition, token).await).await;
        self.with_forwarded(page)
    }

    /// The page a `read-page` or `read-result` call returned, after the records it forwarded.
    fn with_forwarded(&mut self, page: Result<Page, CallError>) -> Result<ReadPage, CallError> {
        let records = self.store.data_mut().take_forwarded();
        let mut page = page?;
        let forwarded = put_first(records, &mut page);
        Ok(ReadPage { page, forwarded })
    }

    /// The streams whose page tokens stay valid across runs; none for connectors without
    /// `resume` (built for contracts before 0.1.2).
    pub async fn resumable_streams(&mut self, config: &String) -> Result<Vec<String>, CallError> {
        let Instance { store, instance, plugin, resume, limits, usage, .. } = self;
        let resume = loaded(resume, plugin.resume.as_ref(), |i| i.load(&mut *store, instance))?;
        let Some(resume) = resume else { return Ok(Vec::new()) };
        let context = r#"{"call":"resumable-streams"}"#.to_string();
        export_call(store, limits, usage, context, resume, async |r, store| {
            r.call_resumable_streams(store, config).await
        })
        .await
    }

    /// The top-level config fields a partition's calls read (`None`: the whole config; also for
    /// plugins built for contracts before 0.1.7).
    pub async fn partition_fields(&mut self, config: &String) -> Result<Option<Vec<String>>, CallError> {
        let Instance { store, instance, plugin, partition_config, limits, usage, .. } = self;
        let partition_config =
            loaded(partition_config, plugin.partition_config.as_ref(), |i| i.load(&mut *store, instance))?;
        let Some(exports) = partition_config else { return Ok(None) };
        let context = r#"{"call":"partition-fields"}"#.to_string();
        export_call(store, limits, usage, context, exports, async |e, store| {
            e.call_partition_fields(store, config).await
        })
        .await
    }

    /// The streams whose state the connector shapes; none for connectors without `state-shape`
    /// (built for contracts before 0.1.6).
    pub async fn shaped_streams(&mut self, config: &String) -> Result<Vec<String>, CallError> {
        let Instance { store, instance, plugin, shape, limits, usage, .. } = self;
        let shape = loaded(shape, plugin.shape.as_ref(), |i| i.load(&mut *store, instance))?;
        let Some(shape) = shape else { return Ok(Vec::new()) };
        let context = r#"{"call":"shaped-streams"}"#.to_string();
        export_call(store, limits, usage, context, shape, async |s, store| s.call_shaped_streams(store, config).await)
            .await
    }

    /// A saved state in the connector's shape, as the host's form (`None`: not its shape).
    pub async fn state_to_host(
        &mut self,
        config: &String,
        stream: &str,
        state: &str,
    ) -> Result<Option<String>, CallError> {
        let (stream, state) = (stream.to_string(), state.to_string());
        let stream = &stream;
        let state = &state;
        let Instance { store, instance, plugin, shape, limits, usage, .. } = self;
        let shape = loaded(shape, plugin.shape.as_ref(), |i| i.load(&mut *store, instance))?;
        let Some(shape) = shape else { return Ok(None) };
        let context = serde_json::json!({"call": "state-to-host", "stream": stream}).to_string();
        export_call(store, limits, usage, context, shape, async |s, store| {
            s.call_to_host(store, config, stream, state).await
        })
        .await
    }

    /// The host's state of a stream in the connector's shape.
    pub async fn state_from_host(&mut self, config: &String, stream: &str, state: &str) -> Result<String, CallError> {
        let (stream, state) = (stream.to_string(), state.to_string());
        let (stream, state) = (&stream, &state);
        let Instance { store, instance, plugin, shape, limits, usage, .. } = self;
        let shape = loaded(shape, plugin.shape.as_ref(), |i| i.load(&mut *store, instance))?;
        let Some(shape) = shape else { return Ok(state.to_string()) };
        let context = serde_json::json!({"call": "state-from-host", "stream": stream}).to_string();
        export_call(store, limits, usage, context, shape, async |s, store| {
            s.call_from_host(store, config, stream, state).await
        })
        .await
    }

    /// The streams read in steps; none for connectors without `stepped-pages` (built for
    /// contracts before 0.1.5).
    pub async fn stepped_streams(&mut self, config: &String) -> Result<Vec<String>, CallError> {
        let Instance { store, instance, plugin, stepped, limits, usage, .. } = self;
        let stepped = loaded(stepped, plugin.stepped.as_ref(), |i| i.load(&mut *store, instance))?;
        let Some(stepped) = stepped else { return Ok(Vec::new()) };
        let context = r#"{"call":"stepped-streams"}"#.to_string();
        export_call(store, limits, usage, context, stepped, async |s, store| {
            s.call_stepped_streams(store, config).await
        })
        .await
    }

    /// One step of a page read in steps (see [`crate::run::steps`]). Records forwarded during
    /// the call go to the front of the page, when the step ends one.
    pub async fn read_step(
        &mut self,
        config: &String,
        partition: &Partition,
        token: Option<&String>,
        answers: &[Result<bindings::StepAnswer, bindings::HttpError>],
    ) -> Result<(bindings::Step, usize), CallError> {
        let Instance { store, instance, plugin, stepped, limits, usage, .. } = self;
        let stepped = loaded(stepped, plugin.stepped.as_ref(), |i| i.load(&mut *store, instance))?;
        let stepped = stepped.ok_or_else(|| {
            CallError::Guest(GuestError::System("the connector does not export stepped-pages".into()))
        })?;
        let context = page_context(partition);
        store.data_mut().start_forwarding();
        let step = export_call(store, limits, usage, context, stepped, async |s, store| {
            s.call_read_step(store, config, partition, token, answers).await
        })
        .await;
        // A step runs its page again from the start, so only the step that ends the page keeps
        // what it forwarded itself; an earlier step's forwarding is done again by the next one.
        let records = self.store.data_mut().take_forwarded();
        let mut step = step?;
        let forwarded = match &mut step {
            bindings::Step::Page(page) => put_first(records, page),
            bindings::Step::Send(_) => 0,
        };
        Ok((step, forwarded))
    }

    /// Which streams are read through jobs; `None` for connectors without `async-jobs`.
    pub async fn job_settings(&mut self, config: &String) -> Result<Option<bindings::JobSettings>, CallError> {
        if self.plugin.jobs.is_none() {
            return Ok(None);
        }
        self.job_call(r#"{"call":"job-settings"}"#.into(), async |j, store| j.call_settings(store, config).await)
            .await
            .map(Some)
    }

    pub async fn create_job(&mut self, config: &String, partition: &Partition) -> Result<String, CallError> {
        let context = job_context(partition, "create");
        self.job_call(context, async |j, store| j.call_create_job(store, config, partition).await).await
    }

    pub async fn poll_job(
        &mut self,
        config: &String,
        partition: &Partition,
        job: &String,
    ) -> Result<bindings::JobStatus, CallError> {
        let context = job_context(partition, "poll");
        self.job_call(context, async |j, store| j.call_poll_job(store, config, job).await).await
    }

    pub async fn read_result(
        &mut self,
        config: &String,
        partition: &Partition,
        job: &String,
        download: &String,
        token: Option<&String>,
    ) -> Result<ReadPage, CallError> {
        let context = job_context(partition, "read-result");
        self.store.data_mut().start_forwarding();
        let page = self
            .job_call(context, async |j, store| j.call_read_result(store, config, job, download, token).await)
            .await;
        self.with_forwarded(page)
    }

    /// Aborts (`abort`) or deletes a job.
    pub async fn end_job(
        &mut self,
        config: &String,
        partition: &Partition,
        job: &String,
        abort: bool,
    ) -> Result<(), CallError> {
        let context = job_context(partition, if abort { "abort" } else { "delete" });
        match abort {
            true => self.job_call(context, async |j, store| j.call_abort_job(store, config, job).await).await,
            false => self.job_call(context, async |j, store| j.call_delete_job(store, config, job).await).await,
        }
    }
}

/// The recording label of a job call for `partition`.
fn job_context(partition: &Partition, step: &str) -> String {
    let key: serde_json::Value = serde_json::from_str(&partition.key).unwrap_or(serde_json::Value::Null);
    serde_json::json!({"stream": partition.stream, "partition": key, "job": step}).to_string()
}

/// The recording label of the requests for a page of `partition`, made by the guest in a call or
/// by the host between two steps.
pub fn page_context(partition: &Partition) -> String {
    let key: serde_json::Value = serde_json::from_str(&partition.key).unwrap_or(serde_json::Value::Null);
    // Written in place, the text `json!({"stream": …, "partition": …})` makes (recordings are
    // matched on it), without building that object for every page.
    let mut context = Vec::with_capacity(partition.stream.len() + partition.key.len() + 26);
    context.extend_from_slice(b"{\"stream\":");
    serde_json::to_writer(&mut context, &partition.stream).expect("a string serializes");
    context.extend_from_slice(b",\"partition\":");
    serde_json::to_writer(&mut context, &key).expect("a JSON value serializes");
    context.push(b'}');
    String::from_utf8(context).expect("serde_json writes UTF-8")
}

/// Puts records the host kept for a page before the page's own; how many there are.
pub fn put_first(mut records: Vec<String>, page: &mut Page) -> usize {
    let forwarded = records.len();
    if !records.is_empty() {
        records.append(&mut page.records);
        page.records = records;
    }
    forwarded
}

/// A page as read, with how many of its records, at its start, the host took out of answers
/// itself (forwarded): valid JSON objects already, checked without being parsed again
/// ([`crate::data::protocol::split_record_with_cursor`]).
pub struct ReadPage {
    pub page: Page,
    pub forwarded: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recordings are matched on a page's context: it is the text `json!` made of it before,
    /// however the key is spaced (or if it is not JSON at all).
    #[test]
    fn a_page_context_is_the_text_recordings_were_made_with() {
        let cases = [
            ("items", r#"{"account_id":7}"#),
            ("odd \"name\"", r#" { "b" : [1, 2.50, "x\u0041"], "a": null } "#),
            ("s", "{"),
        ];
        for (stream, key) in cases {
            let partition = Partition { stream: stream.into(), key: key.into(), cursor_range: None };
            let parsed: serde_json::Value = serde_json::from_str(key).unwrap_or(serde_json::Value::Null);
            let before = serde_json::json!({"stream": stream, "partition": parsed}).to_string();
            assert_eq!(page_context(&partition), before, "{key}");
        }
    }
}
