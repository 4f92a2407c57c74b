//! Many tenants in one process: one engine and one compiled-component cache shared by every run,
//! each run with its own policy, limits, egress, storage and accounting. The CLI runs through
//! it too, as a runtime of one run. The embedding example is in the crate docs (`lib.rs`) and docs/embedding.md.

use super::policy::{Policy, PolicySource};
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

/// Plugins kept loaded at most; the least recently used is let go past them.
pub const MAX_LOADED_PLUGINS: usize = 64;

/// Shared by every run of the process.
pub struct Runtime {
    engine: Arc<Engine>,
    /// Loaded plugins by the sha256 of their bytes, each behind its own lock: tenants starting
    /// one plugin together compile it once, and nobody waits for another plugin's compile. A
    /// file replaced with its modification time kept (`cp -p`, rsync, tar) is another plugin.
    plugins: Mutex<Loaded>,
}

/// The plugins loaded, by sha256, with when each was last used; at most [`MAX_LOADED_PLUGINS`].
#[derive(Default)]
struct Loaded {
    by_sha256: HashMap<String, (u64, Slot)>,
    uses: u64,
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Plugin>>>>;

impl Loaded {
    /// The slot of the plugin with `sha256`, made (and the least recently used let go, past
    /// the bound) when it has none.
    fn slot(&mut self, sha256: &str) -> Slot {
        self.uses += 1;
        let uses = self.uses;
        if let Some((used, slot)) = self.by_sha256.get_mut(sha256) {
            *used = uses;
            return slot.clone();
        }
        if self.by_sha256.len() >= MAX_LOADED_PLUGINS
            && let Some(oldest) = self.by_sha256.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| k.clone())
        {
            self.by_sha256.remove(&oldest);
        }
        let slot = Slot::default();
        self.by_sha256.insert(sha256.to_string(), (uses, slot.clone()));
        slot
    }
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
        Ok(Runtime { engine: Arc::new(engine), plugins: Mutex::new(Loaded::default()) })
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
    /// announced in the run's first LOG line with the run's `policy` (where it came from).
    pub(crate) async fn plugin(&self, path: &Path, policy: &str, out: &Output) -> Result<Arc<Plugin>, RunError> {
        if !manifest::is_manifest(path) {
            return self.component(path, policy, out).await;
        }
        // A declarative manifest: the engine component, given the manifest.
        let owned = path.to_path_buf();
        let loaded = tokio::task::spawn_blocking(move || manifest::load(&owned))
            .await
            .map_err(|e| RunError::system(format!("loading the manifest failed: {e}")))?
            .map_err(|e| RunError::config(format!("{e:#}")))?;
        let engine_path = manifest::engine_path().map_err(|e| RunError::config(format!("{e:#}")))?;
        let engine = self.component(&engine_path, policy, out).await?;
        let message = format!(
            "declarative manifest {} sha256 {}, run by the declarative engine",
            loaded.path.display(),
            loaded.sha256
        );
        out.log("INFO", &message).await?;
        Ok(Arc::new(Plugin { manifest: Some(Arc::new(loaded)), ..(*engine).clone() }))
    }

    /// The component at `path`, compiled once per content: its bytes are read (under the size
    /// limit) and hashed every time, and the plugin with that sha256 is the one run.
    async fn component(&self, path: &Path, policy: &str, out: &Output) -> Result<Arc<Plugin>, RunError> {
        let started = std::time::Instant::now();
        let (engine, owned) = (self.engine.clone(), path.to_path_buf());
        let (bytes, sha256) = tokio::task::spawn_blocking(move || {
            engine.read(&owned).map(|bytes| {
                let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
                (bytes, sha256)
            })
        })
        .await
        .map_err(|e| RunError::system(format!("loading the plugin failed: {e}")))?
        .map_err(|e| RunError::config(format!("{e:#}")))?;
        let slot = self.plugins.lock().unwrap_or_else(|e| e.into_inner()).slot(&sha256);
        let mut slot = slot.lock().await;
        if let Some(loaded) = slot.as_ref() {
            // The same code, perhaps from another path: announced as this run names it.
            let plugin = match loaded.path == path {
                true => loaded.clone(),
                false => Arc::new(Plugin { path: path.to_path_buf(), ..(**loaded).clone() }),
            };
            session::announce(&plugin, Some("already loaded in this process"), policy, out).await?;
            return Ok(plugin);
        }
        let (engine, owned) = (self.engine.clone(), path.to_path_buf());
        let plugin = tokio::task::spawn_blocking(move || engine.load_bytes(&owned, bytes, started))
            .await
            .map_err(|e| RunError::system(format!("loading the plugin failed: {e}")))?
            .map_err(|e| RunError::config(format!("{e:#}")))?;
        let plugin = Arc::new(plugin);
        *slot = Some(plugin.clone());
        drop(slot);
        session::announce(&plugin, None, policy, out).await?;
        Ok(plugin)
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
        let replay = super::pipeline::load_recording(http_replay).await?;
        let plugin = self.plugin(path, &source.described, out).await?;
        for warning in &source.warnings {
            out.log("WARN", warning).await?;
        }
        let http = HttpSetup { options: http, replay, ..Default::default() };
        session::open(plugin, config, policy, http, out, false, false).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The map of loaded plugins is bounded: past it, the least recently used goes.
    #[test]
    fn the_loaded_plugins_are_bounded_least_recently_used_first() {
        let mut loaded = Loaded::default();
        let first = loaded.slot("sha-0");
        for i in 1..MAX_LOADED_PLUGINS {
            loaded.slot(&format!("sha-{i}"));
        }
        // sha-0 used again: sha-1 is now the least recently used.
        assert!(Arc::ptr_eq(&first, &loaded.slot("sha-0")));
        loaded.slot("sha-new");
        assert_eq!(loaded.by_sha256.len(), MAX_LOADED_PLUGINS);
        assert!(loaded.by_sha256.contains_key("sha-0") && !loaded.by_sha256.contains_key("sha-1"));
    }
}
