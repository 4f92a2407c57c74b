//! The wasmtime engine and loading components: read (size-capped), checked, compiled within
//! bounds ([`crate::guest::compile`]) or taken from the signed cache ([`crate::guest::cache`]),
//! and linked.
//!
//! Compiling a component takes from a fraction of a second (Rust) to ~10 s (Python, JS), so
//! compiled code is cached on disk, keyed by the wasm's sha256 and the engine's compatibility
//! hash: a second run of the same plugin deserializes in milliseconds.

use crate::bindings::components::RuntimePre;
use crate::bindings::{
    AsyncJobsIndices, ConnectorIndices, ConnectorPre, ContractVersion, PartitionConfigIndices, ResumeIndices, Shim,
    StateShapeIndices, SteppedPagesIndices, WIT_PACKAGE, WIT_VERSION,
};
use crate::guest::cache::ComponentCache;
use crate::guest::compile::{CompileLimits, engine_config};
use crate::guest::limits::Limits;
use crate::guest::pool::{MEMORIES_PER_SLOT, PoolNeeds, PoolSlots, TABLES_PER_SLOT};
use crate::guest::sandbox::{GuestState, MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES};
use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Linker, types::ComponentItem};

/// One per process: shared by every plugin and run.
pub struct Engine {
    engine: wasmtime::Engine,
    linker: Linker<GuestState>,
    cache: ComponentCache,
    compile: CompileLimits,
    pooling: bool,
    wasm_stack_bytes: usize,
    /// With pooling, the pool's slots: an instance waits for its share instead of failing when
    /// they are taken (report jobs polling at once, say).
    slots: Option<Arc<PoolSlots>>,
}

/// A loaded plugin, ready to instantiate cheaply (one instance per partition).
#[derive(Clone)]
pub struct Plugin {
    pub path: PathBuf,
    pub sha256: String,
    /// The WIT version the plugin was built against, e.g. `0.1.0`.
    pub wit_version: String,
    pub pre: ConnectorPre<GuestState>,
    /// Where the `source` exports are (looked up once).
    pub indices: ConnectorIndices,
    /// Where the `async-jobs` exports are, when the plugin has them (contract 0.1.1).
    pub jobs: Option<AsyncJobsIndices>,
    /// Where the `resume` export is, when the plugin has it (contract 0.1.2).
    pub resume: Option<ResumeIndices>,
    /// Where the `stepped-pages` exports are, when the plugin has them (contract 0.1.5).
    pub stepped: Option<SteppedPagesIndices>,
    /// Where the `state-shape` exports are, when the plugin has them (contract 0.1.6).
    pub shape: Option<StateShapeIndices>,
    /// Where the `partition-config` export is, when the plugin has it (contract 0.1.7).
    pub partition_config: Option<PartitionConfigIndices>,
    pub load: LoadInfo,
    /// The engine's pool slots (see [`Engine`]), when instances come from a pool.
    pub slots: Option<Arc<PoolSlots>>,
    /// What one instance of the plugin takes from the pool.
    pub pool_needs: PoolNeeds,
    /// Where the cache remembers the plugin's spec (`None` when it cannot); read it through
    /// [`Plugin::spec_memo`], which knows when a spec is not the plugin's own.
    pub spec_memo: Option<crate::guest::cache::SpecMemo>,
    /// The declarative manifest this plugin (the declarative engine) runs, for `host run
    /// manifest.yaml`: injected into every config, and the source of the spec.
    pub manifest: Option<Arc<crate::guest::manifest::Manifest>>,
    /// The manifest's custom components and the runtime that runs them.
    pub custom: Option<Arc<crate::guest::custom::Custom>>,
}

impl Plugin {
    /// Where the cache remembers the plugin's spec: nowhere for a manifest, whose spec is the
    /// manifest's (`Instance::spec` answers it with no call).
    pub fn spec_memo(&self) -> Option<&crate::guest::cache::SpecMemo> {
        self.spec_memo.as_ref().filter(|_| self.manifest.is_none())
    }
}

