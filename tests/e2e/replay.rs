//! Replay storage (`--replay-to`, `--batch`, `host replay`): the same suite on local files and on
//! a real S3-protocol server (moto) on loopback.

use crate::singer::{duckdb_ids, jsonl_ids, load_into};
use crate::support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sluice_tests::s3_server::S3Server;
use std::io::{BufRead, BufReader, Read};
use std::process::{Output, Stdio};

/// Where a test's runs are kept.
struct Lake {
    files: Files,
    s3: Option<S3Server>,
    root: String,
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Local,
    S3,
}

impl Lake {
    fn new(backend: Backend) -> Lake {
        let files = Files::new();
        match backend {
            Backend::Local => {
                let root = format!("file://{}", files.path().join("lake").display());
                Lake { files, s3: None, root }
            }
            Backend::S3 => {
                let s3 = S3Server::start().unwrap();
                s3.bucket("lake").unwrap();
                Lake { files, s3: Some(s3), root: "s3://lake/runs".to_string() }
            }
        }
    }

    fn env(&self) -> Vec<(String, String)> {
        self.s3.as_ref().map(S3Server::env).unwrap_or_default()
    }

    fn host(&self, args: &[&str]) -> Host {
        host(args).envs(&self.env())
    }

    /// A Singer run of the demo connector kept in this lake; `extra` are more flags.
    fn run(&self, api: &DemoApi, extra: &[&str]) -> (HostRun, String) {
        let config = self.files.json("config.json", &demo_config(api, 50));
        let run = self
            .host(&["run", "--format", "singer", "--streams", "items,account_items", "--replay-to", &self.root])
            .args(extra.iter().map(|s| s.to_string()))
            .demo_source(api, config)
            .run();
        let uri = kept_at(&run.stderr());
        (run, uri)
    }

    fn replay(&self, uri: &str, extra: &[&str]) -> Output {
        self.host(&["replay", uri]).args(extra.iter().map(|s| s.to_string())).run_raw()
    }

    /// The run folder at `uri`, opened through the host's storage layer as any S3 client would
    /// (to tamper with what the host stored).
    fn folder(&self, uri: &str) -> sluice_host::Location {
        match &self.s3 {
            None => sluice_host::Location::parse(uri).unwrap(),
            Some(s3) => {
                // The server's settings, as the host reads them from its environment.
                let store = s3
                    .env()
                    .into_iter()
                    .fold(object_store::aws::AmazonS3Builder::new(), |builder, (key, value)| {
                        builder.with_config(key.to_ascii_lowercase().parse().unwrap(), value)
                    })
                    .with_bucket_name("lake")
                    .build()
                    .unwrap();
                let key = uri.strip_prefix("s3://lake/").unwrap();
                sluice_host::Location {
                    store: std::sync::Arc::new(store),
                    prefix: object_store::path::Path::from(key),
                    uri: uri.to_string(),
                    local_dir: None,
                    dir: None,
                }
            }
        }
    }

    fn object(&self, uri: &str, name: &str) -> Vec<u8> {
        block_on(self.folder(uri).read(name)).unwrap()
    }

    fn replace_object(&self, uri: &str, name: &str, bytes: &[u8]) {
        block_on(self.folder(uri).replace(name, bytes.to_vec())).unwrap()
    }

    fn delete_object(&self, uri: &str, name: &str) {
        let folder = self.folder(uri);
        block_on(folder.store.delete(&folder.path(name))).unwrap()
    }

