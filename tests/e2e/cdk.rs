//! Differential tests against the Airbyte CDK itself: the same manifest, config, catalog and mock
//! API (the demo API's `/v2/events`, whose data each test sets and changes between syncs) run by
//! Sluice and by the CDK's `source-declarative-manifest` (airbyte-cdk 7.39.1, installed by `just
//! setup-cdk` into `target/tools/airbyte-cdk`), over an initial sync and incremental syncs with
//! late-arriving and fresh records. Each engine must read the same records and write states the
//! other resumes from with nothing lost and nothing read again.

use crate::declarative::manifest;
use crate::support::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// The CDK's manifest runner, installed by `just setup-cdk`.
fn cdk_runner() -> PathBuf {
    let path = workspace_root().join("target/tools/airbyte-cdk/bin/source-declarative-manifest");
    assert!(path.exists(), "{} is missing: run `just setup-cdk` first (`just test` does)", path.display());
    path
}

/// What one engine's `read` wrote: every message, parsed.
pub struct Read {
    pub engine: &'static str,
    pub messages: Vec<Value>,
    pub stderr: String,
}

impl Read {
    pub fn records(&self, stream: &str) -> Vec<Value> {
        let mut records: Vec<Value> = self
            .messages
            .iter()
            .filter(|m| m["type"] == "RECORD" && m["record"]["stream"] == stream)
            .map(|m| m["record"]["data"].clone())
            .collect();
        records.sort_by_key(|r| (r["id"].as_i64(), r.to_string()));
        records
    }

    pub fn ids(&self, stream: &str) -> Vec<i64> {
        self.records(stream).iter().map(|r| r["id"].as_i64().expect("an integer id")).collect()
    }

    /// The last STATE of each stream, as a state file of per-stream messages.
    pub fn final_states(&self) -> Value {
        let mut last: Vec<(String, Value)> = Vec::new();
        for m in self.messages.iter().filter(|m| m["type"] == "STATE") {
            let name = m["state"]["stream"]["stream_descriptor"]["name"].as_str().unwrap_or_default().to_string();
            let state = m["state"]["stream"]["stream_state"].clone();
            match last.iter_mut().find(|(n, _)| *n == name) {
                Some(entry) => entry.1 = state,
                None => last.push((name, state)),
            }
        }
        Value::Array(
            last.into_iter()
                .map(|(name, state)| {
                    json!({"type": "STREAM", "stream": {"stream_descriptor": {"name": name}, "stream_state": state}})
                })
                .collect(),
        )
    }

    pub fn state_of(&self, stream: &str) -> Option<Value> {
        self.final_states()
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["stream"]["stream_descriptor"]["name"] == stream)
            .map(|m| m["stream"]["stream_state"].clone())
    }

    pub fn errors(&self) -> Vec<&Value> {
        self.messages.iter().filter(|m| m["type"] == "TRACE" && m["trace"]["type"] == "ERROR").collect()
    }

    pub fn explain(&self) -> String {
        format!("{} errors: {:?}\nstderr (tail): {}", self.engine, self.errors(), tail(&self.stderr))
    }
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(3000);
    let start = (start..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
    &text[start..]
}

/// One sync of a manifest by both engines, or by one with the other's state.
pub struct Sync<'a> {
    pub manifest: &'a str,
    pub api: &'a DemoApi,
    pub config: Value,
    pub catalog: Value,
    pub files: &'a Files,
}

impl Sync<'_> {
    fn paths(&self, state: Option<&Value>, tag: &str) -> (PathBuf, PathBuf, Option<PathBuf>) {
        let config = self.files.json(&format!("config-{tag}.json"), &self.config);
        let catalog = self.files.json(&format!("catalog-{tag}.json"), &self.catalog);
        let state = state.map(|s| self.files.json(&format!("state-{tag}.json"), s));
        (config, catalog, state)
    }

    /// `source-declarative-manifest read` of the CDK.
    pub fn cdk(&self, state: Option<&Value>) -> Read {
        let (config, catalog, state) = self.paths(state, "cdk");
        let mut command = Command::new(cdk_runner());
        command.arg("read").arg("--config").arg(&config).arg("--catalog").arg(&catalog);
        if let Some(state) = &state {
            command.arg("--state").arg(state);
        }
        command.arg("--manifest-path").arg(manifest(self.manifest)).env("DO_NOT_TRACK", "1");
        // Custom components beside the manifest, as Airbyte's connector folders ship them: the
        // CDK runs them only with unsafe code allowed.
        let components = manifest(self.manifest).with_file_name("components.py");
        if components.is_file() {
            command.arg("--components-path").arg(components).env("AIRBYTE_ENABLE_UNSAFE_CODE", "true");
        }
        let output = command.output().expect("run the CDK");
        let messages = parse_lines(&output.stdout);
        let read = Read { engine: "CDK", messages, stderr: String::from_utf8_lossy(&output.stderr).into_owned() };
        assert!(output.status.success(), "the CDK failed: {}", read.explain());
        read
    }

    /// `host read` of Sluice.
    pub fn sluice(&self, state: Option<&Value>) -> Read {
        self.sluice_granting(state, &grant(self.api))
    }

    /// `host read` of Sluice with `extra` arguments, however it ends.
    pub fn sluice_run(&self, state: Option<&Value>, allow: &str, extra: &[&str]) -> HostRun {
        let (config, catalog, state) = self.paths(state, "sluice");
        let mut host = host(&["read"])
            .arg(manifest(self.manifest))
            .arg("--config")
            .arg(&config)
            .arg("--catalog")
            .arg(&catalog)
            .arg("--allow-host")
            .arg(allow);
        if let Some(state) = &state {
            host = host.arg("--state").arg(state);
        }
        extra.iter().fold(host, |host, arg| host.arg(arg)).run()
    }

    /// [`Sync::sluice`] with the API at `allow` granted (another API than the demo API).
    pub fn sluice_granting(&self, state: Option<&Value>, allow: &str) -> Read {
        let run = self.sluice_run(state, allow, &[]);
        let read = Read { engine: "Sluice", messages: run.messages.clone(), stderr: run.stderr() };
        assert!(run.success(), "Sluice failed: {}", read.explain());
        read
    }
}

