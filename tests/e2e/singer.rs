//! Singer output, checked by real Singer targets from PyPI (installed by `just setup-singer-targets`).

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub(crate) fn target(name: &str) -> PathBuf {
    let path = workspace_root().join("target/singer-targets").join(name).join("bin").join(name);
    assert!(path.exists(), "{} is missing: run `just setup-singer-targets` (`just test` does)", path.display());
    path
}

/// Pipes `messages` into a Singer target and returns its stdout (the last state it saw).
pub(crate) fn load_into(target_name: &str, config: &Value, messages: &[u8], dir: &Path) -> String {
    let config_path = dir.join(format!("{target_name}.json"));
    std::fs::write(&config_path, config.to_string()).unwrap();
    let mut child = Command::new(target(target_name))
        .arg("--config")
        .arg(&config_path)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, messages).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{target_name} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Ids in the JSONL files target-jsonl wrote for `stream`.
pub(crate) fn jsonl_ids(dir: &Path, stream: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(&format!("{stream}-")) && name.ends_with(".jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                ids.push(serde_json::from_str::<Value>(line).unwrap()["id"].as_u64().unwrap());
            }
        }
    }
    sorted(ids)
}

/// Ids in a DuckDB table, read with the target's own duckdb module.
pub(crate) fn duckdb_ids(db: &Path, table: &str) -> Vec<u64> {
    let python = target("target-duckdb").with_file_name("python");
    let script = format!(
        "import duckdb; c = duckdb.connect({:?}, read_only=True); print('\\n'.join(str(r[0]) for r in c.execute('select id from main.{table} order by id').fetchall()))",
        db.display().to_string()
    );
    let output = Command::new(python).arg("-c").arg(script).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().filter(|l| !l.is_empty()).map(|l| l.parse().unwrap()).collect()
}

fn singer_run(api: &DemoApi, config: &Path, state: Option<&Path>) -> HostRun {
    let mut run = host(&["run", "--format", "singer", "--streams", "items,account_items"]);
    if let Some(state) = state {
        run = run.arg("--state").arg(state);
    }
    run.demo_source(api, config).run()
}

#[test]
fn singer_messages_are_well_formed() {
    let api = demo_api(DemoApiConfig { records: 50, accounts: 3, ..Default::default() });
    let files = Files::new();
    let run = singer_run(&api, &files.json("c.json", &demo_config(&api, 20)), None);
    assert!(run.success(), "{}", run.explain());
    for stream in ["items", "account_items"] {
        let schema = run.messages.iter().position(|m| m["type"] == "SCHEMA" && m["stream"] == stream).unwrap();
        let first_record = run.messages.iter().position(|m| m["type"] == "RECORD" && m["stream"] == stream).unwrap();
        assert!(schema < first_record, "SCHEMA before the first {stream} record");
        assert_eq!(run.messages[schema]["key_properties"], json!(["id"]));
    }
    let types: std::collections::BTreeSet<&str> = run.messages.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["RECORD", "SCHEMA", "STATE"].into_iter().collect(), "only Singer messages on stdout");
    let state = &run.of_type("STATE").last().unwrap()["value"];
    assert_eq!(state["bookmarks"]["account_items"]["partitions"].as_array().unwrap().len(), 3);
    assert!(
        run.messages
            .iter()
            .filter(|m| m["type"] == "RECORD")
            .all(|m| m["time_extracted"].as_str().unwrap().ends_with('Z'))
    );
    assert!(run.stderr().contains("INFO sluice"), "logs go to stderr: {}", run.stderr());
}

