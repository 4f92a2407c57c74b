//! Custom components: a manifest's components.py run in the components runtime, inside the
//! sandbox (docs/declarative.md, "Custom components"). Each kind the engine calls is read
//! against the CDK running the same manifest and components.py with unsafe code enabled; a
//! hostile components.py is contained.

use crate::cdk::Sync;
use crate::declarative::manifest;
use crate::support::*;
use serde_json::{Value, json};

/// Ten events on two pages and a half of four.
fn events() -> Vec<Value> {
    (1..=10)
        .map(|i| {
            json!({"id": i, "created": 1_700_000_000 + i * 100, "name": format!("event {i}"), "details": {"k": i},
                   "account_id": i % 3 + 1})
        })
        .collect()
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).iter().map(|b| format!("{b:02x}")).collect()
}

/// An extractor, a schema loader, a filter, a transformation between built-in ones, a decoder,
/// an authenticator, an error handler, a schema normalization, a state migration, a pagination
/// strategy and partition routers, each a class of
/// components.py: the same records as the CDK's, the same schema at discover, and a run that
/// names the custom code it ran.
#[test]
fn custom_components_read_what_the_cdk_reads() {
    let api = demo_api(DemoApiConfig::default());
    api.set_events(events());
    let files = Files::new();
    let streams = ["extracted", "shaped", "decoded", "keyed", "account_items", "paged", "routed", "chosen"];
    let catalog = catalog(&streams.iter().map(|s| (*s, "full_refresh")).collect::<Vec<_>>());
    let config = json!({"base_url": format!("http://{}", api.addr()), "api_key": "demo-key"});
    let sync =
        Sync { manifest: "custom/events/manifest.yaml", api: &api, config: config.clone(), catalog, files: &files };
    let theirs = sync.cdk(None);
    let ours = sync.sluice(None);
    for stream in streams {
        let (a, b) = (ours.records(stream), theirs.records(stream));
        assert!(!b.is_empty(), "the CDK read nothing of {stream}: {}", theirs.explain());
        assert_eq!(a, b, "{stream}: Sluice's records on the left, the CDK's on the right");
    }
    // The filter dropped every third event, the transformation shouted between the built-ins.
    let shaped = ours.records("shaped");
    assert_eq!(shaped.iter().map(|r| r["id"].as_i64().unwrap()).collect::<Vec<_>>(), [1, 2, 4, 5, 7, 8, 10]);
    assert_eq!(shaped[0]["name"], "EVENT 1");
    assert_eq!(shaped[0]["added"], 10);
    assert_eq!(ours.records("extracted")[0]["tag"], "extracted");
    // The key went into the header (401 without), the suspended account was ignored (403), the
    // amounts became text.
    assert_eq!(ours.records("keyed").len(), 7);
    let accounts: std::collections::BTreeSet<i64> =
        ours.records("account_items").iter().map(|r| r["account_id"].as_i64().unwrap()).collect();
    assert_eq!(accounts.into_iter().collect::<Vec<_>>(), [1, 2, 3, 5]);
    assert!(ours.records("account_items").iter().all(|r| r["amount"].is_string()));
    // Three pages of three, where the API has four.
    assert_eq!(ours.records("paged").len(), 9);
    // A partition per parent account, without its parent slice; the chosen accounts 1 and 3.
    assert_eq!(ours.records("routed").len(), 10);
    assert!(ours.records("routed").iter().all(|r| r["routed_account"] == r["account_id"]));
    let chosen: std::collections::BTreeSet<i64> =
        ours.records("chosen").iter().map(|r| r["account_id"].as_i64().unwrap()).collect();
    assert_eq!(chosen.into_iter().collect::<Vec<_>>(), [1, 3]);

    // The identity: the manifest's and the components' sha256.
    let components = manifest("custom/events/components.py");
    let announced = ours
        .messages
        .iter()
        .filter_map(|m| m["log"]["message"].as_str())
        .find(|m| m.starts_with("declarative manifest "))
        .expect("the manifest announced")
        .to_string();
    assert!(
        announced.contains(&format!("custom components {} sha256 {}", components.display(), sha256_of(&components))),
        "{announced}"
    );

    // A custom state migration: a legacy state read by both from where it says.
    let catalog = crate::support::catalog(&[("migrated", "incremental")]);
    let sync =
        Sync { manifest: "custom/events/manifest.yaml", api: &api, config: config.clone(), catalog, files: &files };
    let legacy = json!([{"type": "STREAM", "stream": {"stream_descriptor": {"name": "migrated"},
                         "stream_state": {"last_seen": 1_700_000_600}}}]);
    let (theirs, ours) = (sync.cdk(Some(&legacy)), sync.sluice(Some(&legacy)));
    assert_eq!(ours.ids("migrated"), theirs.ids("migrated"), "{}", ours.explain());
    assert_eq!(ours.ids("migrated"), [6, 7, 8, 9, 10], "from the migrated state on");
    assert_eq!(ours.state_of("migrated"), theirs.state_of("migrated"));

    // Discover: the custom schema loader's schema.
    let config_file = files.json("discover-config.json", &config);
    let run = host(&["discover"]).arg(manifest("custom/events/manifest.yaml")).arg("--config").arg(&config_file).run();
    assert!(run.success(), "{}", run.explain());
    let catalog = run.messages.iter().find(|m| m["type"] == "CATALOG").expect("a catalog");
    let extracted =
        catalog["catalog"]["streams"].as_array().unwrap().iter().find(|s| s["name"] == "extracted").unwrap();
    assert_eq!(extracted["json_schema"]["properties"]["tag"], json!({"type": "string"}), "{extracted}");
}