fn parse_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout).lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect()
}

/// Now, in epoch seconds.
fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// `2024-01-01T00:00:00Z` from epoch seconds.
fn iso(secs: i64) -> String {
    sluice_tests::demo_api::data::format_rfc3339(secs)
}

/// An event created at `created`: its cursor in the three forms the manifests read, and a
/// top-level null the CDK leaves out of its records.
fn event(id: i64, created: i64, account: i64) -> Value {
    // A negative offset with microseconds: a string comparison with a window's start written in
    // UTC instead of the saved value's offset would drop these records.
    let local = iso(created - 5 * 3600);
    let modified = format!("{}.{:06}-0500", &local[..19], (id * 1000) % 1_000_000);
    json!({"id": id, "created": created, "updated": iso(created), "modified_at": modified,
           "account_id": account, "name": format!("event {id}"), "affiliation": null,
           "details": {"kept": null}})
}

/// Asserts both engines read the same records of `stream`.
fn same_records(stream: &str, ours: &Read, theirs: &Read, what: &str) {
    let (a, b) = (ours.records(stream), theirs.records(stream));
    assert!(!b.is_empty() || a.is_empty(), "{what}: the CDK read nothing of {stream}");
    assert_eq!(
        ours.ids(stream),
        theirs.ids(stream),
        "{what}: {stream}: Sluice read ids on the left, the CDK on the right\n{}\n{}",
        ours.explain(),
        theirs.explain()
    );
    assert_eq!(a, b, "{what}: {stream}: the same ids, other records");
}

/// The three syncs of a manifest: initial, then late and fresh records, then more of both; at
/// each step both engines from their own state, and each from the other's.
fn three_syncs(manifest: &str, streams: &[&str], config: impl Fn(&DemoApi) -> Value, waves: [Vec<Value>; 3]) {
    three_syncs_on(DemoApiConfig::default(), manifest, streams, config, waves)
}

/// [`three_syncs`] on a demo API started with `api_config`.
fn three_syncs_on(
    api_config: DemoApiConfig,
    manifest: &str,
    streams: &[&str],
    config: impl Fn(&DemoApi) -> Value,
    waves: [Vec<Value>; 3],
) {
    let api = demo_api(api_config);
    let files = Files::new();
    let catalog = catalog(&streams.iter().map(|s| (*s, "incremental")).collect::<Vec<_>>());
    let sync = Sync { manifest, api: &api, config: config(&api), catalog, files: &files };
    let mut data = Vec::new();
    let (mut cdk_state, mut our_state): (Option<Value>, Option<Value>) = (None, None);
    for (n, wave) in waves.into_iter().enumerate() {
        data.extend(wave);
        api.set_events(data.clone());
        let theirs = sync.cdk(cdk_state.as_ref());
        let ours = sync.sluice(our_state.as_ref());
        for stream in streams {
            same_records(stream, &ours, &theirs, &format!("sync {}", n + 1));
        }
        if n > 0 {
            // Each engine from the other's state reads what it read from its own.
            let crossed_theirs = sync.cdk(our_state.as_ref());
            let crossed_ours = sync.sluice(cdk_state.as_ref());
            for stream in streams {
                same_records(stream, &crossed_ours, &theirs, &format!("sync {}, Sluice from the CDK's state", n + 1));
                same_records(stream, &ours, &crossed_theirs, &format!("sync {}, the CDK from Sluice's state", n + 1));
            }
        }
        for stream in streams {
            assert!(ours.state_of(stream).is_some(), "sync {}: Sluice wrote no STATE for {stream}", n + 1);
            assert_eq!(
                comparable(ours.state_of(stream)),
                comparable(theirs.state_of(stream)),
                "sync {}: the final state of {stream} (Sluice's on the left)",
                n + 1
            );
        }
        cdk_state = Some(theirs.final_states());
        our_state = Some(ours.final_states());
    }
}

/// A state as both engines must agree on it: the CDK's `lookback_window` of a per-partition
/// state is how long its sync took (Sluice writes 0), so it is left out, and the partitions'
/// `states` are compared in one order (the CDK lists them as it met them, Sluice by key).
pub fn comparable(state: Option<Value>) -> Option<Value> {
    state.map(|mut s| {
        if let Some(o) = s.as_object_mut() {
            o.remove("lookback_window");
            if let Some(Value::Array(states)) = o.get_mut("states") {
                states.sort_by_key(|entry| entry["partition"].to_string());
            }
        }
        s
    })
}

/// Late records (created before the last sync's clock, after its newest record) and fresh ones,
/// for a data set whose first wave ends `days` days ago.
fn waves(base: i64, accounts: i64) -> [Vec<Value>; 3] {
    let day = 86_400;
    let first: Vec<Value> = (1..=12).map(|i| event(i, base - (20 - i) * day / 2, 1 + i % accounts)).collect();
    let newest = base - 8 * day / 2;
    let second = vec![
        // Late: between the newest record of sync 1 and sync 1's clock.
        event(101, newest + 3600 * 5, 1),
        event(102, base - day, 1 % accounts + 1),
        // Inside the lookback window before the newest, and at it exactly.
        event(103, newest - 1800, 1),
        event(104, newest, 1),
        // Fresh.
        event(105, now() - 120, 1),
    ];
    let third = vec![event(201, now() - 90, 1), event(202, now() - 60, 1 % accounts + 1)];
    [first, second, third]
}

#[test]
fn an_epoch_cursor_reads_late_records_as_the_cdk_does() {
    let base = now() - 86_400;
    three_syncs(
        "cdk/epoch.yaml",
        &["events"],
        |api| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)}),
        waves(base, 1),
    );
}