    /// The run's manifest, as `host replay --manifest` shows it.
    fn manifest(&self, uri: &str) -> Value {
        serde_json::from_str(&text(&self.replay(uri, &["--manifest"]))).unwrap()
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// The run's folder, from the LOG line that names it.
fn kept_at(log: &str) -> String {
    let at = log.find("this run is kept at ").unwrap_or_else(|| panic!("no replay location in: {log}"));
    log[at..].trim_start_matches("this run is kept at ").split_whitespace().next().unwrap().to_string()
}

fn text(output: &Output) -> String {
    assert!(output.status.success(), "replay failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Record ids per stream in Singer or Airbyte messages.
fn ids(messages: &[Value], stream: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = messages
        .iter()
        .filter_map(|m| match m["type"].as_str() {
            Some("RECORD") if m["stream"] == stream => m["record"]["id"].as_u64(),
            Some("RECORD") if m["record"]["stream"] == stream => m["record"]["data"]["id"].as_u64(),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids
}

fn replay_equals_the_stored_stream(backend: Backend) {
    let api = demo_api(DemoApiConfig { records: 600, accounts: 3, ..Default::default() });
    let lake = Lake::new(backend);
    // Interval 0: a segment is cut at every STATE, so the stream spans many segments.
    let (run, uri) = lake.run(&api, &["--replay-interval", "0"]);
    assert!(run.success(), "{}", run.stderr());
    assert!(uri.starts_with(&lake.root), "{uri}");
    let replayed = lake.replay(&uri, &[]);
    assert_eq!(text(&replayed), run.stdout(), "the replay differs from the run's stdout");
    let summary = String::from_utf8_lossy(&replayed.stderr).into_owned();
    let segments: u64 = summary.split("replayed ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(segments > 3, "expected many segments: {summary}");

    // In Airbyte form: the same records, and each stream's last state (items has none).
    let airbyte = lines(&text(&lake.replay(&uri, &["--format", "airbyte"])));
    let original = lines(&run.stdout());
    for stream in ["items", "account_items"] {
        assert_eq!(ids(&airbyte, stream), (1..=600).collect::<Vec<_>>());
        let last_airbyte = airbyte
            .iter()
            .rev()
            .find(|m| m["type"] == "STATE" && m["state"]["stream"]["stream_descriptor"]["name"] == stream)
            .map(|m| m["state"]["stream"]["stream_state"].clone());
        let last_singer =
            original.iter().rev().find(|m| m["type"] == "STATE").map(|m| m["value"]["bookmarks"][stream].clone());
        assert_eq!(last_airbyte, last_singer.filter(|s| !s.is_null()));
        // items is read in full: what it checkpointed while read is gone once it completed.
        assert_eq!(last_airbyte.is_some_and(|s| s != json!({})), stream == "account_items");
    }
}

#[test]
fn replay_equals_the_stored_stream_on_local_files() {
    replay_equals_the_stored_stream(Backend::Local);
}

#[test]
fn replay_equals_the_stored_stream_on_s3() {
    replay_equals_the_stored_stream(Backend::S3);
}

fn every_segment_stands_alone(backend: Backend, extra: &[&str]) {
    let api = demo_api(DemoApiConfig { records: 300, accounts: 6, ..Default::default() });
    let lake = Lake::new(backend);
    let mut args = vec!["--replay-interval", "0"];
    args.extend_from_slice(extra);
    let (run, uri) = lake.run(&api, &args);
    assert!(run.success(), "{}", run.stderr());
    let whole = text(&lake.replay(&uri, &[]));
    let segments = segment_names(&lake, &uri);
    assert!(segments.len() >= 4, "a segment per STATE: {segments:?}");
    for (i, name) in segments.iter().enumerate() {
        let alone = text(&lake.replay(&uri, &["--from", name]));
        let messages = lines(&alone);
        // Its SCHEMAs come first; every record's stream has had its SCHEMA by then.
        let mut schemas = std::collections::HashSet::new();
        let mut preamble = 0;
        let mut in_preamble = true;
        for m in &messages {
            if m["type"] == "SCHEMA" {
                schemas.insert(m["stream"].as_str().unwrap().to_string());
                preamble += usize::from(in_preamble);
            } else {
                in_preamble = false;
            }
            if m["type"] == "RECORD" {
                assert!(schemas.contains(m["stream"].as_str().unwrap()), "segment {i} has a record before its SCHEMA");
            }
        }
        // What follows the preamble is exactly the rest of the run, in order.
        let body: String = alone.split_inclusive('\n').skip(if i == 0 { 0 } else { preamble }).collect();
        assert!(whole.ends_with(&body), "segment {i} ({name}) is not the tail of the run");
        if i + 1 < segments.len() {
            // Segments are cut right after a STATE.
            let next = text(&lake.replay(&uri, &["--from", &segments[i + 1]]));
            let next_body: String = next.split_inclusive('\n').skip_while(|l| l.contains("\"SCHEMA\"")).collect();
            let own = &body[..body.len() - next_body.len().min(body.len())];
            // A stream whose first SCHEMA opens the next segment cannot be told from that
            // segment's preamble here, so SCHEMA lines at the boundary are passed over.
            let last = own.trim_end().lines().rev().find(|l| !l.contains("\"type\":\"SCHEMA\""));
            assert!(last.unwrap().contains("\"type\":\"STATE\""), "segment {i} does not end with a STATE");
        }
    }
    // A segment from the middle loads into a real target on its own.
    let middle = &segments[segments.len() / 2];
    let alone = lake.replay(&uri, &["--from", middle]);
    let out_dir = lake.files.path().join("jsonl-middle");
    std::fs::create_dir_all(&out_dir).unwrap();
    load_into("target-jsonl", &json!({"destination_path": out_dir}), &alone.stdout, lake.files.path());
    let expected = ids(&lines(&text(&alone)), "items");
    assert_eq!(jsonl_ids(&out_dir, "items"), expected);
}

/// Segment names in replay order.
fn segment_names(lake: &Lake, uri: &str) -> Vec<String> {
    let manifest = lake.manifest(uri);
    manifest["segments"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn every_segment_stands_alone_on_local_files() {
    every_segment_stands_alone(Backend::Local, &[]);
}

#[test]
fn every_gzipped_segment_stands_alone_on_s3() {
    every_segment_stands_alone(Backend::S3, &["--replay-gzip"]);
}

fn a_failed_run_keeps_every_message_up_to_the_failure(backend: Backend) {
    // Every 9th request fails and is not retried: the run fails part-way.
    let api = demo_api(DemoApiConfig { records: 600, accounts: 3, error_every: 9, ..Default::default() });
    let lake = Lake::new(backend);
    // A long interval: only the flush at exit uploads (batched) — it must still happen.
    let (run, uri) = lake.run(&api, &["--http-max-attempts", "1", "--replay-interval", "3600"]);
    assert!(!run.success(), "the run should fail");
    assert!(run.stdout().contains("\"type\":\"RECORD\""), "it failed before any record");
    assert_eq!(text(&lake.replay(&uri, &[])), run.stdout());
}

#[test]
fn a_failed_run_keeps_every_message_up_to_the_failure_on_local_files() {
    a_failed_run_keeps_every_message_up_to_the_failure(Backend::Local);
}

#[test]
fn a_failed_run_keeps_every_message_up_to_the_failure_on_s3() {
    a_failed_run_keeps_every_message_up_to_the_failure(Backend::S3);
}

/// Starts a slow run, reads stdout until `stop(lines so far)` says so, then signals it; returns
/// everything it wrote (whole lines), the exit status and the run's folder.
fn run_and_signal(
    lake: &Lake,
    api: &DemoApi,
    extra: &[&str],
    signal: i32,
    stop: impl Fn(&[String]) -> bool,
) -> (String, std::process::ExitStatus, String) {
    let config = lake.files.json("config.json", &demo_config(api, 10));
    let mut command = lake
        .host(&["run", "--format", "singer", "--streams", "account_items", "--replay-to", &lake.root])
        .args(extra.iter().map(|s| s.to_string()))
        .demo_source(api, config)
        .command();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let mut line = String::new();
    while !stop(&seen) {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the run ended before the signal");
        seen.push(line.clone());
    }
    unsafe { libc::kill(child.id() as i32, signal) };
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let mut out: String = seen.concat() + &rest;
    out.truncate(out.rfind('\n').map_or(0, |i| i + 1));
    (out, status, kept_at(&stderr))
}

#[test]
fn sigterm_stops_the_run_and_flushes_the_lake() {
    let api = demo_api(DemoApiConfig { records: 5000, accounts: 50, latency_ms: 5, ..Default::default() });
    let lake = Lake::new(Backend::S3);
    let (out, status, uri) =
        run_and_signal(&lake, &api, &["--replay-interval", "3600"], libc::SIGTERM, |seen| seen.len() >= 40);
    assert_eq!(std::os::unix::process::ExitStatusExt::into_raw(status) >> 8, 143, "exit code 128 + SIGTERM");
    assert!(out.lines().count() >= 40 && !out.contains("\"id\":5000,"), "it stopped early");
    assert_eq!(text(&lake.replay(&uri, &[])), out, "the lake holds everything the run wrote");
}

#[test]
fn after_sigkill_the_lake_holds_everything_written_or_uploaded() {
    let api = demo_api(DemoApiConfig { records: 5000, accounts: 50, latency_ms: 5, ..Default::default() });
    // Local files, continual: everything a consumer saw is in the (unsealed) last segment.
    let local = Lake::new(Backend::Local);
    let (out, status, uri) = run_and_signal(&local, &api, &[], libc::SIGKILL, |seen| seen.len() >= 60);
    assert!(!status.success());
    let replayed = local.replay(&uri, &[]);
    let stderr = String::from_utf8_lossy(&replayed.stderr).into_owned();
    assert!(stderr.contains("did not seal"), "{stderr}");
    assert!(text(&replayed).starts_with(&out), "the lake misses lines stdout had");
    // The manifest can be rebuilt from the segments.
    assert_eq!(local.manifest(&uri)["segments"].as_array().unwrap().len(), 1, "the unsealed segment is listed");
    let rebuilt = local.replay(&uri, &["--rebuild-manifest"]);
    assert!(rebuilt.status.success(), "{}", String::from_utf8_lossy(&rebuilt.stderr));
    let replayed = local.replay(&uri, &[]);
    assert!(!String::from_utf8_lossy(&replayed.stderr).contains("did not seal"));
    assert!(text(&replayed).starts_with(&out));

    // S3, batched, with STATE held until durable: every STATE seen is in the lake, with all
    // that came before it.
    let s3 = Lake::new(Backend::S3);
    let states = |seen: &[String]| seen.iter().filter(|l| l.contains("\"type\":\"STATE\"")).count();
    let (out, _, uri) =
        run_and_signal(&s3, &api, &["--replay-interval", "0", "--replay-hold-state"], libc::SIGKILL, |seen| {
            states(seen) >= 3
        });
    let through_last_state =
        &out[..out.rfind("\"type\":\"STATE\"").map(|i| i + out[i..].find('\n').unwrap() + 1).unwrap()];
    assert!(text(&s3.replay(&uri, &[])).starts_with(through_last_state), "a STATE got ahead of the lake");
}

fn a_tampered_segment_is_detected_and_a_lost_manifest_rebuilt(backend: Backend) {
    let api = demo_api(DemoApiConfig { records: 300, accounts: 3, ..Default::default() });
    let lake = Lake::new(backend);
    let (run, uri) = lake.run(&api, &["--replay-interval", "0"]);
    assert!(run.success());
    let names = segment_names(&lake, &uri);
    let original = lake.object(&uri, &names[1]);
    let mut bytes = original.clone();
    let at = bytes.len() / 2;
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    lake.replace_object(&uri, &names[1], &bytes);
    let tampered = lake.replay(&uri, &[]);
    assert!(!tampered.status.success());
    let stderr = String::from_utf8_lossy(&tampered.stderr);
    assert!(stderr.contains(&names[1]) && stderr.contains("corrupt"), "{stderr}");
    // Checked before written: the replay stops before the tampered segment's lines.
    let first_segment = lake.manifest(&uri)["segments"][0]["bytes"].as_u64().unwrap();
    assert_eq!(tampered.stdout.len() as u64, first_segment, "it wrote past the segment before");
    lake.replace_object(&uri, &names[1], &original);
    lake.delete_object(&uri, "manifest.json");
    let rebuilt = lake.replay(&uri, &[]);
    assert_eq!(text(&rebuilt), run.stdout(), "segments alone replay the run");
    assert!(String::from_utf8_lossy(&rebuilt.stderr).contains("no manifest"));
}

#[test]
fn a_tampered_segment_is_detected_and_a_lost_manifest_rebuilt_on_local_files() {
    a_tampered_segment_is_detected_and_a_lost_manifest_rebuilt(Backend::Local);
}

#[test]
fn a_tampered_segment_is_detected_and_a_lost_manifest_rebuilt_on_s3() {
    a_tampered_segment_is_detected_and_a_lost_manifest_rebuilt(Backend::S3);
}

#[test]
fn the_manifest_says_what_produced_the_run_but_not_the_config() {
    let api = demo_api(DemoApiConfig { records: 100, ..Default::default() });
    let lake = Lake::new(Backend::Local);
    let (run, uri) = lake.run(&api, &[]);
    assert!(run.success());
    let manifest = lake.manifest(&uri);
    let plugin_sha = hex::encode(Sha256::digest(std::fs::read(plugin("demo-source")).unwrap()));
    assert_eq!(manifest["plugin"]["sha256"], plugin_sha.as_str());
    assert_eq!(manifest["plugin"]["wit"], "sluice:connector@0.1.7");
    let config = demo_config(&api, 50).to_string();
    assert_eq!(manifest["plugin"]["config_sha256"], hex::encode(Sha256::digest(config.as_bytes())).as_str());
    assert!(!manifest.to_string().contains(&api.base_url()), "the config leaked into the manifest");
    assert_eq!(manifest["outcome"], "succeeded");
    let segment = &manifest["segments"][0];
    assert_eq!(segment["records"], 200);
    assert_eq!(segment["streams"], json!(["account_items", "items"]));
    assert!(segment["first_emitted"].is_string() && segment["last_emitted"].is_string());
}

fn replayed_runs_load_into_singer_targets_like_direct_runs(backend: Backend) {
    let api = demo_api(DemoApiConfig { records: 240, accounts: 4, ..Default::default() });
    let lake = Lake::new(backend);
    let (run, uri) = lake.run(&api, &["--replay-cadence", "batched", "--replay-gzip", "--replay-interval", "0"]);
    assert!(run.success());
    let replayed = lake.replay(&uri, &[]);
    assert_eq!(text(&replayed), run.stdout());
    let dir = lake.files.path();
    let (direct_dir, replay_dir) = (dir.join("direct"), dir.join("replayed"));
    std::fs::create_dir_all(&direct_dir).unwrap();
    std::fs::create_dir_all(&replay_dir).unwrap();
    load_into("target-jsonl", &json!({"destination_path": direct_dir}), &run.output.stdout, dir);
    load_into("target-jsonl", &json!({"destination_path": replay_dir}), &replayed.stdout, dir);
    let db = |name: &str| json!({"path": dir.join(name), "default_target_schema": "main"});
    load_into("target-duckdb", &db("direct.duckdb"), &run.output.stdout, dir);
    load_into("target-duckdb", &db("replayed.duckdb"), &replayed.stdout, dir);
    for stream in ["items", "account_items"] {
        assert_eq!(jsonl_ids(&replay_dir, stream), (1..=240).collect::<Vec<_>>());
        assert_eq!(jsonl_ids(&replay_dir, stream), jsonl_ids(&direct_dir, stream));
        assert_eq!(duckdb_ids(&dir.join("replayed.duckdb"), stream), duckdb_ids(&dir.join("direct.duckdb"), stream));
    }
}

#[test]
fn replayed_runs_load_into_singer_targets_like_direct_runs_from_local_files() {
    replayed_runs_load_into_singer_targets_like_direct_runs(Backend::Local);
}

#[test]
fn replayed_runs_load_into_singer_targets_like_direct_runs_from_s3() {
    replayed_runs_load_into_singer_targets_like_direct_runs(Backend::S3);
}

fn batch_mode(backend: Backend) {
    let api = demo_api(DemoApiConfig { records: 500, accounts: 2, ..Default::default() });
    let lake = Lake::new(backend);
    let (direct, _) = lake.run(&api, &[]);
    for compression in ["none", "gzip"] {
        let (run, uri) = lake.run(&api, &["--batch", "--batch-compression", compression, "--batch-records", "200"]);
        assert!(run.success(), "{}", run.stderr());
        let messages = lines(&run.stdout());
        assert!(messages.iter().all(|m| m["type"] != "RECORD"), "BATCH mode wrote RECORD lines");
        let batches: Vec<&Value> = messages.iter().filter(|m| m["type"] == "BATCH").collect();
        assert!(batches.len() >= 6, "{} BATCH messages", batches.len());
        for batch in &batches {
            assert_eq!(batch["encoding"], json!({"format": "jsonl", "compression": compression}));
            let file = batch["manifest"][0].as_str().unwrap();
            assert!(file.starts_with(&format!("{uri}/batches/")), "{file} is not an absolute URI in the run");
            if let Some(path) = file.strip_prefix("file://") {
                let bytes = std::fs::read(path).unwrap();
                match compression {
                    "none" => assert_eq!(bytes[0], b'{', "compression none must mean none"),
                    _ => assert_eq!(&bytes[..2], &[0x1f, 0x8b], "not gzip"),
                }
            }
        }
        // Every STATE comes after the BATCH messages holding the records it covers.
        let last_batch = messages.iter().rposition(|m| m["type"] == "BATCH").unwrap();
        assert!(messages[last_batch..].iter().any(|m| m["type"] == "STATE"));
        assert_eq!(text(&lake.replay(&uri, &[])), run.stdout(), "replay keeps BATCH messages as they were");
        let expanded = lines(&text(&lake.replay(&uri, &["--expand-batch"])));
        for stream in ["items", "account_items"] {
            assert_eq!(ids(&expanded, stream), ids(&direct.messages, stream));
        }
        let airbyte = lines(&text(&lake.replay(&uri, &["--format", "airbyte"])));
        assert_eq!(ids(&airbyte, "items"), (1..=500).collect::<Vec<_>>());
    }
}

#[test]
fn batch_mode_on_local_files() {
    batch_mode(Backend::Local);
}

#[test]
fn batch_mode_on_s3() {
    batch_mode(Backend::S3);
}

#[test]
fn batch_files_can_go_elsewhere_than_the_message_log() {
    let api = demo_api(DemoApiConfig { records: 100, ..Default::default() });
    let lake = Lake::new(Backend::Local);
    let data = format!("file://{}", lake.files.path().join("data").display());
    let (run, _) = lake.run(&api, &["--batch", "--batch-to", &data, "--batch-compression", "none"]);
    assert!(run.success(), "{}", run.stderr());
    let batch = run.messages.iter().find(|m| m["type"] == "BATCH").unwrap();
    assert!(batch["manifest"][0].as_str().unwrap().starts_with(&format!("{data}/")), "{batch}");
}

#[test]
fn storage_mistakes_get_clear_errors() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 50));
    let err = |args: &[&str]| {
        let out = host(&["run"]).args(args.iter().map(|s| s.to_string())).demo_source(&api, &config).run_raw();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(err(&["--replay-to", "ftp://x/y"]).contains("unsupported storage URI scheme \"ftp\""));
    assert!(err(&["--batch", "--replay-to", "/tmp/x"]).contains("use it with `run --format singer`"));
    assert!(err(&["--format", "singer", "--batch"]).contains("--batch needs somewhere for the data files"));

    let lake = Lake::new(Backend::Local);
    let (run, uri) = lake.run(&api, &[]);
    assert!(run.success());
    let root = lake.replay(&lake.root, &[]);
    assert!(!root.status.success());
    assert!(String::from_utf8_lossy(&root.stderr).contains(&uri), "a folder of runs names them");
    let empty = lake.replay(&format!("file://{}", files.path().display()), &[]);
    assert!(String::from_utf8_lossy(&empty.stderr).contains("holds no replay segments"));
    let missing = lake.replay(&uri, &["--from", "01NOPE"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("has no segment 01NOPE"));
}

#[test]
fn an_airbyte_run_keeps_the_same_data_as_a_singer_stream() {
    let api = demo_api(DemoApiConfig { records: 300, accounts: 3, ..Default::default() });
    let lake = Lake::new(Backend::Local);
    let config = lake.files.json("config.json", &demo_config(&api, 50));
    let run = lake
        .host(&["run", "--streams", "items,account_items", "--replay-to", &lake.root])
        .demo_source(&api, config)
        .run();
    assert!(run.success(), "{}", run.explain());
    let uri = kept_at(&run.logs().join("\n"));
    let singer = lines(&text(&lake.replay(&uri, &[])));
    assert_eq!(singer[0]["type"], "SCHEMA");
    for stream in ["items", "account_items"] {
        assert_eq!(ids(&singer, stream), sorted(run.ids(stream)));
    }
    let last = singer.iter().rev().find(|m| m["type"] == "STATE").unwrap();
    assert_eq!(Some(last["value"]["bookmarks"]["account_items"].clone()), run.last_state("account_items"));
    assert!(singer.iter().all(|m| m["type"] != "LOG" && m["type"] != "TRACE"), "only Singer messages are kept");
}