/// A plugin file's sha256 (what names the plugin), and its bytes unless the cache holds its
/// compiled code (they are read if it no longer does).
pub struct PluginFile {
    bytes: Option<Vec<u8>>,
    pub sha256: String,
}

/// A component's compiled code, and where it came from.
struct Compiled {
    pub component: Component,
    pub cache_hit: bool,
    pub from_package: bool,
    pub cache_file: PathBuf,
}

#[derive(Debug, Clone)]
pub struct LoadInfo {
    /// `true` when the compiled code came from the cache.
    pub cache_hit: bool,
    /// `true` when it came from the package the plugin was run from (and is now in the cache).
    pub from_package: bool,
    pub elapsed: Duration,
    pub cache_file: PathBuf,
}

/// Instances the pooling allocator keeps slots for by default, sized for many tenants' partitions
/// at once. Reserving the slots costs start-up time (2000 took ~20 ms of a 35 ms `host
/// discover`), so a single run asks for what its concurrency needs ([`Engine::with_options`]).
pub const POOLED_INSTANCES: u32 = 2000;
/// The largest memory a pooled instance may have; memory limits above it need on-demand
/// allocation.
pub const POOLED_MAX_MEMORY: usize = 1 << 30;

/// Bytes of a pooled linear memory's dirty pages reset in place (copied back from its image)
/// when its instance is dropped, instead of given back to the kernel; see [`Engine::build`].
pub const LINEAR_MEMORY_KEEP_RESIDENT: usize = 8 << 20;

impl Engine {
    /// An engine with on-demand instance allocation and the default stack.
    pub fn new(cache_dir: PathBuf) -> Result<Self> {
        Self::with_options(cache_dir, false, Limits::default().wasm_stack_bytes, POOLED_INSTANCES)
    }

    /// With `pooling`, instances come from pre-reserved slots (faster to create, and to throw
    /// away); when the address space does not allow the reservation, this falls back to
    /// on-demand allocation. [`Engine::pooling`] tells which one is in use.
    pub fn with_pooling(cache_dir: PathBuf, pooling: bool) -> Result<Self> {
        Self::with_options(cache_dir, pooling, Limits::default().wasm_stack_bytes, POOLED_INSTANCES)
    }

    /// As [`Engine::with_pooling`], with a guest stack of `wasm_stack_bytes` and a pool of
    /// `pooled_instances` slots (at least one).
    pub fn with_options(
        cache_dir: PathBuf,
        pooling: bool,
        wasm_stack_bytes: usize,
        pooled_instances: u32,
    ) -> Result<Self> {
        let slots = pooled_instances.max(1);
        if pooling && let Ok(engine) = Self::build(cache_dir.clone(), Some(slots), wasm_stack_bytes) {
            return Ok(engine);
        }
        Self::build(cache_dir, None, wasm_stack_bytes)
    }

    pub fn pooling(&self) -> bool {
        self.pooling
    }

    pub fn wasm_stack_bytes(&self) -> usize {
        self.wasm_stack_bytes
    }

    /// Bounds compiling plugins (and where it happens).
    pub fn with_compile(mut self, compile: CompileLimits) -> Self {
        self.compile = compile;
        self
    }

