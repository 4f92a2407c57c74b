//! Many tenants in one process: one engine and one compiled-component cache shared by every run,
//! each run with its own policy, limits, egress, storage and accounting. The CLI runs through
//! it too, as a runtime of one run. The embedding example is in the crate docs (`lib.rs`) and docs/embedding.md.

use super::policy::Policy;
use super::request::{RunError, RunReport, RunRequest};
use super::session::{self, HttpSetup};
use crate::data::protocol::Output;
use crate::guest::cache::ComponentCache;
use crate::guest::compile::CompileLimits;
use crate::guest::connector::Connector;
use crate::guest::engine::{Engine, Plugin};
use crate::guest::limits::Limits;
use crate::guest::manifest;
use crate::net::HttpOptions;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

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
    engine: Arc<Engine>,
    /// Loaded plugins by path, each behind its own lock: tenants starting one plugin together
    /// compile it once, and nobody waits for another plugin's compile.
    plugins: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Option<Loaded>>>>>,
}

/// A plugin loaded from a file, kept while the file is unchanged.
struct Loaded {
    modified: Option<SystemTime>,
    plugin: Arc<Plugin>,
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
        Ok(Runtime { engine: Arc::new(engine), plugins: Mutex::new(HashMap::new()) })
    }

    /// True when instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.engine.pooling()
    }

    /// Runs one request to the end. Its messages go to the request's sink; the report says
    /// what the run did (per-stream results and guest usage for a read) or why it failed.
    pub async fn run(&self, request: RunRequest) -> RunReport {
        super::pipeline::execute(self, request).await
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The plugin at `path`, loaded once per file version (compiled off the async workers), and
    /// announced in the run's first LOG line.
    pub(crate) async fn plugin(&self, path: &Path, out: &Output) -> Result<Arc<Plugin>, RunError> {
        if !manifest::is_manifest(path) {
            return self.component(path, out).await;
        }
        // A declarative manifest: the engine component, given the manifest.
        let owned = path.to_path_buf();
        let loaded = tokio::task::spawn_blocking(move || manifest::load(&owned))
            .await
            .map_err(|e| RunError::system(format!("loading the manifest failed: {e}")))?
            .map_err(|e| RunError::config(format!("{e:#}")))?;
        let engine_path = manifest::engine_path().map_err(|e| RunError::config(format!("{e:#}")))?;
        let engine = self.component(&engine_path, out).await?;
        let message = format!(
            "declarative manifest {} sha256 {}, run by the declarative engine",
            loaded.path.display(),
            loaded.sha256
        );
        out.log("INFO", &message).await?;
        Ok(Arc::new(Plugin { manifest: Some(Arc::new(loaded)), ..(*engine).clone() }))
    }

    /// The component at `path`, compiled once per file version.
    async fn component(&self, path: &Path, out: &Output) -> Result<Arc<Plugin>, RunError> {
        let slot = {
            let mut plugins = self.plugins.lock().unwrap_or_else(|e| e.into_inner());
            plugins.entry(path.to_path_buf()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if let Some(loaded) = slot.as_ref().filter(|l| l.modified.is_some() && l.modified == modified) {
            session::announce(&loaded.plugin, Some("already loaded in this process"), out).await?;
            return Ok(loaded.plugin.clone());
        }
        let (engine, owned) = (self.engine.clone(), path.to_path_buf());
        let plugin = tokio::task::spawn_blocking(move || engine.load(&owned))
            .await
            .map_err(|e| RunError::system(format!("loading the plugin failed: {e}")))?
            .map_err(|e| RunError::config(format!("{e:#}")))?;
        let plugin = Arc::new(plugin);
        *slot = Some(Loaded { modified, plugin: plugin.clone() });
        drop(slot);
        session::announce(&plugin, None, out).await?;
        Ok(plugin)
    }

    /// A plugin opened with a config as `check` and `discover` open it (for the conformance
    /// kit, which then calls the connector directly).
    pub(crate) async fn open(
        &self,
        path: &Path,
        config: String,
        policy: &Policy,
        http: HttpOptions,
        http_replay: Option<String>,
        out: &Output,
    ) -> Result<Connector, RunError> {
        let replay = super::pipeline::load_recording(http_replay).await?;
        let plugin = self.plugin(path, out).await?;
        let http = HttpSetup { options: http, replay, ..Default::default() };
        session::open(plugin, config, policy, http, out, false, false).await
    }
}
