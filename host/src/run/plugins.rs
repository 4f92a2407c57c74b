//! The plugins a runtime has loaded: each compiled once per content (by sha256), kept for the
//! runs that follow, the least recently used let go past a bound; a manifest is the declarative
//! engine's component given the manifest.

use super::request::RunError;
use super::session;
use crate::data::protocol::Output;
use crate::guest::engine::{Engine, Plugin};
use crate::guest::{custom, manifest};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Plugins kept loaded at most; the least recently used is let go past them.
pub const MAX_LOADED_PLUGINS: usize = 64;

/// The engine and the plugins loaded in it, shared by every run of a [`crate::Runtime`].
pub struct Plugins {
    engine: Arc<Engine>,
    /// Loaded plugins by the sha256 of their bytes, each behind its own lock: tenants starting
    /// one plugin together compile it once, and nobody waits for another plugin's compile. A
    /// file replaced with its modification time kept (`cp -p`, rsync, tar) is another plugin.
    loaded: Mutex<Loaded>,
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

impl Plugins {
    pub fn new(engine: Arc<Engine>) -> Self {
        Plugins { engine, loaded: Mutex::new(Loaded::default()) }
    }

    pub fn engine(&self) -> &Engine {
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
        let custom = self.custom_components(path).await?;
        let mut message = format!(
            "declarative manifest {} sha256 {}, run by the declarative engine",
            loaded.path.display(),
            loaded.sha256
        );
        if let Some(custom) = &custom {
            message += &format!(
                ", custom components {} sha256 {} run in the components runtime sha256 {}",
                custom.code.origin, custom.code.sha256, custom.runtime_sha256
            );
        }
        out.log("INFO", &message).await?;
        Ok(Arc::new(Plugin { manifest: Some(Arc::new(loaded)), custom, ..(*engine).clone() }))
    }

    /// `plugin` with the custom components the config carries (`__injected_components_py`, as
    /// the CDK's source-declarative-manifest takes them, verified against
    /// `__injected_components_py_checksums` when it gives one); `plugin` itself without them.
    pub(crate) async fn with_injected_components(
        &self,
        plugin: Arc<Plugin>,
        config: &serde_json::Value,
        out: &Output,
    ) -> Result<Arc<Plugin>, RunError> {
        let Some(source) = config.get(manifest::INJECTED_KEY) else { return Ok(plugin) };
        let code = injected_components(source, config.get(manifest::CHECKSUMS_KEY))?;
        if plugin.custom.is_some() {
            return Err(RunError::config(format!(
                "the config carries {} and a components.py is beside the manifest: give one of them",
                manifest::INJECTED_KEY
            )));
        }
        if plugin.manifest.is_none() && config.get(manifest::MANIFEST_KEY).is_none() {
            return Err(RunError::config(format!(
                "the config carries {}, which only a declarative manifest runs",
                manifest::INJECTED_KEY
            )));
        }
        let engine = self.engine.clone();
        let custom = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let (pre, sha256) = engine.load_components_runtime(&custom::runtime_path()?)?;
            Ok(custom::Custom::new(pre, sha256, Arc::new(code)))
        })
        .await
        .map_err(|e| RunError::system(format!("loading the custom components failed: {e}")))?
        .map_err(|e| RunError::config(format!("{e:#}")))?;
        let message = format!(
            "custom components from the config ({}) sha256 {} run in the components runtime sha256 {}",
            manifest::INJECTED_KEY,
            custom.code.sha256,
            custom.runtime_sha256
        );
        out.log("INFO", &message).await?;
        Ok(Arc::new(Plugin { custom: Some(Arc::new(custom)), ..(*plugin).clone() }))
    }

    /// The custom components beside the manifest at `path` (components.py), with the runtime
    /// that runs them; `None` when it has none.
    async fn custom_components(&self, path: &Path) -> Result<Option<Arc<custom::Custom>>, RunError> {
        let (engine, owned) = (self.engine.clone(), path.to_path_buf());
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let Some(code) = custom::CustomCode::beside(&owned)? else {
                return Ok(None);
            };
            let (pre, sha256) = engine.load_components_runtime(&custom::runtime_path()?)?;
            Ok(Some(Arc::new(custom::Custom::new(pre, sha256, Arc::new(code)))))
        })
        .await
        .map_err(|e| RunError::system(format!("loading the custom components failed: {e}")))?
        .map_err(|e| RunError::config(format!("{e:#}")))
    }

    /// The component at `path`, compiled once per content: its sha256 is found every time (see
    /// [`Engine::read`]: hashed from its bytes, read under the size limit, or remembered for the
    /// file as it is), and the plugin with that sha256 is the one run.
    async fn component(&self, path: &Path, policy: &str, out: &Output) -> Result<Arc<Plugin>, RunError> {
        let started = std::time::Instant::now();
        let (engine, owned) = (self.engine.clone(), path.to_path_buf());
        let file = tokio::task::spawn_blocking(move || engine.read(&owned))
            .await
            .map_err(|e| RunError::system(format!("loading the plugin failed: {e}")))?
            .map_err(|e| RunError::config(format!("{e:#}")))?;
        let slot = self.loaded.lock().unwrap_or_else(|e| e.into_inner()).slot(&file.sha256);
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
        let plugin = tokio::task::spawn_blocking(move || engine.load_file(&owned, file, started))
            .await
            .map_err(|e| RunError::system(format!("loading the plugin failed: {e}")))?
            .map_err(|e| RunError::config(format!("{e:#}")))?;
        let plugin = Arc::new(plugin);
        *slot = Some(plugin.clone());
        drop(slot);
        session::announce(&plugin, None, policy, out).await?;
        Ok(plugin)
    }
}

/// The custom code of `__injected_components_py`: text within the size limit, whose checksum is
/// the one `checksums` gives (`sha256` or `md5`, as the CDK verifies), when it gives one.
fn injected_components(
    source: &serde_json::Value,
    checksums: Option<&serde_json::Value>,
) -> Result<custom::CustomCode, RunError> {
    let key = manifest::INJECTED_KEY;
    let source =
        source.as_str().ok_or_else(|| RunError::config(format!("{key} must be the text of a components.py")))?;
    if source.len() as u64 > custom::MAX_COMPONENTS_BYTES {
        return Err(RunError::config(format!("{key} is larger than {} KiB", custom::MAX_COMPONENTS_BYTES >> 10)));
    }
    let code = custom::CustomCode::new(key.to_string(), source.to_string());
    let Some(checksums) = checksums else { return Ok(code) };
    let given = |name: &str| checksums.get(name).and_then(serde_json::Value::as_str).map(str::to_ascii_lowercase);
    let matches = match (given("sha256"), given("md5")) {
        (Some(sha256), _) => sha256 == code.sha256,
        (None, Some(md5)) => md5 == hex::encode(<md5::Md5 as md5::Digest>::digest(source.as_bytes())),
        (None, None) => {
            return Err(RunError::config(format!("{} gives neither a sha256 nor an md5", manifest::CHECKSUMS_KEY)));
        }
    };
    match matches {
        true => Ok(code),
        false => Err(RunError::config(format!(
            "{key} does not match its checksum in {}: the code is not the code that was meant",
            manifest::CHECKSUMS_KEY
        ))),
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