    fn build(cache_dir: PathBuf, pool_slots: Option<u32>, wasm_stack_bytes: usize) -> Result<Self> {
        let mut config = engine_config(wasm_stack_bytes);
        if let Some(slots) = pool_slots {
            let mut pool = wasmtime::PoolingAllocationConfig::new();
            // Core instances are only counted by the pool (their memories and tables have slots
            // of their own), so each component slot may hold as many as a component may have
            // (the store's limiter allows MAX_CORE_INSTANCES). Four a slot was too few for an
            // interpreter: CPython's component is 14 core modules, more with native packages, and
            // one of 30 at `--concurrency 32` needed 960 where the pool counted 768, so its
            // partitions failed to instantiate while the pool had slots free.
            // Memories and tables are counted the same way, but reserve address space: a slot has
            // MEMORIES_PER_SLOT and TABLES_PER_SLOT, and an instance of a component with more
            // takes more slots (`PoolSlots::take`). The totals hold at least the most one store
            // may have (an engine and its custom components' runtime), for a pool smaller than
            // that instance's share (the store's limiter counts both components together).
            pool.total_component_instances(slots.max(2))
                .total_core_instances(slots.max(2).saturating_mul(MAX_CORE_INSTANCES as u32))
                .total_memories(slots.saturating_mul(MEMORIES_PER_SLOT).max(MAX_MEMORIES as u32))
                .total_tables(slots.saturating_mul(TABLES_PER_SLOT).max(MAX_TABLES as u32))
                .total_stacks(slots)
                .max_memory_size(POOLED_MAX_MEMORY)
                // The same per-instance counts the store's limiter allows, so one tenant's many
                // memories cannot drain the pool's slots for everyone else.
                .max_memories_per_component(MAX_MEMORIES as u32)
                .max_tables_per_component(MAX_TABLES as u32)
                .max_core_instances_per_component(MAX_CORE_INSTANCES as u32)
                // A run creates an instance per partition (or per step) and throws it away:
                // giving a slot's dirty pages back with madvise costs a TLB shootdown on every
                // core, and the next instance in the slot a copy-on-write fault per page again.
                // So the pages an instance dirtied, up to LINEAR_MEMORY_KEEP_RESIDENT, are copied
                // back from the image in place and stay resident (found by a pagemap scan:
                // wasmtime 48.0.11 scans them all, 48.0.8 stopped at 32 runs of pages). An
                // interpreter's step dirties 1-3 MiB spread over its heap; with this it takes tens
                // of faults instead of hundreds (`just bench`, case 14, has what it saves).
                // Decommits are not batched: a slot waiting in a batch keeps its memory, so
                // batches of 64 held up to 126 dead instances' pages (486 MiB RSS for a CPython
                // connector reading 64 partitions 16 at a time).
                .decommit_batch_size(1)
                .linear_memory_keep_resident(LINEAR_MEMORY_KEEP_RESIDENT)
                .table_keep_resident(64 << 10)
                .async_stack_keep_resident(256 << 10)
                .pagemap_scan(wasmtime::Enabled::Auto);
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = wasmtime::Engine::new(&config).map_err(|e| anyhow!("{e}"))?;
        start_epoch_ticker(&engine);
        let mut linker = Linker::new(&engine);
        crate::guest::sandbox::add_to_linker(&mut linker)?;
        crate::guest::waits::add_to_linker(&mut linker)?;
        crate::guest::custom::add_to_linker(&mut linker)?;
        let cache = ComponentCache::new(cache_dir);
        let slots = pool_slots.map(|n| Arc::new(PoolSlots::new(n)));
        Ok(Engine {
            engine,
            linker,
            cache,
            compile: CompileLimits::default(),
            pooling: pool_slots.is_some(),
            wasm_stack_bytes,
            slots,
        })
    }

    pub fn wasmtime(&self) -> &wasmtime::Engine {
        &self.engine
    }

    /// Loads a plugin file: checks it is a component for a supported WIT version, compiles it
    /// (or loads it from the cache) and links it against the host's imports.
    pub fn load(&self, path: &Path) -> Result<Plugin> {
        let started = Instant::now();
        let file = self.read(path)?;
        self.load_file(path, file, started)
    }

    /// A plugin file's sha256, and its bytes, refused past the size limit before they are read
    /// whole. The sha256 is hashed, or remembered by the cache for the file as it is (see
    /// [`ComponentCache::remembered_sha256`]) when nothing of it changed while it was read; and
    /// a file remembered as it is whose compiled code the cache holds is not read at all (18 MB
    /// for the Python component, 10 ms of every start).
    pub fn read(&self, path: &Path) -> Result<PluginFile> {
        if let Some(stamp) = crate::guest::cache::FileStamp::of(path)
            && stamp.size() <= self.compile.max_component_bytes
            && let Some(sha256) = self.cache.remembered_sha256(&stamp)
            && self.cache.file_for(&self.engine, &sha256).exists()
        {
            return Ok(PluginFile { bytes: None, sha256 });
        }
        let (bytes, sha256) = self.read_whole(path)?;
        Ok(PluginFile { bytes: Some(bytes), sha256 })
    }

    /// The bytes of a plugin file and their sha256 (remembered for the file as it is).
    fn read_whole(&self, path: &Path) -> Result<(Vec<u8>, String)> {
        let max = self.compile.max_component_bytes;
        let limit = format!("the limit of {max} bytes for a plugin (--max-plugin-mb)");
        let before = crate::guest::cache::FileStamp::of(path);
        let cap = crate::data::files::Cap::new("plugin", max).said(&limit).waiting();
        let bytes = crate::data::files::read_capped(path, cap)?;
        let stamp = before.filter(|before| crate::guest::cache::FileStamp::of(path).as_ref() == Some(before));
        let sha256 = match stamp.as_ref().and_then(|stamp| self.cache.remembered_sha256(stamp)) {
            Some(sha256) => sha256,
            None => {
                let sha256 = hex::encode(Sha256::digest(&bytes));
                if let Some(stamp) = &stamp {
                    self.cache.remember_sha256(stamp, &sha256);
                }
                sha256
            }
        };
        Ok((bytes, sha256))
    }

    /// [`Engine::load`] of a file read already (with [`Engine::read`]) from `path`, the load
    /// having started at `started`.
    pub fn load_file(&self, path: &Path, file: PluginFile, started: Instant) -> Result<Plugin> {
        let shown = path.display();
        let PluginFile { bytes, sha256 } = file;
        let Compiled { component, cache_hit, from_package, cache_file } =
            self.compiled(path, bytes.as_deref(), &sha256)?;
        let wit_version = self.check_wit_version(&component).with_context(|| format!("{shown} cannot be loaded"))?;
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| {
            anyhow!("{shown} needs an import Sluice does not provide (connectors may import only sluice:connector/http and /log, and WASI): {e}")
        })?;
        let exports = |interface: &str| {
            let prefix = format!("{WIT_PACKAGE}/{interface}@");
            component.component_type().exports(&self.engine).any(|(name, _)| name.starts_with(&prefix))
        };
        // Each later contract's exports, found where the plugin has them.
        let resume = optional(exports("resume"), &shown, "a resume", || ResumeIndices::new(&instance_pre))?;
        let stepped =
            optional(exports("stepped-pages"), &shown, "a stepped-pages", || SteppedPagesIndices::new(&instance_pre))?;
        let shape =
            optional(exports("state-shape"), &shown, "a state-shape", || StateShapeIndices::new(&instance_pre))?;
        let jobs = optional(exports("async-jobs"), &shown, "an async-jobs", || AsyncJobsIndices::new(&instance_pre))?;
        let partition_config = optional(exports("partition-config"), &shown, "a partition-config", || {
            PartitionConfigIndices::new(&instance_pre)
        })?;
        let indices = ConnectorIndices::new(&instance_pre).map_err(|e| {
            anyhow!("{shown} does not export the connector interface this host expects (built against another revision of {WIT_PACKAGE}@{WIT_VERSION}? rebuild it with this repository's SDK): {e}")
        })?;
        let pre = ConnectorPre::new(instance_pre).map_err(|e| {
            anyhow!(
                "{shown} does not export the connector interface this host expects (built against another \
                     revision of {WIT_PACKAGE}@{WIT_VERSION}? rebuild it with this repository's SDK): {e}"
            )
        })?;
        let spec_memo = self.cache.spec_memo(&sha256);
        Ok(Plugin {
            path: path.to_path_buf(),
            sha256,
            wit_version,
            pre,
            indices,
            jobs,
            resume,
            stepped,
            shape,
            partition_config,
            load: LoadInfo { cache_hit, from_package, elapsed: started.elapsed(), cache_file },
            slots: self.slots.clone(),
            pool_needs: PoolNeeds::of(&component),
            spec_memo,
            manifest: None,
            custom: None,
        })
    }