/// An API whose answers write every key twice, a decoy first (`cdk/repeated.yaml`): the CDK
/// (Python's json) keeps a repeated key's last value, and so must Sluice, whose host takes the
/// records out of the answer (`send-records`, the one records splitter the engine and Rust,
/// Python and JavaScript connectors share). That the host's splitter is the one reading them
/// shows in its limit: a page of more records than `--max-records-per-page` fails in the host,
/// naming the answer's records path.
#[test]
fn a_repeated_key_is_read_as_the_cdk_reads_it_by_the_hosts_splitter() {
    let base = now() - 86_400;
    let config = |api: &DemoApi| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)});
    three_syncs("cdk/repeated.yaml", &["repeated_events"], config, waves(base, 1));

    let api = demo_api(DemoApiConfig::default());
    api.set_events(waves(base, 1)[0].clone());
    let files = Files::new();
    let catalog = catalog(&[("repeated_events", "incremental")]);
    let sync = Sync { manifest: "cdk/repeated.yaml", api: &api, config: config(&api), catalog, files: &files };
    let run = sync.sluice_run(None, &grant(&api), &["--max-records-per-page", "2"]);
    assert!(!run.success(), "pages of 5 records passed a limit of 2: {}", run.explain());
    assert!(
        format!("{:?}", run.errors()).contains("records at its records path, more than the 2 a page may hold"),
        "the host's splitter did not refuse the page: {}",
        run.explain()
    );
}

/// An API that answers XML: the XmlDecoder's records are xmltodict's dicts in both engines.
#[test]
fn an_xml_api_reads_as_the_cdk_reads_it() {
    let base = now() - 86_400;
    three_syncs(
        "cdk/xml.yaml",
        &["xml_events"],
        |api| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)}),
        waves(base, 1),
    );
}

#[test]
fn windows_with_offsets_read_as_the_cdk_reads_them() {
    let base = now() - 86_400;
    let start = format!("{}.000000+0000", &iso(base - 30 * 86_400)[..19]);
    three_syncs(
        "cdk/windows.yaml",
        &["modified_events"],
        |api| json!({"base_url": api.base_url(), "start_date": start}),
        waves(base, 1),
    );
}

#[test]
fn a_substream_cursor_per_partition_moves_between_the_engines() {
    let base = now() - 86_400;
    substream_syncs("cdk/substream.yaml", base, waves(base, 3));
}

/// A partition with nothing to read in a first sync (account 3's events are all older than
/// `start_date`): its state is the CDK's in both engines, and so are the later syncs'.
#[test]
fn a_partition_that_reads_nothing_in_a_first_sync_is_the_cdks() {
    let base = now() - 86_400;
    let [mut first, second, third] = waves(base, 2);
    first.extend((0..3).map(|i| event(300 + i, base - 40 * 86_400 + i, 3)));
    substream_syncs("cdk/substream.yaml", base, [first, second, third]);
}

/// `end_datetime: today_utc()`: a sync reads up to today 00:00 UTC and hands on the newest
/// record read, not today, so the second sync of the same day still reads the late records
/// written before today (Sluice once saved today and read none of them).
#[test]
fn a_sync_ending_today_hands_on_its_newest_record_as_the_cdk_does() {
    let today = now() - now() % 86_400;
    // Every wave but the fresh records is before today 00:00.
    let base = today - 2 * 3600;
    three_syncs(
        "cdk/today.yaml",
        &["events_until_today"],
        |api| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)}),
        waves(base, 1),
    );
}

/// A substream read in full refresh: the same records in both engines; the parent, which has
/// no cursor, ends with the CDK's state of a full read in both. The child, which has one, ends
/// with its cursor's state in the CDK and with that mark in Sluice (a known difference, in
/// docs/declarative.md); the next full sync reads everything again in both.
#[test]
fn a_substream_read_in_full_ends_as_the_cdk_ends_it() {
    let base = now() - 86_400;
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let [first, second, _] = waves(base, 3);
    api.set_events(first.clone());
    let streams = ["event_accounts", "account_events"];
    let catalog = catalog(&streams.iter().map(|s| (*s, "full_refresh")).collect::<Vec<_>>());
    let config = json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)});
    let sync = Sync { manifest: "cdk/substream.yaml", api: &api, config, catalog, files: &files };
    let (theirs, ours) = (sync.cdk(None), sync.sluice(None));
    for stream in streams {
        same_records(stream, &ours, &theirs, "first full sync");
    }
    let full_read = Some(json!({"__ab_no_cursor_state_message": true}));
    assert_eq!(theirs.state_of("event_accounts"), full_read);
    assert_eq!(ours.state_of("event_accounts"), full_read);
    assert_eq!(ours.state_of("account_events"), full_read);
    api.set_events(first.into_iter().chain(second).collect());
    // From the full reads' state (Sluice's), both read everything again.
    let (theirs_again, ours_again) = (sync.cdk(Some(&ours.final_states())), sync.sluice(Some(&ours.final_states())));
    for stream in streams {
        same_records(stream, &ours_again, &theirs_again, "second full sync");
    }
    assert_eq!(ours_again.ids("account_events").len(), 17, "everything again");
    // Handed the CDK's cursor state, the CDK reads a full-refresh stream from it (incrementally);
    // Sluice reads a full refresh in full: a superset, nothing lost (docs/declarative.md).
    let (theirs_from_cursor, ours_from_cursor) =
        (sync.cdk(Some(&theirs.final_states())), sync.sluice(Some(&theirs.final_states())));
    let ours_ids = ours_from_cursor.ids("account_events");
    assert_eq!(ours_ids.len(), 17);
    assert!(theirs_from_cursor.ids("account_events").iter().all(|id| ours_ids.contains(id)));
}

/// `global_substream_cursor`: one cursor for every partition of the substream, its state
/// `{"use_global_cursor": true, "state", ...}` in both engines and crossed between them.
#[test]
fn a_global_substream_cursor_moves_between_the_engines() {
    let base = now() - 86_400;
    substream_syncs("cdk/global.yaml", base, waves(base, 3));
}

