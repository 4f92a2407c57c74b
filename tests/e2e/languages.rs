//! The demo connector in Rust, Python and JavaScript: the same records, stream for stream, in
//! full, incremental and windowed reads; and a second start of the large Python and JavaScript
//! components loads their compiled code from the cache instead of compiling again.

use crate::support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The demo connector in each language, as `just build-plugins` names them.
pub const DEMO_PLUGINS: [&str; 3] = ["demo-source", "demo-source-py", "demo-source-js"];

/// A compiled-component cache shared by every test process of every run (nextest runs each test
/// in its own process): the Python and JavaScript components take seconds to compile, so each is
/// compiled once, by the first test that needs it, while the others wait on a file lock.
pub fn warm_cache(plugin_name: &str) -> PathBuf {
    let dir = workspace_root().join("target/test-cache");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join(format!("{plugin_name}.lock"))).unwrap();
    lock.lock().unwrap();
    let output = host(&["spec"]).arg(plugin(plugin_name)).arg("--cache-dir").arg(&dir).run_raw();
    assert!(output.status.success(), "{plugin_name}: {}", String::from_utf8_lossy(&output.stderr));
    dir
}

/// JSON text with object keys sorted, so equal records compare equal whatever their key order.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, String> = map.iter().map(|(k, v)| (k, canonical(v))).collect();
            let fields: Vec<String> = sorted.iter().map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))).collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// Records by stream, each as canonical JSON text, sorted: a record set to compare.
fn record_sets(run: &HostRun) -> BTreeMap<String, Vec<String>> {
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in run.of_type("RECORD") {
        let stream = m["record"]["stream"].as_str().unwrap().to_string();
        sets.entry(stream).or_default().push(canonical(&m["record"]["data"]));
    }
    sets.values_mut().for_each(|v| v.sort());
    sets
}