    /// The compiled code of the component `bytes` (read from `path`, with `sha256`): from the
    /// cache, from the package it was run from, or compiled (and cached); with whether it was a
    /// cache hit, whether it came from the package, and the cache entry.
    fn compiled(&self, path: &Path, bytes: Option<&[u8]>, sha256: &str) -> Result<Compiled> {
        let shown = path.display();
        if let Some(bytes) = bytes {
            check_component_header(bytes).with_context(|| format!("{shown} cannot be loaded"))?;
        }
        let cache_file = self.cache.file_for(&self.engine, sha256);
        let cached =
            self.cache.load(&self.engine, &cache_file, sha256).with_context(|| format!("cannot load {shown}"))?;
        let cache_hit = cached.is_some();
        let packaged = match cached {
            Some(_) => None,
            None => self.packaged_code(&cache_file, sha256),
        };
        let from_package = packaged.is_some();
        let component = match cached.or(packaged) {
            Some(component) => component,
            None => {
                // Not read, as the cache held its code, which is gone since: read now.
                let read;
                let bytes = match bytes {
                    Some(bytes) => bytes,
                    None => {
                        let (whole, read_sha256) = self.read_whole(path)?;
                        if read_sha256 != sha256 {
                            bail!("{shown} changed while it was loaded: run again");
                        }
                        read = whole;
                        check_component_header(&read).with_context(|| format!("{shown} cannot be loaded"))?;
                        &read
                    }
                };
                self.compile.check(bytes).with_context(|| format!("{shown} is refused"))?;
                // Remembered when it fails (in this process, and beside the cache's entries for
                // the next), so a compile bomb costs its limits once, not every run; a timeout or a
                // lack of memory is told from an invalid component.
                let compiled = self
                    .compile
                    .compile_remembered(
                        &self.engine,
                        bytes,
                        sha256,
                        self.wasm_stack_bytes,
                        Some(&cache_file.with_extension("failed")),
                    )
                    .map_err(|e| match e {
                        crate::guest::compile::CompileError::Invalid(m) => {
                            anyhow!("{shown} is not a valid WebAssembly component: {m}")
                        }
                        e => anyhow!("{shown} cannot be compiled: {e}"),
                    })?;
                self.cache.store(&cache_file, sha256, &compiled)?;
                // SAFETY: these bytes were produced by `precompile_component` for an engine
                // configured as this one (here, or in the compile helper we started).
                unsafe { Component::deserialize(&self.engine, &compiled) }
                    .map_err(|e| anyhow!("{e:#}"))
                    .with_context(|| format!("cannot load the compiled code of {shown}"))?
            }
        };
        Ok(Compiled { component, cache_hit, from_package, cache_file })
    }