/// Every way out a components.py tries is refused with an error it catches; an endless loop
/// and endless memory end their stream at the run's limits, a log flood is cut, an exception
/// names the class, the method and the line; the other streams are read all the same.
#[test]
fn a_hostile_components_py_is_contained() {
    let api = demo_api(DemoApiConfig::default());
    api.set_events(events());
    let files = Files::new();
    let config = files.json(
        "config.json",
        &json!({"base_url": format!("http://{}", api.addr()), "ungranted_url": "http://127.0.0.1:9/steal"}),
    );
    let streams = ["escapes", "events", "endless", "greedy", "chatty", "raising"];
    let catalog =
        files.json("catalog.json", &catalog(&streams.iter().map(|s| (*s, "full_refresh")).collect::<Vec<_>>()));
    let run = host(&["read"])
        .arg(manifest("custom/hostile/manifest.yaml"))
        .arg("--config")
        .arg(&config)
        .arg("--catalog")
        .arg(&catalog)
        .arg("--allow-host")
        .arg(grant(&api))
        .args(["--cpu-ms-per-call", "2000", "--memory-mb", "256"].map(String::from))
        .run();
    assert!(!run.success(), "three streams must fail: {}", run.explain());

    let escapes = run.records("escapes");
    let attempts: Vec<&str> = escapes.iter().map(|r| r["attempt"].as_str().unwrap()).collect();
    assert_eq!(
        attempts,
        [
            "read a file",
            "list the root",
            "read the environment",
            "open a socket",
            "start a thread",
            "run a process",
            "load native code",
            "request an ungranted host",
        ]
    );
    for escape in &escapes {
        assert_eq!(escape["outcome"], "refused", "{escape}");
    }
    let error_of = |attempt: &str| escapes.iter().find(|r| r["attempt"] == attempt).unwrap()["error"].clone();
    assert_eq!(error_of("request an ungranted host"), "ConnectionError");
    assert_eq!(error_of("start a thread"), "RuntimeError");
    // The denied request went through the host's egress, which said so.
    assert!(run.logs().iter().any(|l| l.contains("request denied: 127.0.0.1:9")), "{:?}", run.logs());

    assert_eq!(run.records("events").len(), 10, "{}", run.explain());
    assert_eq!(run.records("chatty").len(), 1, "{}", run.explain());
    assert!(run.logs().iter().any(|l| l.contains("were dropped (log rate limit)")), "the flood was not cut");
    let errors: Vec<String> =
        run.errors().iter().map(|e| e["message"].as_str().unwrap_or_default().to_string()).collect();
    let error = |stream: &str| {
        errors
            .iter()
            .find(|e| e.starts_with(&format!("stream {stream},")))
            .cloned()
            .unwrap_or_else(|| panic!("{errors:?}"))
    };
    assert!(error("endless").contains("CPU budget of 2000 ms"), "{errors:?}");
    assert!(error("greedy").contains("memory limit"), "{errors:?}");
    let raised = error("raising");
    assert!(
        raised.contains("Raising.extract_records failed at components.py:125: ValueError: no records in a 200 answer"),
        "{raised}"
    );
}