/// `incremental_dependency: true` on a parent with its own cursor: the parent is read from the
/// parent state inside the child's state (`parent_state: {event_accounts: {updated}}`), so a
/// later sync lists only the accounts updated since the parent's bookmark, while the child's
/// known partitions keep their own cursors; both engines write the parent state they reached,
/// over three syncs with states crossed, and send the same requests for the same records.
#[test]
fn a_parent_read_incrementally_moves_between_the_engines() {
    let base = now() - 86_400;
    let config = |api: &DemoApi| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)});
    three_syncs("cdk/dependent.yaml", &["event_accounts", "account_events"], config, waves(base, 3));

    // The requests of the child alone, in a second sync from each engine's first state and
    // from the other's.
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let sync = Sync {
        manifest: "cdk/dependent.yaml",
        api: &api,
        config: config(&api),
        catalog: catalog(&[("account_events", "incremental")]),
        files: &files,
    };
    let [first, second, _] = waves(base, 3);
    api.set_events(first.clone());
    let (theirs, ours) = (sync.cdk(None), sync.sluice(None));
    let (cdk_state, our_state) = (theirs.final_states(), ours.final_states());
    let parent_state = ours.state_of("account_events").expect("a state")["parent_state"].clone();
    assert_eq!(parent_state, theirs.state_of("account_events").unwrap()["parent_state"]);
    assert!(parent_state["event_accounts"]["updated"].is_string(), "the parent's bookmark: {parent_state}");
    api.set_events(first.into_iter().chain(second).collect());
    // Each request's path and sorted query, in order of path.
    let requests = |run: &dyn Fn() -> Read| -> (Vec<String>, Read) {
        let before = api.stats().recent_requests.len();
        let read = run();
        let mut sent: Vec<String> = api.stats().recent_requests[before..]
            .iter()
            .map(|r| {
                let (path, query) = r.split_once('?').unwrap_or((r, ""));
                let mut pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
                pairs.sort();
                format!("{path}?{}", pairs.join("&"))
            })
            .collect();
        sent.sort();
        (sent, read)
    };
    let (by_cdk, theirs) = requests(&|| sync.cdk(Some(&cdk_state)));
    let (by_sluice, ours) = requests(&|| sync.sluice(Some(&our_state)));
    same_records("account_events", &ours, &theirs, "sync 2");
    assert_eq!(by_sluice, by_cdk, "sync 2: the requests (Sluice's on the left)");
    let parents: Vec<&String> = by_cdk.iter().filter(|r| r.starts_with("/v2/event_accounts")).collect();
    assert!(parents.len() == 1 && parents[0].contains("since="), "the parent read from its bookmark: {parents:?}");
    let accounts: std::collections::BTreeSet<&str> = by_cdk
        .iter()
        .filter_map(|r| {
            r.split('&').find_map(|p| p.strip_prefix("/v2/events?account_id=").or(p.strip_prefix("account_id=")))
        })
        .collect();
    assert_eq!(accounts.len(), 2, "only the accounts updated since the first sync: {by_cdk:?}");
    let (crossed_sluice, crossed_ours) = requests(&|| sync.sluice(Some(&cdk_state)));
    let (crossed_cdk, crossed_theirs) = requests(&|| sync.cdk(Some(&our_state)));
    same_records("account_events", &crossed_ours, &theirs, "sync 2, Sluice from the CDK's state");
    same_records("account_events", &ours, &crossed_theirs, "sync 2, the CDK from Sluice's state");
    assert_eq!(crossed_sluice, by_cdk, "sync 2, Sluice from the CDK's state: the requests");
    assert_eq!(crossed_cdk, by_cdk, "sync 2, the CDK from Sluice's state: the requests");
}

/// [`three_syncs`] of a substream manifest (`event_accounts` and its `account_events`), from a
/// `start_date` 30 days before `base`.
fn substream_syncs(manifest: &str, base: i64, waves: [Vec<Value>; 3]) {
    three_syncs(
        manifest,
        &["event_accounts", "account_events"],
        |api| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)}),
        waves,
    );
}

/// The connection status one engine's `check` wrote: succeeded, and the message.
fn check_status(messages: &[Value]) -> (bool, String) {
    let status = messages
        .iter()
        .find(|m| m["type"] == "CONNECTION_STATUS")
        .unwrap_or_else(|| panic!("no CONNECTION_STATUS in {messages:?}"));
    let status = &status["connectionStatus"];
    (status["status"] == "SUCCEEDED", status["message"].as_str().unwrap_or_default().to_string())
}

/// The CDK checks a config against the spec's `pattern` but treats `format` as an annotation
/// (a spec with `format: date` and a dd-mm-yyyy pattern takes dd-mm-yyyy); Sluice agrees on
/// both, and still names the field and the rule when the config breaks one.
#[test]
fn config_formats_are_annotations_as_in_the_cdk() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    for (start, valid) in [("02-12-2026", true), ("2026-12-02", false)] {
        let config = files.json("config.json", &json!({"base_url": api.base_url(), "start_date": start}));
        let output = Command::new(cdk_runner())
            .args(["check", "--config"])
            .arg(&config)
            .arg("--manifest-path")
            .arg(manifest("cdk/formats.yaml"))
            .env("DO_NOT_TRACK", "1")
            .output()
            .expect("run the CDK");
        let (cdk_ok, cdk_message) = check_status(&parse_lines(&output.stdout));
        let run = host(&["check"])
            .arg(manifest("cdk/formats.yaml"))
            .arg("--config")
            .arg(&config)
            .arg("--allow-host")
            .arg(grant(&api))
            .run();
        let (our_ok, our_message) = check_status(&run.messages);
        assert_eq!((cdk_ok, our_ok), (valid, valid), "{start}: the CDK said {cdk_message:?}, Sluice {our_message:?}");
        if !valid {
            assert!(
                our_message.contains("field start_date") && our_message.contains("does not match"),
                "{our_message}"
            );
        }
    }
}