    /// The components runtime at `path` (see [`crate::guest::custom`]), compiled once and cached
    /// by sha256 like any plugin, linked against the host's imports; with its sha256.
    pub fn load_components_runtime(&self, path: &Path) -> Result<(RuntimePre<GuestState>, String)> {
        let PluginFile { bytes, sha256 } = self.read(path)?;
        let compiled = self.compiled(path, bytes.as_deref(), &sha256)?;
        let shown = path.display();
        let pre =
            self.linker.instantiate_pre(&compiled.component).map_err(|e| anyhow!("{shown} cannot be linked: {e}"))?;
        let pre = RuntimePre::new(pre).map_err(|e| anyhow!("{shown} is not the components runtime: {e}"))?;
        Ok((pre, sha256))
    }

    /// The package's compiled code for the plugin with `sha256`, stored in the cache as
    /// `cache_file` and loaded from there; `None` when there is none for this plugin and engine,
    /// or it is not what the package pinned (the plugin is compiled then).
    fn packaged_code(&self, cache_file: &Path, sha256: &str) -> Option<Component> {
        let packaged = self.compile.packaged.as_ref()?;
        if packaged.file.file_name() != cache_file.file_name() {
            return None;
        }
        let max = crate::guest::compile::max_compiled_bytes(self.compile.max_component_bytes);
        let cap = crate::data::files::Cap::new("packaged compiled code", max);
        let bytes = crate::data::files::read_capped(&packaged.file, cap.regular()).ok()?;
        if hex::encode(Sha256::digest(&bytes)) != packaged.sha256 {
            return None;
        }
        self.cache.store(cache_file, sha256, &bytes).ok()?;
        self.cache.load(&self.engine, cache_file, sha256).ok().flatten()
    }

