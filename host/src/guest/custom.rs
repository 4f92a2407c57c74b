//! Custom components (a manifest's `components.py`) inside the sandbox. The declarative engine
//! imports `sluice:components/custom` (wit/components); the host serves each call by calling the
//! components runtime (plugins/components-py, compiled with componentize-py), which it
//! instantiates in the engine instance's own store the first time the engine asks, and gives
//! the custom source to. So custom code runs under the engine's CPU, memory, wall-clock and log
//! limits, one runtime per engine instance (per partition), and its only way out is the runtime's
//! `host` import: HTTP through the run's egress (policy, retries, recording) and log lines.

use crate::bindings::components::RuntimePre;
use crate::bindings::components::sluice::components::host as runtime_host;
use crate::bindings::{self, HttpError, Level, Request};
use crate::guest::pool::PoolNeeds;
use crate::guest::sandbox::{CustomSession, GuestLog, GuestState};
use anyhow::{Result, anyhow};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

/// The file beside a manifest that holds its custom components, as Airbyte's connector folders
/// ship it.
pub const COMPONENTS_FILE: &str = "components.py";
/// The largest components.py (the biggest of the 55 real ones is 63 KB).
pub const MAX_COMPONENTS_BYTES: u64 = 1 << 20;
/// Overrides where the runtime component is.
pub const RUNTIME_ENV: &str = "SLUICE_COMPONENTS_RUNTIME";
pub const RUNTIME_FILE: &str = "components.wasm";

/// The import the engine calls.
const CUSTOM_INTERFACE: &str = "sluice:components/custom@0.1.0";

/// A manifest's custom code.
#[derive(Debug)]
pub struct CustomCode {
    /// Where it came from, for messages and tracebacks.
    pub origin: String,
    pub sha256: String,
    pub source: String,
}

impl CustomCode {
    pub fn new(origin: String, source: String) -> Self {
        CustomCode { origin, sha256: hex::encode(Sha256::digest(source.as_bytes())), source }
    }

    /// The custom components beside `manifest`, if there are: `STEM.components.py` for a
    /// manifest `STEM.yaml` (as `host package` writes them), else `components.py` (as Airbyte's
    /// connector folders ship them); capped, UTF-8.
    pub fn beside(manifest: &Path) -> Result<Option<CustomCode>> {
        let stem = manifest.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let own = manifest.with_file_name(format!("{stem}.{COMPONENTS_FILE}"));
        let Some(path) = [own, manifest.with_file_name(COMPONENTS_FILE)].into_iter().find(|p| p.is_file()) else {
            return Ok(None);
        };
        let cap = crate::data::files::Cap::new("components.py", MAX_COMPONENTS_BYTES);
        let bytes = crate::data::files::read_capped(&path, cap.regular())?;
        let source = String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))?;
        Ok(Some(CustomCode::new(path.display().to_string(), source)))
    }
}

/// The components runtime, compiled and linked once, with a manifest's custom code.
pub struct Custom {
    pub pre: RuntimePre<GuestState>,
    pub runtime_sha256: String,
    pub code: Arc<CustomCode>,
    /// What the runtime takes from the pool, in the engine instance's store beside it.
    pub pool_needs: PoolNeeds,
    /// The runtime's `load` call that gives it the code (JSON), made once.
    load: Arc<str>,
}

impl Custom {
    pub fn new(pre: RuntimePre<GuestState>, runtime_sha256: String, code: Arc<CustomCode>) -> Self {
        let load = json!({"module": "components", "source": code.source, "filename": COMPONENTS_FILE});
        let pool_needs = PoolNeeds::of(pre.instance_pre().component());
        Custom { pre, runtime_sha256, code, pool_needs, load: load.to_string().into() }
    }

    /// What an engine instance's store keeps: the runtime is started on first use.
    pub fn session(&self) -> CustomSession {
        CustomSession { pre: self.pre.clone(), load: self.load.clone(), runtime: None }
    }
}