/// A legacy per-partition state (`{account id: {cursor: value}}`, as Python connectors kept it)
/// on a stream with `LegacyToPerPartitionStateMigration`: both engines migrate it, read the same
/// records and end on the same state.
#[test]
fn a_legacy_state_is_migrated_as_the_cdk_migrates_it() {
    let base = now() - 86_400;
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    // Accounts with string ids, as the legacy state's keys are.
    let events: Vec<Value> = (1..=12i64)
        .map(|i| {
            let mut e = event(i, base - (20 - i) * 3600, 0);
            e["account_id"] = json!(format!("{}", 1 + i % 3));
            e
        })
        .collect();
    api.set_events(events.clone());
    let legacy = json!({
        "2": {"updated": iso(base - 14 * 3600)},
        "3": {"updated": iso(base - 12 * 3600)},
    });
    let state = json!([{"type": "STREAM", "stream": {"stream_descriptor": {"name": "account_events"}, "stream_state": legacy}}]);
    let catalog = catalog(&[("event_accounts", "full_refresh"), ("account_events", "incremental")]);
    let config = json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)});
    let sync = Sync { manifest: "cdk/migrated.yaml", api: &api, config, catalog, files: &files };
    let theirs = sync.cdk(Some(&state));
    let ours = sync.sluice(Some(&state));
    same_records("account_events", &ours, &theirs, "from a legacy state");
    // Both migrated it: the legacy entries are partitions of the per-partition state now (the
    // CDK's migrated partitions lack the router's `parent_slice`, so they match no partition it
    // lists, and it reads every partition from the start: Sluice does the same).
    let migrated = ours.state_of("account_events").unwrap_or_default();
    let partitions: Vec<&Value> =
        migrated["states"].as_array().into_iter().flatten().map(|s| &s["partition"]).collect();
    assert!(partitions.contains(&&json!({"account_id": "2"})), "{migrated}");
    assert_eq!(ours.ids("account_events"), (1..=12).collect::<Vec<_>>());
    assert_eq!(
        comparable(ours.state_of("account_events")),
        comparable(theirs.state_of("account_events")),
        "the final state (Sluice's on the left)"
    );
}

/// The deprecated LegacySessionTokenAuthenticator: a login when the config has no session token
/// or one the API no longer accepts, none when it has a valid one; the same records as the CDK's
/// each time, and a clear error without a token or credentials.
#[test]
fn a_legacy_session_token_is_validated_or_renewed_as_in_the_cdk() {
    let api = demo_api(DemoApiConfig { records: 100, accounts: 2, ..Default::default() });
    let files = Files::new();
    let catalog = catalog(&[("legacy_session_items", "full_refresh")]);
    let login = json!({"base_url": api.base_url(), "username": "demo", "password": "demo-password"});
    let sync = |config: Value| Sync {
        manifest: "cdk/legacy_session.yaml",
        api: &api,
        config,
        catalog: catalog.clone(),
        files: &files,
    };
    let logins = || api.stats().sessions_created;

    let theirs = sync(login.clone()).cdk(None);
    let before = logins();
    let ours = sync(login.clone()).sluice(None);
    same_records("legacy_session_items", &ours, &theirs, "with a login");
    assert_eq!(ours.ids("legacy_session_items"), (1..=100).collect::<Vec<_>>());
    assert_eq!(logins(), before + 1, "one login for Sluice's read");

    // A stale token: validated (401), then a login.
    let mut stale = login.clone();
    stale["session_token"] = json!("expired-token");
    let theirs = sync(stale.clone()).cdk(None);
    let before = logins();
    let ours = sync(stale).sluice(None);
    same_records("legacy_session_items", &ours, &theirs, "with a stale token");
    assert_eq!(logins(), before + 1, "a stale token means a login");

    // A valid token and no credentials: no login at all.
    let token = api.create_session_token();
    let given = json!({"base_url": api.base_url(), "session_token": token});
    let theirs = sync(given.clone()).cdk(None);
    let before = logins();
    let ours = sync(given).sluice(None);
    same_records("legacy_session_items", &ours, &theirs, "with a valid token");
    assert_eq!(logins(), before, "a valid token needs no login");

    // Neither: the stream fails, naming why.
    let config = files.json("config-none.json", &json!({"base_url": api.base_url(), "session_token": "stale"}));
    let run = host(&["read"])
        .arg(manifest("cdk/legacy_session.yaml"))
        .arg("--config")
        .arg(&config)
        .arg("--catalog")
        .arg(files.json("catalog-none.json", &catalog))
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    assert!(run.stdout().contains("username and password are not given"), "{}", run.explain());
}

/// The transformations that rename keys and lift nested fields give the CDK's records: mixed
/// case, camel case, digits, non-ASCII letters, nested objects and lists of objects, a key that
/// clashes when flattened.
#[test]
fn key_and_nesting_transformations_give_the_cdks_records() {
    let base = now() - 86_400;
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let events: Vec<Value> = (1..=6i64)
        .map(|i| {
            let mut e = event(i, base - i * 3600, 1);
            e["CamelCaseKey"] = json!(i);
            e["1stPlace"] = json!("gold");
            e["Größe Maß"] = json!(i * 2);
            e["Nested"] = json!({"InnerKey": format!("v{i}"), "id": i * 100, "List": [{"A": 1}, {"B": [2, 3]}]});
            e["HTTPResponseCode"] = json!(200);
            e
        })
        .collect();
    api.set_events(events);
    let streams = ["lower_events", "snake_events", "replaced_events", "flat_events", "dpath_flat_events"];
    let catalog = catalog(&streams.iter().map(|s| (*s, "full_refresh")).collect::<Vec<_>>());
    let sync = Sync {
        manifest: "cdk/shapes.yaml",
        api: &api,
        config: json!({"base_url": api.base_url()}),
        catalog,
        files: &files,
    };
    let theirs = sync.cdk(None);
    let ours = sync.sluice(None);
    for stream in streams {
        same_records(stream, &ours, &theirs, stream);
        assert_eq!(ours.ids(stream), (1..=6).collect::<Vec<_>>(), "{stream}");
    }
    // Each transformation did something (so equal records are not two untouched copies).
    assert!(ours.records("lower_events")[0].get("camelcasekey").is_some());
    // A rendered `1e400` reads back (as Python's literal_eval reads it) as infinity, which JSON
    // cannot hold: null in both engines' records.
    assert_eq!(ours.records("lower_events")[0]["nested"]["huge"], Value::Null, "{:?}", ours.records("lower_events")[0]);
    assert!(ours.records("lower_events")[0]["nested"].get("huge").is_some());
    assert!(ours.records("snake_events")[0].get("camel_case_key").is_some());
    assert!(ours.records("replaced_events")[0].get("CamelCase_k_").is_some());
    assert!(ours.records("dpath_flat_events")[0].get("Nested").is_none());
}