    /// Finds the exported `sluice:connector/source@X.Y.Z`: a version this host serves, or a
    /// refusal that says which way the plugin and the host part.
    fn check_wit_version(&self, component: &Component) -> Result<String> {
        let ty = component.component_type();
        let prefix = format!("{WIT_PACKAGE}/source@");
        let mut exports = Vec::new();
        for (name, item) in ty.exports(&self.engine) {
            if let (Some(version), ComponentItem::ComponentInstance(_)) = (name.strip_prefix(&prefix), &item.ty) {
                return match ContractVersion::parse(version) {
                    Some(served) => {
                        debug_assert_eq!(served.shim(), Shim::Track0_1);
                        Ok(version.to_string())
                    }
                    None => bail!(
                        "it was built for {WIT_PACKAGE}@{version}, but this host supports {} ({}; rebuild the \
                         plugin with a matching SDK, or use a matching host)",
                        ContractVersion::served(),
                        match newer_on_track(version) {
                            true => "the plugin is newer than this host: use a newer host",
                            false => "a contract this host does not serve",
                        }
                    ),
                };
            }
            exports.push(name.to_string());
        }
        bail!(
            "it does not export {WIT_PACKAGE}/source, so it is not a Sluice connector (it exports: {})",
            if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") }
        )
    }
}

/// A later contract's export indices when the plugin exports the interface (`what`: "a resume").
fn optional<T>(
    present: bool,
    shown: &dyn std::fmt::Display,
    what: &str,
    indices: impl FnOnce() -> wasmtime::Result<T>,
) -> Result<Option<T>> {
    if !present {
        return Ok(None);
    }
    indices()
        .map(Some)
        .map_err(|e| anyhow!("{shown} exports {what} interface this host cannot use (another revision?): {e}"))
}

/// Whether `version` is a later release of the track this host serves (a 0.1.7 for a 0.1.6 host).
fn newer_on_track(version: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split(['.', '-', '+']);
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    match (parse(version), parse(WIT_VERSION)) {
        // 0.x releases are one track per minor version; later ones, one per major version.
        (Some(theirs), Some(ours)) => theirs.0 == ours.0 && (ours.0 > 0 || theirs.1 == ours.1) && theirs > ours,
        _ => false,
    }
}

/// One OS thread per engine advances its epoch (a tokio task could be starved by busy workers).
/// It stops once the engine is gone.
fn start_epoch_ticker(engine: &wasmtime::Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("sluice-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(crate::guest::limits::EPOCH_TICK);
            }
        })
        .expect("spawn the epoch ticker");
}