fn ids_of(set: &[String]) -> Vec<u64> {
    let mut ids: Vec<u64> =
        set.iter().map(|r| serde_json::from_str::<Value>(r).unwrap()["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    ids
}

fn run_demo(name: &str, cache: &Path, api: &DemoApi, config: &Path, state: Option<&Path>) -> HostRun {
    let mut host = host(&["run"]).arg(plugin(name)).arg("--config").arg(config).arg("--allow-host").arg(grant(api));
    if let Some(state) = state {
        host = host.arg("--state").arg(state);
    }
    let run = host.cache_dir(cache).run();
    assert!(run.success(), "{name}: {}", run.explain());
    run
}

#[test]
fn the_three_languages_give_identical_record_sets() {
    let caches: Vec<PathBuf> = DEMO_PLUGINS.iter().map(|p| warm_cache(p)).collect();
    let files = Files::new();
    // A first API with 300 items gives the state an incremental read starts from on the second,
    // which has 500: the items after 300 are what every language must read then.
    let before = demo_api(DemoApiConfig { records: 300, accounts: 4, ..Default::default() });
    let api = demo_api(DemoApiConfig { records: 500, accounts: 4, ..Default::default() });
    let full = files.json(
        "full.json",
        &json!({"base_url": api.base_url(), "page_size": 40, "window_minutes": 90, "report_jobs": true, "report_page_size": 60}),
    );
    let dated = files.json(
        "dated.json",
        &json!({"base_url": api.base_url(), "page_size": 40, "window_minutes": 45, "start_date": "2024-01-01T03:10:00Z"}),
    );
    let first =
        run_demo("demo-source", &caches[0], &before, &files.json("before.json", &demo_config(&before, 40)), None);
    let state = files.text("state.jsonl", first.stdout().as_bytes());

    let mut results = Vec::new();
    for (name, cache) in DEMO_PLUGINS.iter().zip(&caches) {
        let full = record_sets(&run_demo(name, cache, &api, &full, None));
        let incremental =
            record_sets(&run_demo(name, cache, &api, &files.json("inc.json", &demo_config(&api, 40)), Some(&state)));
        let dated = record_sets(&run_demo(name, cache, &api, &dated, None));
        results.push((name, full, incremental, dated));
    }

    // What the Rust connector read is right, so the others can be compared with it.
    let (_, full, incremental, dated) = &results[0];
    let all: Vec<u64> = (1..=500).collect();
    for stream in ["items", "account_items", "windowed_items", "report_items"] {
        assert_eq!(ids_of(&full[stream]), all, "full read of {stream}");
    }
    assert_eq!(ids_of(&full["accounts"]), vec![1, 2, 3, 4]);
    // Incremental from the 300-item state: only what came after; full-refresh streams in full.
    let after: Vec<u64> = (301..=500).collect();
    assert_eq!(ids_of(&incremental["account_items"]), after);
    assert_eq!(ids_of(&incremental["windowed_items"]), after);
    assert_eq!(ids_of(&incremental["items"]), all);
    // Item i is updated i minutes after midnight: after 03:10 means from item 191, in both the
    // partitioned and the windowed stream (the first window starts at the start date itself).
    assert_eq!(ids_of(&dated["account_items"]), (191..=500).collect::<Vec<u64>>());
    assert_eq!(ids_of(&dated["windowed_items"]), (191..=500).collect::<Vec<u64>>());

    for (name, other_full, other_incremental, other_dated) in &results[1..] {
        assert!(other_full == full, "{name}: full read differs from the Rust connector's");
        assert!(other_incremental == incremental, "{name}: incremental read differs from the Rust connector's");
        assert!(other_dated == dated, "{name}: read with start_date differs from the Rust connector's");
    }
}

/// The most instances a run's summary says were alive at once.
fn instances_at_once(run: &HostRun) -> u64 {
    run.instance_counts().1
}

/// The Python and JavaScript demos read their pages in steps: 16 partitions in flight, each
/// waiting 20 ms on every request, hold no instance while they wait, so the run has as many
/// instances alive at once as steps computing (`--steps-at-once`; with one, the listing's
/// instance beside the first steps makes two), where the Rust demo, reading pages whole, holds
/// one per partition in flight.
#[test]
fn partitions_read_in_steps_hold_no_instance_while_they_wait() {
    let api = demo_api(DemoApiConfig { records: 16 * 60, accounts: 16, latency_ms: 20, ..Default::default() });
    let files = Files::new();
    let config = files.json("c.json", &json!({"base_url": api.base_url(), "page_size": 20}));
    let read = |name: &str, steps_at_once: &str| {
        let cache = warm_cache(name);
        host(&["run"])
            .arg(plugin(name))
            .arg("--config")
            .arg(&config)
            .args(
                ["--allow-host", grant(&api).as_str(), "--streams", "account_items", "--concurrency", "16"]
                    .map(String::from),
            )
            .args(["--steps-at-once".to_string(), steps_at_once.to_string()])
            .cache_dir(&cache)
            .run()
    };
    for name in DEMO_PLUGINS {
        let run = read(name, "1");
        assert!(run.success(), "{name}: {}", run.explain());
        assert_eq!(ids_of(&record_sets(&run)["account_items"]), (1..=16 * 60).collect::<Vec<u64>>(), "{name}");
        let at_once = instances_at_once(&run);
        match name {
            "demo-source" => assert!(at_once >= 8, "{name}: partitions overlapped, each in its instance: {at_once}"),
            _ => assert!(at_once <= 2, "{name}: {at_once} instances alive at once"),
        }
    }
    // More steps at once, as the operator says: at most that many instances. An instance kept
    // for a partition's next step holds its step slot, and the listing's is gone before its
    // partitions start.
    let run = read("demo-source-py", "3");
    assert!(run.success(), "{}", run.explain());
    assert!(instances_at_once(&run) <= 3, "{}", run.logs().last().unwrap());
    assert!(api.stats().max_in_flight >= 8, "the partitions' requests overlapped: {}", api.stats().max_in_flight);
}

/// A step's instance is kept through a short grace while its request is out (`--step-grace-ms`):
/// an API that answers at once gets the partition's next step in the same instance. And a page's
/// last step takes the next page's first step at once, in its instance: with no grace, a page
/// costs one fresh instance (its answer's step), not two; with a long grace, a partition reads
/// all its pages in one. The records are the same either way.
#[test]
fn a_fast_answer_goes_back_to_the_instance_that_asked() {
    let api = demo_api(DemoApiConfig { records: 16 * 60, accounts: 16, ..Default::default() });
    let files = Files::new();
    let config = files.json("c.json", &json!({"base_url": api.base_url(), "page_size": 20}));
    let cache = warm_cache("demo-source-py");
    let read = |grace: &str| {
        let before = api.stats().requests_by_path.get("/accounts/{id}/items").copied().unwrap_or(0);
        let run = host(&["run"])
            .arg(plugin("demo-source-py"))
            .arg("--config")
            .arg(&config)
            .args(["--allow-host", &grant(&api), "--streams", "account_items", "--concurrency", "4"].map(String::from))
            .args(["--steps-at-once", "1", "--step-grace-ms", grace].map(String::from))
            .cache_dir(&cache)
            .run();
        assert!(run.success(), "grace {grace}: {}", run.explain());
        assert_eq!(ids_of(&record_sets(&run)["account_items"]), (1..=16 * 60).collect::<Vec<u64>>(), "grace {grace}");
        let pages = api.stats().requests_by_path["/accounts/{id}/items"] - before;
        (run.instance_counts().0, pages)
    };
    let (fresh, pages) = read("0");
    assert!(pages >= 48, "three pages or more a partition: {pages}");
    // Each answer in a fresh instance, each partition's first step in one, the listing's: one a
    // page and 16 more, where a fresh instance for both steps of a page made two a page.
    assert!(fresh >= pages, "no grace: a fresh instance for each answer: {fresh} for {pages} pages");
    assert!(fresh <= pages + 24, "the next page's first step in the instance of the page before: {fresh}");
    // With a long grace the answer goes back to the instance that asked, which takes the next
    // page's first step too: about one instance a partition (the first steps of 4 partitions
    // come before any answer says the API is fast), and the listing's.
    let (kept, pages) = read("1000");
    assert!(kept <= 16 + 8, "one instance a partition: {kept} for {pages} pages");
}

/// The LOG line saying how the plugin was loaded.
fn load_line(output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first: Value = serde_json::from_str(stdout.lines().next().expect("a first line")).unwrap();
    first["log"]["message"].as_str().unwrap().to_string()
}

fn second_start_uses_the_cache(name: &str) {
    let cache = tempfile::tempdir().unwrap();
    let spec = || host(&["spec"]).arg(plugin(name)).arg("--cache-dir").arg(cache.path()).run_raw();
    let first = spec();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(load_line(&first).contains("compiled in"), "{}", load_line(&first));
    let entries = || -> Vec<(PathBuf, std::time::SystemTime)> {
        let mut files: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
            .map(|p| (p.clone(), p.metadata().unwrap().modified().unwrap()))
            .collect();
        files.sort();
        files
    };
    let compiled = entries();
    assert_eq!(compiled.len(), 1, "one compiled entry: {compiled:?}");

    let second = spec();
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    let line = load_line(&second);
    assert!(line.contains("loaded compiled code from cache"), "{line}");
    // Nothing was compiled or written again.
    assert_eq!(entries(), compiled);
    let spec_of = |output: &std::process::Output| -> Value {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let line = stdout.lines().find(|l| l.contains("\"SPEC\"")).expect("a SPEC message").to_string();
        serde_json::from_str(&line).unwrap()
    };
    assert_eq!(spec_of(&second), spec_of(&first));
}

#[test]
fn a_second_start_of_the_python_plugin_uses_the_cache() {
    second_start_uses_the_cache("demo-source-py");
}

#[test]
fn a_second_start_of_the_javascript_plugin_uses_the_cache() {
    second_start_uses_the_cache("demo-source-js");
}

/// A packaged Python or JavaScript connector carries its compiled code (for the host that
/// packaged it): run with a fresh cache, as in a new container, it loads that code (pinned by
/// sha256 in the package manifest) instead of compiling its 13-19 MB component, and the cache
/// then holds it; code that is not the pinned one is compiled over, never run.
#[test]
fn a_package_carries_its_compiled_code_to_a_fresh_machine() {
    for name in ["demo-source-py", "demo-source-js"] {
        let warm = warm_cache(name);
        // Beside the host binary, so the package links it instead of copying it.
        let scratch = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
        let out = scratch.path().join("pkg");
        let made = host(&["package", "--name", "demo", "--out"]).arg(&out).arg(plugin(name)).cache_dir(&warm).run_raw();
        assert!(made.status.success(), "{name}: {}", String::from_utf8_lossy(&made.stderr));
        let manifest: Value = serde_json::from_slice(&std::fs::read(out.join("demo.package.json")).unwrap()).unwrap();
        let compiled = out.join(manifest["compiled"]["file"].as_str().expect("the compiled code is pinned"));
        let spec = |cache: &std::path::Path| {
            let output = std::process::Command::new(out.join("source-demo"))
                .arg("spec")
                .env("SLUICE_CACHE_DIR", cache)
                .output()
                .unwrap();
            assert!(output.status.success(), "{name}: {}", String::from_utf8_lossy(&output.stderr));
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
            first["log"]["message"].as_str().unwrap().to_string()
        };
        let fresh = tempfile::tempdir().unwrap();
        let first = spec(&fresh.path().join("cache"));
        assert!(first.contains("loaded the compiled code packaged with it"), "{name}: {first}");
        let second = spec(&fresh.path().join("cache"));
        assert!(second.contains("loaded compiled code from cache"), "{name}: {second}");
        if name != "demo-source-js" {
            continue;
        }
        // Damaged (or another host's): compiled, not run (the smaller component: a compile is seconds).
        let mut bytes = std::fs::read(&compiled).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&compiled, bytes).unwrap();
        let other = tempfile::tempdir().unwrap();
        let damaged = spec(&other.path().join("cache"));
        assert!(damaged.contains("compiled in"), "{name}: {damaged}");
    }
}