/// StateDelegatingStream: the full-refresh stream without a state, the incremental one with a
/// state, and the full-refresh one again for a state past `api_retention_period`
/// (`retained_events` at sync 2: its newest record of sync 1 is five days old, two are kept).
/// The records say which stream read them, so both engines choose the same at every sync, from
/// their own state and from each other's.
#[test]
fn a_state_delegating_stream_chooses_its_stream_as_the_cdk_does() {
    let base = now() - 86_400;
    three_syncs(
        "cdk/delegating.yaml",
        &["delegated_events", "retained_events"],
        |api| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)}),
        waves(base, 1),
    );
}

/// The first sync of `waves`' first wave in the CDK, then in Sluice, each on its own count of
/// requests to `/v2/events`, the records compared: Sluice's read, and the counts (Sluice's first).
fn first_sync_counted(
    manifest: &str,
    streams: &[&str],
    config: impl Fn(&DemoApi) -> Value,
    waves: [Vec<Value>; 3],
) -> (Read, (u64, u64)) {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let catalog = catalog(&streams.iter().map(|s| (*s, "incremental")).collect::<Vec<_>>());
    let sync = Sync { manifest, api: &api, config: config(&api), catalog, files: &files };
    let [first, ..] = waves;
    api.set_events(first);
    let requests = || api.stats().requests_by_path.get("/v2/events").copied().unwrap_or(0);
    let theirs = sync.cdk(None);
    let by_cdk = requests();
    let ours = sync.sluice(None);
    let by_sluice = requests() - by_cdk;
    for stream in streams {
        same_records(stream, &ours, &theirs, "sync 1");
    }
    (ours, (by_sluice, by_cdk))
}

/// `lazy_read_pointer`: in a sync without state, a partition's first page is the one its parent
/// record carries (no request for it), the rest requested from page 2; with a state, every page
/// is requested. Both engines send the same requests for the same records, and their states
/// move between them.
#[test]
fn a_first_page_carried_by_the_parent_is_read_as_the_cdk_reads_it() {
    let base = now() - 86_400;
    let config = |api: &DemoApi| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)});
    // The first sync, alone, counting the requests for children: three accounts of four events,
    // two of them embedded in each account.
    let streams = ["embedding_accounts", "lazy_events"];
    let (ours, (by_sluice, by_cdk)) = first_sync_counted("cdk/lazy.yaml", &streams, config, waves(base, 3));
    assert_eq!(ours.records("lazy_events").len(), 12);
    assert_eq!((by_sluice, by_cdk), (3, 3), "one request per account (page 2), Sluice's on the left");
    three_syncs("cdk/lazy.yaml", &streams, config, waves(base, 3));
}

/// `pagination_reset`: an API that refuses pages past the second (RESET_PAGINATION) is read
/// again from page 1 from the newest cursor value read, as is one read 3 records at a time
/// (`limits`); both engines send the same requests and read the same records (the boundary
/// records twice, as the CDK reads them), over three syncs with states crossed.
#[test]
fn a_pagination_reset_splits_the_window_as_the_cdk_does() {
    let base = now() - 86_400;
    let config = |api: &DemoApi| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400)});
    let streams = ["reset_events", "limited_events"];
    let (ours, (by_sluice, by_cdk)) = first_sync_counted("cdk/reset.yaml", &streams, config, waves(base, 1));
    assert_eq!(by_sluice, by_cdk, "the same requests (Sluice's on the left)");
    for stream in streams {
        let ids = ours.ids(stream);
        let unique: std::collections::BTreeSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), 12, "{stream}: every event read");
        assert!(ids.len() > 12, "{stream}: the window was split (its boundary records read again): {ids:?}");
    }
    three_syncs("cdk/reset.yaml", &streams, config, waves(base, 1));
}

/// `dynamic_streams` with a ConfigComponentsResolver (a stream per account in the config and one
/// from the resolver's defaults, each reading its account's events) and a
/// ParametrizedComponentsResolver (the streams listed in the manifest), as the CDK makes them;
/// over three syncs with states crossed.
#[test]
fn dynamic_streams_from_the_config_are_the_cdks() {
    let base = now() - 86_400;
    let config = |api: &DemoApi| {
        json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400),
               "accounts": [{"id": 1, "name": "First Account"}, {"id": 2, "name": "Second Account"}]})
    };
    let streams =
        ["all_events", "first_account_events", "second_account_events", "third_account_events", "listed_events"];
    // Each made stream reads its own account's events, marked with its name.
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let catalog = catalog(&streams.iter().map(|s| (*s, "incremental")).collect::<Vec<_>>());
    let sync = Sync { manifest: "cdk/dynamic.yaml", api: &api, config: config(&api), catalog, files: &files };
    api.set_events(waves(base, 3)[0].clone());
    let ours = sync.sluice(None);
    assert_eq!(ours.records("all_events").len(), 12);
    assert!(ours.records("listed_events").iter().all(|r| r["report"] == "listed"));
    assert_eq!(ours.records("listed_events").len(), 12);
    for (stream, account, report) in [
        ("first_account_events", 1, "First Account"),
        ("second_account_events", 2, "Second Account"),
        ("third_account_events", 3, "Third Account"),
    ] {
        let records = ours.records(stream);
        assert_eq!(records.len(), 4, "{stream}");
        assert!(records.iter().all(|r| r["account_id"] == account && r["report"] == report), "{stream}: {records:?}");
    }
    three_syncs("cdk/dynamic.yaml", &streams, config, waves(base, 3));
}

/// BearerAuthenticator: the demo API, started with a key, refuses any request without
/// `Authorization: Bearer <key>`; both engines send it and read the same.
#[test]
fn a_bearer_token_is_sent_as_the_cdk_sends_it() {
    let base = now() - 86_400;
    let key = "bearer-key-of-the-test";
    three_syncs_on(
        DemoApiConfig { api_key: Some(key.to_string()), ..DemoApiConfig::default() },
        "cdk/bearer.yaml",
        &["bearer_events"],
        |api| json!({"base_url": api.base_url(), "start_date": iso(base - 30 * 86_400), "api_key": key}),
        waves(base, 1),
    );
}