#[test]
fn singer_discover_and_catalog_select_streams() {
    let api = demo_api(DemoApiConfig { records: 30, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("c.json", &demo_config(&api, 10));
    let discovered = host(&["run", "--format", "singer", "--discover"])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(&config)
        .run();
    assert!(discovered.success(), "{}", discovered.stderr());
    let mut catalog = discovered.messages[0].clone();
    let streams = catalog["streams"].as_array_mut().unwrap();
    assert_eq!(streams.len(), 4);
    // Deselect everything but accounts, as a Singer platform would.
    for s in streams.iter_mut() {
        let keep = s["tap_stream_id"] == "accounts";
        s["metadata"][0]["metadata"]["selected"] = json!(keep);
    }
    let run = host(&["run", "--format", "singer", "--catalog"])
        .arg(files.json("catalog.json", &catalog))
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    let streams: std::collections::BTreeSet<&str> =
        run.of_type("RECORD").iter().map(|m| m["stream"].as_str().unwrap()).collect();
    assert_eq!(streams, ["accounts"].into_iter().collect());
    // `--properties`, the older name Meltano passes to taps without the catalog capability.
    let run = host(&["run", "--format", "singer", "--properties"])
        .arg(files.json("properties.json", &catalog))
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.of_type("RECORD").len(), 2, "the two accounts");
}

#[test]
fn targets_load_full_and_incremental_runs_exactly() {
    let files = Files::new();
    let out_dir = files.path().join("jsonl");
    std::fs::create_dir(&out_dir).unwrap();
    let db = files.path().join("warehouse.duckdb");

    // Full run against 120 items.
    let first_api = demo_api(DemoApiConfig { records: 120, accounts: 3, ..Default::default() });
    let first = singer_run(&first_api, &files.json("c1.json", &demo_config(&first_api, 25)), None);
    assert!(first.success(), "{}", first.stderr());
    let full: Vec<u64> = (1..=120).collect();
    let jsonl_state =
        load_into("target-jsonl", &json!({"destination_path": out_dir}), &first.output.stdout, files.path());
    let duck_state = load_into(
        "target-duckdb",
        &json!({"path": db, "default_target_schema": "main"}),
        &first.output.stdout,
        files.path(),
    );
    assert_eq!(jsonl_ids(&out_dir, "items"), full);
    assert_eq!(jsonl_ids(&out_dir, "account_items"), full);
    assert_eq!(duckdb_ids(&db, "items"), full);
    assert_eq!(duckdb_ids(&db, "account_items"), full);
    // The targets emit the last state they committed: the tap's final STATE value, which follows
    // every record.
    let last_state = first.of_type("STATE").last().unwrap()["value"].clone();
    let target_state: Value = serde_json::from_str(jsonl_state.lines().last().unwrap()).unwrap();
    assert_eq!(target_state, last_state);
    assert_eq!(serde_json::from_str::<Value>(duck_state.lines().last().unwrap()).unwrap(), last_state);
    drop(first_api);

    // The API grows to 180 items; the incremental run reads only the new account items.
    let second_api = demo_api(DemoApiConfig { records: 180, accounts: 3, ..Default::default() });
    let state_file = files.json("state.json", &last_state);
    let second = singer_run(&second_api, &files.json("c2.json", &demo_config(&second_api, 25)), Some(&state_file));
    assert!(second.success(), "{}", second.stderr());
    let out_dir2 = files.path().join("jsonl2");
    std::fs::create_dir(&out_dir2).unwrap();
    load_into("target-jsonl", &json!({"destination_path": out_dir2}), &second.output.stdout, files.path());
    load_into(
        "target-duckdb",
        &json!({"path": db, "default_target_schema": "main"}),
        &second.output.stdout,
        files.path(),
    );
    assert_eq!(jsonl_ids(&out_dir2, "account_items"), (121..=180).collect::<Vec<_>>(), "only newer rows");
    assert_eq!(jsonl_ids(&out_dir2, "items"), (1..=180).collect::<Vec<_>>(), "items is a full-refresh stream");
    // DuckDB upserts by key: exactly one row per item after both runs.
    assert_eq!(duckdb_ids(&db, "account_items"), (1..=180).collect::<Vec<_>>());
    assert_eq!(duckdb_ids(&db, "items"), (1..=180).collect::<Vec<_>>());
}

/// Field selection as Meltano writes it (`select: items.id`, `items.amount`): deselected
/// properties are left out of the records and the SCHEMA; keys and the replication key are
/// `automatic` in the discovered catalog and read whatever the catalog says.
#[test]
fn deselected_properties_are_left_out() {
    let api = demo_api(DemoApiConfig { records: 20, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("c.json", &demo_config(&api, 10));
    let discovered = host(&["run", "--format", "singer", "--discover"]).demo_source(&api, &config).run();
    let mut catalog = discovered.messages[0].clone();
    let streams = catalog["streams"].as_array_mut().unwrap();
    streams.retain(|s| s["tap_stream_id"] == "items");
    let metadata = streams[0]["metadata"].as_array_mut().unwrap();
    let inclusion = |metadata: &[Value], property: &str| {
        metadata.iter().find(|m| m["breadcrumb"] == json!(["properties", property])).unwrap()["metadata"]["inclusion"]
            .clone()
    };
    assert_eq!(inclusion(metadata, "id"), "automatic");
    assert_eq!(inclusion(metadata, "name"), "available");
    // Everything but amount deselected, the key too (it stays: automatic).
    for m in metadata.iter_mut().skip(1) {
        let keep = m["breadcrumb"][1] == "amount";
        m["metadata"]["selected"] = json!(keep);
    }
    let run = host(&["run", "--format", "singer", "--catalog"])
        .arg(files.json("catalog.json", &catalog))
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    let records = run.of_type("RECORD");
    assert_eq!(records.len(), 20);
    for record in &records {
        let fields: Vec<&String> = record["record"].as_object().unwrap().keys().collect();
        assert_eq!(fields, ["id", "amount"], "{record}");
    }
    let schema = &run.of_type("SCHEMA")[0]["schema"]["properties"];
    let mut described: Vec<&String> = schema.as_object().unwrap().keys().collect();
    described.sort();
    assert_eq!(described, ["amount", "id"]);
}