/// Tells a component from a core module or a file that is not WebAssembly at all.
fn check_component_header(bytes: &[u8]) -> Result<()> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        bail!("it is not a WebAssembly file (no \\0asm header)");
    }
    match bytes[6..8] {
        [1, 0] => Ok(()),
        [0, 0] => bail!(
            "it is a core WebAssembly module, not a component (build Rust connectors with --target wasm32-wasip2)"
        ),
        _ => bail!("it has an unknown WebAssembly layer {:?}", &bytes[6..8]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compile helper builds its engine without the pooling allocator: what it compiles must
    /// load in a pooling engine as well.
    #[test]
    fn compiled_code_does_not_depend_on_the_allocator() {
        use std::hash::{Hash, Hasher};
        let hash = |engine: &wasmtime::Engine| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hasher.finish()
        };
        let dir = std::env::temp_dir();
        let stack = Limits::default().wasm_stack_bytes;
        let helper = wasmtime::Engine::new(&engine_config(stack)).unwrap();
        let pooled = Engine::with_pooling(dir.clone(), true).unwrap();
        let on_demand = Engine::with_pooling(dir, false).unwrap();
        assert_eq!(hash(&helper), hash(on_demand.wasmtime()));
        if pooled.pooling() {
            assert_eq!(hash(&helper), hash(pooled.wasmtime()));
        }
    }

    /// The pool hands an instance a slot its module filled before, whichever thread makes it (a
    /// patch of ours to wasmtime, `third_party/README.md`): wasmtime shards its slots by thread,
    /// a run's instances are made on whichever runtime worker runs the task, and every slot
    /// filled stays resident. So a run fills as many slots as it had instances at once, not that
    /// many for each thread.
    #[test]
    fn a_slot_is_filled_again_by_its_module_from_any_thread() {
        // (module (memory 1) (data (i32.const 0) "hi"))
        const MODULE: &[u8] = b"\0asm\x01\0\0\0\x05\x03\x01\0\x01\x0b\x08\x01\0\x41\0\x0b\x02hi";
        let engine = Engine::with_options(std::env::temp_dir(), true, Limits::default().wasm_stack_bytes, 64).unwrap();
        if !engine.pooling() {
            return; // no room to reserve a pool here: nothing to share
        }
        let module = wasmtime::Module::new(engine.wasmtime(), MODULE).unwrap();
        for _ in 0..4 {
            let (engine, module) = (engine.wasmtime().clone(), module.clone());
            std::thread::spawn(move || {
                let mut store = wasmtime::Store::new(&engine, ());
                let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                runtime.block_on(wasmtime::Instance::new_async(&mut store, &module, &[])).unwrap();
            })
            .join()
            .unwrap();
        }
        let metrics = engine.wasmtime().pooling_allocator_metrics().unwrap();
        assert_eq!(metrics.unused_warm_memories(), 1, "four instances one after the other, on four threads");
    }

    /// Every slot of the pool can hold a component of many core modules at once (CPython's is
    /// 14): the pool used to count four core instances a slot, so 4 slots held one Python
    /// instance, not 4.
    #[test]
    fn every_slot_holds_a_component_of_many_core_modules() {
        const EMPTY_MODULE: &[u8] = b"\0asm\x01\0\0\0";
        let engine = Engine::with_options(std::env::temp_dir(), true, Limits::default().wasm_stack_bytes, 4).unwrap();
        if !engine.pooling() {
            return; // no room to reserve a pool here
        }
        let module = wasmtime::Module::new(engine.wasmtime(), EMPTY_MODULE).unwrap();
        let mut store = wasmtime::Store::new(engine.wasmtime(), ());
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for n in 0..4 * 14 {
            let made = runtime.block_on(wasmtime::Instance::new_async(&mut store, &module, &[]));
            assert!(made.is_ok(), "core instance {n} of 4 slots' worth: {:?}", made.err());
        }
    }

    /// A component that instantiates a module of one table `tables` times (so it has that many
    /// tables), written out in the component binary format.
    fn component_of_tables(tables: u8) -> Vec<u8> {
        const MODULE: &[u8] = b"\0asm\x01\0\0\0\x04\x04\x01\x70\x00\x00"; // (module (table 0 funcref))
        let mut component = b"\0asm\x0d\0\x01\0".to_vec();
        component.extend([0x01, MODULE.len() as u8]);
        component.extend(MODULE);
        let instances: Vec<u8> = std::iter::once(tables).chain((0..tables).flat_map(|_| [0, 0, 0])).collect();
        assert!(tables < 128 && instances.len() < 1 << 14, "one-byte count, two-byte size");
        let size = instances.len() as u16;
        component.extend([0x02, (size & 0x7f) as u8 | 0x80, (size >> 7) as u8]);
        component.extend(instances);
        component
    }

    /// An instance takes as many of the pool's slots as its tables need: a component of 30
    /// tables took one slot (4 tables' worth), so a pool of 20 slots (80 tables) failed the
    /// third of three instances at once, with slots free.
    #[test]
    fn an_instance_takes_the_slots_its_tables_need() {
        let engine = Engine::with_options(std::env::temp_dir(), true, Limits::default().wasm_stack_bytes, 20).unwrap();
        if !engine.pooling() {
            return; // no room to reserve a pool here
        }
        let component = Component::new(engine.wasmtime(), component_of_tables(30)).unwrap();
        let needs = PoolNeeds::of(&component);
        assert_eq!(needs, PoolNeeds { memories: 0, tables: 30, components: 1 });
        assert_eq!(needs.slots(), 8);
        let slots = engine.slots.clone().unwrap();
        let linker = Linker::<()>::new(engine.wasmtime());
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // Four partitions at once, each holding its instance while the others start theirs.
        let start = || async {
            let _slot = slots.take(needs).await;
            let mut store = wasmtime::Store::new(engine.wasmtime(), ());
            let instance = linker.instantiate_async(&mut store, &component).await;
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            instance.map(|_| ())
        };
        let made = runtime.block_on(async { tokio::join!(start(), start(), start(), start()) });
        for (n, made) in [made.0, made.1, made.2, made.3].into_iter().enumerate() {
            assert!(
                made.is_ok(),
                "instance {n} of 30 tables, at most two at once in 80 tables' worth: {:?}",
                made.err()
            );
        }
        assert_eq!(slots.free(), 20, "every slot is given back");
        let engine = Engine::with_options(std::env::temp_dir(), true, Limits::default().wasm_stack_bytes, 4).unwrap();
        let (slots, linker) = (engine.slots.clone().unwrap(), Linker::<()>::new(engine.wasmtime()));
        // An instance needing more than the whole pool takes all of it, and fits the totals.
        let widest = Component::new(engine.wasmtime(), component_of_tables(MAX_TABLES as u8)).unwrap();
        assert_eq!(PoolNeeds::of(&widest).slots(), 16);
        runtime.block_on(async {
            let _slot = slots.take(PoolNeeds::of(&widest)).await;
            assert_eq!(slots.free(), 0);
            let mut store = wasmtime::Store::new(engine.wasmtime(), ());
            linker.instantiate_async(&mut store, &widest).await.expect("the pool holds the widest instance");
        });
    }

    #[test]
    fn versions() {
        // Exactly the released versions are served; a later 0.1 release is a newer plugin.
        assert_eq!(ContractVersion::parse("0.1.0"), Some(ContractVersion::V0_1_0));
        assert_eq!(ContractVersion::parse(WIT_VERSION), Some(ContractVersion::CURRENT));
        assert_eq!(ContractVersion::parse("0.1.99"), None);
        assert!(newer_on_track("0.1.99"));
        assert!(!newer_on_track("0.2.0") && !newer_on_track("1.0.0") && !newer_on_track("0.1.0"));
        assert!(!newer_on_track("x"));
        assert!(ContractVersion::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*ContractVersion::ALL.last().unwrap(), ContractVersion::CURRENT);
    }

    #[test]
    fn headers() {
        assert!(check_component_header(b"hello world").unwrap_err().to_string().contains("not a WebAssembly file"));
        assert!(
            check_component_header(b"\0asm\x01\0\0\0").unwrap_err().to_string().contains("core WebAssembly module")
        );
        assert!(check_component_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