/// Streams and schemas the API describes (source-airtable's pattern, `cdk/listed.yaml`): an
/// HttpComponentsResolver lists the tables of every base and makes a stream per table, whose
/// DynamicSchemaLoader maps the table's field types (conditions, complex and two-type fields,
/// fields without a type); `schema_normalization: Default` casts each record by its schema as
/// the CDK's TypeTransformer casts it, for an inline schema (`typed_events`, with `$ref` and
/// nested items) and a dynamic one. Both engines must discover the same streams and schemas,
/// read the same records, and check the first made stream.
#[test]
fn streams_and_schemas_an_api_describes_are_the_cdks() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let field = |name: &str, kind: Value| json!({"name": name, "type": kind});
    let created = |result: &str| {
        json!({"name": format!("Created {result}"), "type": "createdTime",
                                         "options": {"result": {"type": result}}})
    };
    let formula = |name: &str, text: &str| json!({"name": name, "type": "formula", "options": {"formula": text}});
    api.set_document("bases", json!({"bases": [{"id": "b1", "name": "Sales Base"}, {"id": "b2", "name": "Ops"}]}));
    api.set_document(
        "tables_b1",
        json!({"tables": [
            {"id": "t1", "name": "Deals", "account": 1, "fields": [
                field("id", json!("autoNumber")), field("Amount", json!("currency")),
                field("Flag", json!("checkbox")), field("Label", json!("singleLineText")),
                field("Tags", json!("multipleSelects")), field("Count", json!("count")),
                field("account_id", json!("singleLineText")), created("dateTime"), created("date"),
                formula("Unique", "ARRAYUNIQUE({Tags})"), formula("Note", "CONCAT({Label})"),
                field("Either", json!(["string", "number"])), json!({"name": "Plain"})]},
            {"id": "t2", "name": "Leads", "account": 2, "fields": [
                field("id", json!("autoNumber")), field("Quantity", json!("count")),
                field("Label", json!("singleLineText"))]}]}),
    );
    api.set_document(
        "tables_b2",
        json!({"tables": [{"id": "t3", "name": "Tickets", "account": 3, "fields": [
            field("id", json!("autoNumber")), field("Flag", json!("checkbox")), created("date")]}]}),
    );
    let mut events = vec![
        json!({"id": 1, "account_id": 0, "Amount": "12.50", "Quantity": "4", "Flag": "yes", "Label": 42,
               "Tags": "solo", "Lines": [{"qty": "2"}, {"qty": 1.5}], "Price": {"value": "3.25", "cents": "325"},
               "Meta": {"a": [1, true, null], "b": "x'y"}, "affiliation": null, "Either": 5}),
        json!({"id": 2, "account_id": 0, "Amount": 7, "Quantity": 2.7, "Flag": 0, "Label": 4.0, "Tags": ["a", "b"],
               "Lines": [], "Price": {"value": 1, "cents": 2.0}, "Meta": [1, "two"], "affiliation": "x", "Either": "s"}),
        json!({"id": 3, "account_id": 0, "Amount": "abc", "Quantity": null, "Flag": "maybe", "Label": true,
               "Tags": null, "Lines": "none", "Price": "free", "Meta": true, "Either": null}),
        json!({"id": 4, "account_id": 0, "Amount": true, "Quantity": "4.5", "Flag": "False", "Label": null,
               "Tags": 5, "Meta": 12.5, "affiliation": null}),
        json!({"id": 11, "account_id": 1, "Amount": "9.99", "Flag": "true", "Label": 7, "Tags": "x", "Count": "3",
               "Created dateTime": "2026-01-01T00:00:00Z", "Created date": 20260101, "Unique": [["a", 1], "b"],
               "Note": 5, "Either": 3, "Plain": 1, "Extra": 2}),
        json!({"id": 12, "account_id": 1, "Amount": 1, "Flag": "off", "Tags": ["y"], "Count": 2.5, "Unique": "z"}),
        json!({"id": 21, "account_id": 2, "Quantity": "10", "Label": {"k": "v"}}),
        json!({"id": 31, "account_id": 3, "Flag": 1, "Created date": null}),
    ];
    for event in &mut events {
        event["created"] = json!(now() - 3600);
    }
    api.set_events(events);
    let config = json!({"base_url": api.base_url()});
    let config_path = files.json("config.json", &config);

    // Discover: the same streams, each with the same schema.
    let output = Command::new(cdk_runner())
        .args(["discover", "--config"])
        .arg(&config_path)
        .arg("--manifest-path")
        .arg(manifest("cdk/listed.yaml"))
        .env("DO_NOT_TRACK", "1")
        .output()
        .expect("run the CDK");
    let cdk_messages = parse_lines(&output.stdout);
    let schemas = |messages: &[Value], engine: &str| -> Vec<(String, Value)> {
        let catalog = messages
            .iter()
            .find(|m| m["type"] == "CATALOG")
            .unwrap_or_else(|| panic!("{engine} wrote no CATALOG: {messages:?}"));
        let mut streams: Vec<(String, Value)> = catalog["catalog"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["name"].as_str().unwrap().to_string(), s["json_schema"].clone()))
            .collect();
        streams.sort_by(|a, b| a.0.cmp(&b.0));
        streams
    };
    let theirs = schemas(&cdk_messages, "the CDK");
    let run = host(&["discover"])
        .arg(manifest("cdk/listed.yaml"))
        .arg("--config")
        .arg(&config_path)
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    assert!(run.success(), "Sluice's discover failed: {}", run.stderr());
    let ours = schemas(&run.messages, "Sluice");
    let names: Vec<&str> = ours.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["ops_tickets", "sales_base_deals", "sales_base_leads", "typed_events"]);
    for ((name, schema), (their_name, their_schema)) in ours.iter().zip(&theirs) {
        assert_eq!(name, their_name);
        assert_eq!(schema, their_schema, "the schema of {name} (Sluice's on the left)");
    }
    assert_eq!(ours.len(), theirs.len());

    // Read: the same records, cast by their schemas.
    let streams = ["typed_events", "sales_base_deals", "sales_base_leads", "ops_tickets"];
    let catalog = catalog(&streams.iter().map(|s| (*s, "full_refresh")).collect::<Vec<_>>());
    let sync = Sync { manifest: "cdk/listed.yaml", api: &api, config, catalog, files: &files };
    let (theirs, ours) = (sync.cdk(None), sync.sluice(None));
    for stream in streams {
        same_records(stream, &ours, &theirs, "full refresh");
    }
    let typed = ours.records("typed_events");
    assert_eq!(
        (&typed[0]["Amount"], &typed[0]["Quantity"], &typed[0]["Flag"]),
        (&json!(12.5), &json!(4), &json!(true))
    );
    assert_eq!((&typed[0]["account_id"], &typed[0]["Tags"]), (&json!("0"), &json!(["solo"])));
    assert_eq!(typed[0]["Lines"], json!([{"qty": 2}, {"qty": 1}]), "int(1.5) is 1");
    assert_eq!(typed[0]["Price"], json!({"value": 3.25, "cents": 325}));
    let deals = ours.records("sales_base_deals");
    assert_eq!(
        (&deals[0]["table"], &deals[0]["amount"], &deals[0]["unique"]),
        (&json!("Deals"), &json!(9.99), &json!([["a", "1"], ["b"]]))
    );

    // Check: the first made stream reads.
    let run = host(&["check"])
        .arg(manifest("cdk/listed.yaml"))
        .arg("--config")
        .arg(&config_path)
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    let (ok, message) = check_status(&run.messages);
    assert!(ok, "Sluice's check failed: {message}");
    // A CheckStream that names dynamic definitions to check is refused, not passed unread.
    let text = std::fs::read_to_string(manifest("cdk/listed.yaml")).unwrap();
    let named = text.replace(
        "check: {type: CheckDynamicStream, stream_count: 1}",
        "check: {type: CheckStream, stream_names: [typed_events], dynamic_streams_check_configs: [{type: DynamicStreamCheckConfig, dynamic_stream_name: tables}]}",
    );
    assert_ne!(named, text);
    let run = host(&["check"])
        .arg(files.text("named.yaml", named.as_bytes()))
        .arg("--config")
        .arg(&config_path)
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    let (ok, message) = check_status(&run.messages);
    assert!(!ok && message.contains("dynamic_streams_check_configs"), "{message}");
}

