//! Many tenants in one process: one engine and one compiled-component cache shared by every run,
//! each run with its own policy, limits, egress and accounting.
//!
//! ```ignore
//! let runtime = Runtime::new(cache_dir, true)?;
//! let report = runtime.run(RunRequest::new("plugin.wasm", config, Box::new(sink))).await?;
//! println!("{} records, guest time {:?}", report.usage.records, report.usage.guest_cpu);
//! ```

use crate::catalog::Selected;
use crate::egress::HttpOptions;
use crate::engine::{Engine, Plugin};
use crate::policy::Policy;
use crate::progress::Progress;
use crate::protocol::{Format, Output};
use crate::schedule::Concurrency;
use crate::session::{self, ReadReport, RunError};
use crate::state::InputState;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Shared by every run of the process.
pub struct Runtime {
    engine: Engine,
    /// Loaded plugins by path, kept while the file is unchanged.
    plugins: Mutex<HashMap<PathBuf, (SystemTime, Arc<Plugin>)>>,
    /// Held while loading, so tenants starting together compile a plugin once.
    loading: tokio::sync::Mutex<()>,
}

/// One run: which plugin with which config, under which policy, written where.
pub struct RunRequest {
    pub plugin: PathBuf,
    pub config: serde_json::Value,
    pub policy: Policy,
    pub http: HttpOptions,
    /// Streams to read; `None` reads every stream, incrementally where it can.
    pub streams: Option<Vec<String>>,
    pub state: InputState,
    pub concurrency: Concurrency,
    pub format: Format,
    pub sink: Box<dyn Write + Send>,
}

impl RunRequest {
    pub fn new(plugin: impl Into<PathBuf>, config: serde_json::Value, sink: Box<dyn Write + Send>) -> Self {
        RunRequest {
            plugin: plugin.into(),
            config,
            policy: Policy::default(),
            http: HttpOptions::default(),
            streams: None,
            state: InputState::default(),
            concurrency: Concurrency::default(),
            format: Format::Airbyte,
            sink,
        }
    }
}

impl Runtime {
    /// `pooling` asks for the pooling allocator, falling back to on-demand allocation where the
    /// address space does not allow it.
    pub fn new(cache_dir: PathBuf, pooling: bool) -> anyhow::Result<Self> {
        Ok(Runtime {
            engine: Engine::with_pooling(cache_dir, pooling)?,
            plugins: Mutex::new(HashMap::new()),
            loading: tokio::sync::Mutex::new(()),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn loaded(&self, path: &PathBuf) -> Option<Arc<Plugin>> {
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
        let plugins = self.plugins.lock().unwrap_or_else(|e| e.into_inner());
        plugins.get(path).filter(|(at, _)| *at == modified).map(|(_, p)| p.clone())
    }

    /// Runs one request to the end. Its messages go to the request's sink; the report carries
    /// the per-stream results and what the run's guests used.
    pub async fn run(&self, request: RunRequest) -> Result<ReadReport, RunError> {
        let (out, writer) = Output::spawn(request.format, request.sink);
        let result = self
            .run_with(
                &out,
                request.plugin,
                request.config,
                &request.policy,
                request.http,
                request.streams,
                &request.state,
                request.concurrency,
            )
            .await;
        if let Err(e) = &result {
            let _ = out.error(&e.message, e.failure, None).await;
        }
        drop(out);
        writer.finish().map_err(|e| RunError::system(format!("cannot write output: {e}")))?;
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_with(
        &self,
        out: &Output,
        path: PathBuf,
        config: serde_json::Value,
        policy: &Policy,
        http: HttpOptions,
        streams: Option<Vec<String>>,
        state: &InputState,
        concurrency: Concurrency,
    ) -> Result<ReadReport, RunError> {
        if !config.is_object() {
            return Err(RunError::config("the config must be a JSON object"));
        }
        if policy.limits.wasm_stack_bytes != self.engine.wasm_stack_bytes() {
            return Err(RunError::config(format!(
                "this runtime's guests have a {} KiB stack; a run cannot ask for {} KiB (the stack is an engine setting)",
                self.engine.wasm_stack_bytes() >> 10,
                policy.limits.wasm_stack_bytes >> 10
            )));
        }
        if self.engine.pooling() && policy.limits.memory_bytes > crate::engine::POOLED_MAX_MEMORY as u64 {
            return Err(RunError::config(format!(
                "a memory limit of {} MiB is above what pooled instances can have ({} MiB); use a runtime without pooling",
                policy.limits.memory_bytes >> 20,
                crate::engine::POOLED_MAX_MEMORY >> 20
            )));
        }
        let loading = self.loading.lock().await;
        let plugin = match self.loaded(&path) {
            Some(plugin) => {
                session::announce(&plugin, Some("already loaded in this process"), out).await?;
                plugin
            }
            None => {
                let plugin = session::load_plugin(&self.engine, &path, out).await?;
                let modified = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
                self.plugins.lock().unwrap_or_else(|e| e.into_inner()).insert(path, (modified, plugin.clone()));
                plugin
            }
        };
        drop(loading);
        let connector = session::open(plugin, config.to_string(), policy, http, out, true).await?;
        let discovered = session::discover(&connector, out).await?;
        let selection: Vec<Selected> = match streams {
            Some(names) => names.into_iter().map(|name| Selected { name, incremental: None }).collect(),
            None => discovered.iter().map(|s| Selected { name: s.name.clone(), incremental: None }).collect(),
        };
        let selected = session::select(&discovered, &selection, false, state)?;
        session::read(connector, out, selected, concurrency, Arc::new(Progress::hidden()), state).await
    }
}