/// Without its components.py a manifest that needs one is refused naming the class; a kind of
/// custom component the engine does not call yet refuses its stream alone, naming the class.
#[test]
fn custom_components_the_engine_cannot_run_are_refused_by_class() {
    let files = Files::new();
    let source = std::fs::read_to_string(manifest("custom/events/manifest.yaml")).unwrap();
    let alone = files.path().join("alone.yaml");
    std::fs::write(&alone, &source).unwrap();
    let config = files.json("config.json", &json!({"base_url": "http://127.0.0.1:9"}));
    let run = host(&["discover"]).arg(&alone).arg("--config").arg(&config).run();
    assert!(!run.success());
    assert!(
        run.stderr().contains("CustomSchemaLoader source_declarative_manifest.components.EventsSchema is a custom Python component, and no components.py is beside the manifest"),
        "{}",
        run.stderr()
    );

    // A custom incremental sync (not called yet) beside streams the engine runs.
    let dir = files.path().join("synced");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(manifest("custom/events/components.py"), dir.join("components.py")).unwrap();
    let with_custom_sync = source.replacen(
        "    name: decoded\n    primary_key: id\n",
        "    name: decoded\n    primary_key: id\n    incremental_sync:\n      type: CustomIncrementalSync\n      class_name: source_declarative_manifest.components.Accounts\n      cursor_field: created\n",
        1,
    );
    assert_ne!(with_custom_sync, source);
    std::fs::write(dir.join("manifest.yaml"), with_custom_sync).unwrap();
    let run = host(&["discover"]).arg(dir.join("manifest.yaml")).arg("--config").arg(&config).run();
    assert!(run.success(), "{}", run.explain());
    let refusals: Vec<String> = run.logs().into_iter().filter(|l| l.contains("cannot be read")).collect();
    assert_eq!(refusals.len(), 1, "the synced stream alone: {refusals:?}");
    assert!(
        refusals[0].contains("CustomIncrementalSync source_declarative_manifest.components.Accounts is a custom component of a kind Sluice does not call yet"),
        "{refusals:?}"
    );
}

/// The config's `__injected_components_py` (as source-declarative-manifest takes it) runs as a
/// components.py beside the manifest does, verified against its checksum when one is given.
#[test]
fn custom_components_from_the_config_run_as_from_a_file() {
    let api = demo_api(DemoApiConfig::default());
    api.set_events(events());
    let files = Files::new();
    let alone = files.path().join("alone.yaml");
    std::fs::copy(manifest("custom/events/manifest.yaml"), &alone).unwrap();
    let source = std::fs::read_to_string(manifest("custom/events/components.py")).unwrap();
    let catalog = files.json("catalog.json", &catalog(&[("shaped", "full_refresh")]));
    let read = |config: Value| {
        let config = files.json("config.json", &config);
        host(&["read"])
            .arg(&alone)
            .arg("--config")
            .arg(&config)
            .arg("--catalog")
            .arg(&catalog)
            .arg("--allow-host")
            .arg(grant(&api))
            .run()
    };
    let base = format!("http://{}", api.addr());
    let sha256 = {
        use sha2::Digest;
        sha2::Sha256::digest(source.as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let run = read(json!({"base_url": base, "__injected_components_py": source,
                          "__injected_components_py_checksums": {"sha256": sha256}}));
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.records("shaped").len(), 7);
    assert!(
        run.logs()
            .iter()
            .any(|l| l
                .contains(&format!("custom components from the config (__injected_components_py) sha256 {sha256}")))
    );

    let run = read(json!({"base_url": base, "__injected_components_py": source,
                          "__injected_components_py_checksums": {"md5": "00000000000000000000000000000000"}}));
    assert!(!run.success());
    assert!(run.stderr().contains("does not match its checksum"), "{}", run.stderr());
}

/// `host package` of a manifest with a components.py carries them and the components runtime,
/// pinned: the packaged source reads with them, and refuses other code in their place.
#[test]
fn a_packaged_manifest_carries_its_custom_components() {
    let api = demo_api(DemoApiConfig::default());
    api.set_events(events());
    // Beside the host binary, so the package links it instead of copying it.
    let scratch = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    let out = scratch.path().join("pkg");
    let made = host(&["package", "--name", "events", "--allow-host", &grant(&api), "--out"])
        .arg(&out)
        .arg(manifest("custom/events/manifest.yaml"))
        .run_raw();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let pinned: Value = serde_json::from_slice(&std::fs::read(out.join("events.package.json")).unwrap()).unwrap();
    assert_eq!(pinned["components"]["file"], "events.components.py");
    assert_eq!(pinned["components"]["sha256"], sha256_of(&manifest("custom/events/components.py")));
    assert_eq!(pinned["runtime"]["file"], "components.wasm");
    let files = Files::new();
    let config = files.json("config.json", &json!({"base_url": format!("http://{}", api.addr())}));
    let catalog = files.json("catalog.json", &catalog(&[("shaped", "full_refresh")]));
    let read = || {
        std::process::Command::new(out.join("source-events"))
            .arg("read")
            .arg("--config")
            .arg(&config)
            .arg("--catalog")
            .arg(&catalog)
            .output()
            .unwrap()
    };
    let done = read();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let records = String::from_utf8_lossy(&done.stdout).lines().filter(|l| l.contains("\"type\":\"RECORD\"")).count();
    assert_eq!(records, 7, "the custom filter ran");
    // Other code in the components' place is not run.
    std::fs::write(out.join("events.components.py"), "import os\n").unwrap();
    let swapped = read();
    assert!(!swapped.status.success());
    assert!(
        String::from_utf8_lossy(&swapped.stderr).contains("is not the custom components packaged with events"),
        "{}",
        String::from_utf8_lossy(&swapped.stderr)
    );
}