/// `waves` for an integer cursor: ids 1 to 12 but 7, then 13 to 16 with a late 7 (below the
/// saved id: neither engine reads it), then 17 and 18.
fn counted_waves() -> [Vec<Value>; 3] {
    let base = now() - 86_400;
    let first = (1..=12).filter(|i| *i != 7).map(|i| event(i, base + i, 1)).collect();
    let second = [7, 13, 14, 15, 16].iter().map(|i| event(*i, base + i, 1)).collect();
    [first, second, vec![event(17, base + 17, 1), event(18, base + 18, 1)]]
}

/// IncrementingCountCursor: one slice from the saved id (read again: both engines read id 12 in
/// sync 2 and 16 in sync 3) or `start_value` from the config, sent by `start_value_option` or
/// through `stream_interval` in a template; states `{"id": n}` crossed between the engines.
#[test]
fn an_incrementing_count_cursor_moves_between_the_engines() {
    three_syncs(
        "cdk/counted.yaml",
        &["counted_events", "templated_events"],
        |api| json!({"base_url": api.base_url(), "start_id": 3}),
        counted_waves(),
    );
}

/// An IncrementingCountCursor's saved value: below `start_value` the sync starts at
/// `start_value`; past every record nothing is read and the state stays; `0` is no value; the
/// state is written as a number, in both engines. A value in text fails the stream in Sluice,
/// naming the value (the CDK fails on it with a TypeError), and the other stream reads.
#[test]
fn an_incrementing_count_cursor_starts_where_the_cdk_starts() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let [first, ..] = counted_waves();
    api.set_events(first);
    let catalog = catalog(&[("counted_events", "incremental"), ("templated_events", "incremental")]);
    let config = json!({"base_url": api.base_url(), "start_id": 3});
    let sync = Sync { manifest: "cdk/counted.yaml", api: &api, config, catalog, files: &files };
    let state = |counted: Value, templated: Value| {
        json!([{"type": "STREAM", "stream": {"stream_descriptor": {"name": "counted_events"}, "stream_state": counted}},
               {"type": "STREAM", "stream": {"stream_descriptor": {"name": "templated_events"}, "stream_state": templated}}])
    };
    for (given, counted_ids, templated_ids, after) in [
        (state(json!({"id": 1}), json!({"id": 0})), vec![3, 4, 5, 6, 8, 9, 10, 11, 12], 11, (12, 12)),
        (state(json!({"id": 50}), json!({"id": 50})), vec![], 0, (50, 50)),
    ] {
        let theirs = sync.cdk(Some(&given));
        let ours = sync.sluice(Some(&given));
        for stream in ["counted_events", "templated_events"] {
            same_records(stream, &ours, &theirs, &format!("from {given}"));
            assert_eq!(ours.state_of(stream), theirs.state_of(stream), "{stream} from {given}");
        }
        assert_eq!(ours.ids("counted_events"), counted_ids);
        assert_eq!(ours.ids("templated_events").len(), templated_ids);
        assert_eq!(ours.state_of("counted_events"), Some(json!({"id": after.0})));
        assert_eq!(ours.state_of("templated_events"), Some(json!({"id": after.1})));
    }
    // A saved id in text: the CDK's TypeError, Sluice's refusal of the stream.
    let text = state(json!({"id": "5"}), json!({"id": 5}));
    let path = files.json("text-state.json", &text);
    let config = files.json("text-config.json", &sync.config);
    let catalog = files.json("text-catalog.json", &sync.catalog);
    let run = host(&["read"])
        .arg(manifest("cdk/counted.yaml"))
        .arg("--config")
        .arg(&config)
        .arg("--catalog")
        .arg(&catalog)
        .arg("--state")
        .arg(&path)
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    let errors: Vec<String> = run
        .messages
        .iter()
        .filter(|m| m["type"] == "TRACE" && m["trace"]["type"] == "ERROR")
        .map(|m| m["trace"]["error"]["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(errors.iter().any(|e| e.contains("counted_events") && e.contains("\"5\"")), "{errors:?}");
    let ours = Read { engine: "Sluice", messages: run.messages.clone(), stderr: run.stderr() };
    assert_eq!(ours.ids("templated_events").len(), 7, "the other stream reads: {}", ours.explain());
}
