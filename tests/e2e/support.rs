//! Helpers shared by the end-to-end tests.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub use sluice_tests::demo_api::{DemoApi, DemoApiConfig};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A plugin built by `just build-plugins`.
pub fn plugin(name: &str) -> PathBuf {
    let path = workspace_root().join("target/plugins").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: run `just build-plugins` first (`just test` does)", path.display());
    path
}

/// One compiled-component cache for the whole test run, so plugins compile once.
fn shared_cache() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// What one `host` invocation produced.
#[derive(Debug)]
pub struct HostRun {
    pub output: Output,
    pub messages: Vec<Value>,
}

impl HostRun {
    pub fn success(&self) -> bool {
        self.output.status.success()
    }
    /// stderr and every TRACE error, for assertion messages.
    pub fn explain(&self) -> String {
        format!("stderr: {}\nerrors: {:?}", self.stderr(), self.errors())
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.messages.iter().filter(|m| m["type"] == kind).collect()
    }
    pub fn records(&self, stream: &str) -> Vec<&Value> {
        self.of_type("RECORD")
            .into_iter()
            .filter(|m| m["record"]["stream"] == stream)
            .map(|m| &m["record"]["data"])
            .collect()
    }
    /// Record ids of a stream, in output order.
    pub fn ids(&self, stream: &str) -> Vec<u64> {
        self.records(stream).iter().map(|r| r["id"].as_u64().expect("record has an integer id")).collect()
    }
    pub fn errors(&self) -> Vec<&Value> {
        self.of_type("TRACE")
            .into_iter()
            .filter(|m| m["trace"]["type"] == "ERROR")
            .map(|m| &m["trace"]["error"])
            .collect()
    }
    pub fn logs(&self) -> Vec<String> {
        self.of_type("LOG").iter().map(|m| m["log"]["message"].as_str().unwrap().to_string()).collect()
    }
    /// The run summary's figures: records read, guest time (s) and peak guest memory (MiB).
    pub fn summary_figures(&self) -> (u64, f64, f64) {
        let line = self.logs().into_iter().rfind(|l| l.starts_with("read ")).expect("a summary");
        let after = |label: &str| -> f64 {
            let rest = &line[line.find(label).unwrap_or_else(|| panic!("{label} in {line}")) + label.len()..];
            rest.trim_start().split(|c: char| !(c.is_ascii_digit() || c == '.')).next().unwrap().parse().unwrap()
        };
        (after("read ") as u64, after("guest time "), after("peak guest memory "))
    }
    /// The run summary's instance counts: made in all, and alive at most at once.
    pub fn instance_counts(&self) -> (u64, u64) {
        let summary = self.logs().last().cloned().unwrap_or_default();
        let (before, after) =
            summary.split_once(" instances (").unwrap_or_else(|| panic!("no instances in {summary:?}"));
        let number = |n: Option<&str>| -> u64 {
            n.and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no instance count in {summary:?}"))
        };
        (number(before.rsplit(' ').next()), number(after.split(' ').next()))
    }
    pub fn statuses(&self, stream: &str) -> Vec<String> {
        self.of_type("TRACE")
            .into_iter()
            .filter(|m| {
                m["trace"]["type"] == "STREAM_STATUS"
                    && m["trace"]["stream_status"]["stream_descriptor"]["name"] == stream
            })
            .map(|m| m["trace"]["stream_status"]["status"].as_str().unwrap().to_string())
            .collect()
    }
    /// The last STATE message's stream state for `stream`.
    pub fn last_state(&self, stream: &str) -> Option<Value> {
        self.of_type("STATE")
            .into_iter()
            .rev()
            .find(|m| m["state"]["stream"]["stream_descriptor"]["name"] == stream)
            .map(|m| m["state"]["stream"]["stream_state"].clone())
    }
}

/// Builds and runs a `host` command line.
pub struct Host {
    args: Vec<String>,
    cache: Option<PathBuf>,
    env: Vec<(String, String)>,
}

pub fn host(args: &[&str]) -> Host {
    Host { args: args.iter().map(|s| s.to_string()).collect(), cache: None, env: Vec::new() }
}

impl Host {
    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.args.push(arg.as_ref().to_string_lossy().into_owned());
        self
    }
    pub fn args(mut self, args: impl IntoIterator<Item = String>) -> Self {
        self.args.extend(args);
        self
    }
    /// The demo connector against `api`, with `config`, granted that API and nothing else.
    pub fn demo_source(self, api: &DemoApi, config: impl AsRef<Path>) -> Self {
        self.arg(plugin("demo-source")).arg("--config").arg(config.as_ref()).arg("--allow-host").arg(grant(api))
    }
    pub fn envs(mut self, vars: &[(String, String)]) -> Self {
        self.env.extend(vars.iter().cloned());
        self
    }
    /// The command, not started (for tests that signal or kill it).
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_host"));
        command
            .args(&self.args)
            .env("SLUICE_CACHE_DIR", self.cache.as_deref().unwrap_or(shared_cache()))
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }
    pub fn cache_dir(mut self, dir: &Path) -> Self {
        self.cache = Some(dir.to_path_buf());
        self
    }
    pub fn run(self) -> HostRun {
        let output = self.command().output().expect("run host");
        let messages = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}")))
            .collect();
        HostRun { output, messages }
    }
}

/// A temporary directory holding a test's files.
pub struct Files(tempfile::TempDir);

impl Files {
    pub fn new() -> Self {
        Files(tempfile::tempdir().unwrap())
    }
    pub fn json(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
        path
    }
    pub fn text(&self, name: &str, text: &[u8]) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Starts the demo API on a free loopback port.
pub fn demo_api(cfg: DemoApiConfig) -> DemoApi {
    DemoApi::start_background(cfg).expect("start demo API")
}

/// `host:port` of the API.
pub fn host_port(api: &DemoApi) -> String {
    api.addr().to_string()
}

/// The grant for the API, for `--allow-host`: plain http needs the `http://` prefix.
pub fn grant(api: &DemoApi) -> String {
    format!("http://{}", api.addr())
}

pub fn demo_config(api: &DemoApi, page_size: u64) -> Value {
    json!({"base_url": api.base_url(), "page_size": page_size})
}

/// A configured catalog selecting streams by name and sync mode.
pub fn catalog(streams: &[(&str, &str)]) -> Value {
    json!({"streams": streams.iter().map(|(name, mode)| json!({
        "stream": {"name": name, "json_schema": {}, "supported_sync_modes": ["full_refresh", "incremental"]},
        "sync_mode": mode,
        "destination_sync_mode": "append",
    })).collect::<Vec<_>>()})
}

pub fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

impl Host {
    /// Runs without parsing stdout as protocol messages (for --help and the like).
    pub fn run_raw(self) -> Output {
        self.command().output().expect("run host")
    }
}