/// The runtime component: `$SLUICE_COMPONENTS_RUNTIME`, else `components.wasm` beside the host
/// executable, else `../plugins/components.wasm` from it (the build tree's `target/plugins`).
pub fn runtime_path() -> Result<PathBuf> {
    crate::guest::manifest::shipped_component(RUNTIME_ENV, RUNTIME_FILE, "the components runtime")
}

/// The host's imports for custom code: the engine's `custom.call`, and the runtime's `host`.
pub fn add_to_linker(linker: &mut Linker<GuestState>) -> Result<()> {
    runtime_host::add_to_linker::<GuestState, wasmtime::component::HasSelf<GuestState>>(linker, |s| s)?;
    linker.instance(CUSTOM_INTERFACE)?.func_wrap_async(
        "call",
        |mut store: StoreContextMut<'_, GuestState>, (component, method, args): (u32, String, String)| {
            Box::new(async move { Ok((call(&mut store, component, &method, &args).await?,)) })
        },
    )?;
    Ok(())
}

/// One call of the engine into custom code. An error of the custom code is the engine's to
/// report; a trap (the CPU budget, the memory limit) ends the engine's call as its own would.
async fn call(
    store: &mut StoreContextMut<'_, GuestState>,
    component: u32,
    method: &str,
    args: &str,
) -> wasmtime::Result<Result<String, String>> {
    let runtime = match runtime(store).await? {
        Ok(runtime) => runtime,
        Err(e) => return Ok(Err(e)),
    };
    runtime.sluice_components_custom().call_call(&mut *store, component, method, args).await
}

/// The runtime of this instance, started (and given the custom code) on first use.
async fn runtime(
    store: &mut StoreContextMut<'_, GuestState>,
) -> wasmtime::Result<Result<Arc<bindings::components::Runtime>, String>> {
    let Some(session) = store.data().custom.as_ref() else {
        let error = json!({"kind": "unavailable", "message": "this run has no custom components (no components.py beside the manifest)"});
        return Ok(Err(error.to_string()));
    };
    if let Some(started) = &session.runtime {
        return Ok(started.clone());
    }
    let (pre, load) = (session.pre.clone(), session.load.clone());
    let runtime = Arc::new(pre.instantiate_async(&mut *store).await?);
    let loaded = runtime.sluice_components_custom().call_call(&mut *store, 0, "load", &load).await?;
    let started = loaded.map(|_| runtime);
    if let Some(session) = store.data_mut().custom.as_mut() {
        session.runtime = Some(started.clone());
    }
    Ok(started)
}

impl runtime_host::Host for GuestState {
    async fn send(&mut self, req: runtime_host::Request) -> Result<runtime_host::Response, runtime_host::HttpError> {
        let req = Request { method: req.method, url: req.url, headers: req.headers, body: req.body };
        match bindings::sluice::connector::http::Host::send(self, req).await {
            Ok(r) => Ok(runtime_host::Response { status: r.status, headers: r.headers, body: r.body }),
            Err(e) => Err(match e {
                HttpError::Denied(m) => runtime_host::HttpError::Denied(m),
                HttpError::Timeout(m) => runtime_host::HttpError::Timeout(m),
                HttpError::Connection(m) => runtime_host::HttpError::Connection(m),
                HttpError::TooLarge(m) => runtime_host::HttpError::TooLarge(m),
                HttpError::InvalidRequest(m) => runtime_host::HttpError::InvalidRequest(m),
            }),
        }
    }

    async fn log(&mut self, level: runtime_host::Level, message: String) {
        let level = match level {
            runtime_host::Level::Debug => Level::Debug,
            runtime_host::Level::Info => Level::Info,
            runtime_host::Level::Warn => Level::Warn,
            runtime_host::Level::Error => Level::Error,
        };
        self.push_log(GuestLog { level, message });
    }
}
