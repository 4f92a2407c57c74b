//! Declarative manifests (`host run manifest.yaml`), run in the declarative engine
//! (`plugins/declarative`) against the demo API: each test manifest in
//! `tests/fixtures/manifests/` checked record for record against the demo API's data.

use crate::support::*;
use serde_json::{Value, json};
use std::path::PathBuf;

pub fn manifest(name: &str) -> PathBuf {
    workspace_root().join("tests/fixtures/manifests").join(name)
}

fn run_manifest(name: &str, api: &DemoApi, config: &Value, files: &Files, extra: &[&str]) -> HostRun {
    let config = files.json("config.json", config);
    against("run", manifest(name), config, api).args(extra.iter().map(|s| s.to_string())).run()
}

/// `host COMMAND MANIFEST --config CONFIG`, granted the API and nothing else.
fn against(
    command: &str,
    manifest: impl AsRef<std::path::Path>,
    config: impl AsRef<std::path::Path>,
    api: &DemoApi,
) -> Host {
    host(&[command]).arg(manifest.as_ref()).arg("--config").arg(config.as_ref()).arg("--allow-host").arg(grant(api))
}

/// Records of a stream sorted by id, as JSON.
fn by_id(run: &HostRun, stream: &str) -> Vec<Value> {
    let mut records: Vec<Value> = run.records(stream).into_iter().cloned().collect();
    records.sort_by_key(|r| r["id"].as_u64());
    records
}

#[test]
fn the_demo_manifest_reads_what_the_rust_connector_reads() {
    let api = demo_api(DemoApiConfig { records: 230, accounts: 3, ..Default::default() });
    let files = Files::new();
    for page_size in [7, 100] {
        let config = demo_config(&api, page_size);
        let declarative = run_manifest("demo.yaml", &api, &config, &files, &[]);
        assert!(declarative.success(), "{}", declarative.explain());
        let native = host(&["run"]).demo_source(&api, files.json("native.json", &config)).run();
        assert!(native.success(), "{}", native.explain());
        for stream in ["items", "accounts", "account_items"] {
            let (ours, theirs) = (by_id(&declarative, stream), by_id(&native, stream));
            assert!(!ours.is_empty(), "{stream}: no records");
            assert_eq!(ours, theirs, "{stream} at page size {page_size}");
            assert_eq!(declarative.statuses(stream), ["STARTED", "RUNNING", "COMPLETE"], "{stream}");
        }
        assert_eq!(declarative.ids("items"), (1..=230).collect::<Vec<_>>(), "items in order");
    }
}

#[test]
fn a_manifest_stream_resumes_from_its_state() {
    let api = demo_api(DemoApiConfig { records: 40, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = demo_config(&api, 10);
    let first = run_manifest("demo.yaml", &api, &config, &files, &["--streams", "account_items"]);
    assert!(first.success(), "{}", first.explain());
    assert_eq!(sorted(first.ids("account_items")), (1..=40).collect::<Vec<_>>());
    let state = first.last_state("account_items").expect("a state for account_items");
    // The Airbyte CDK's per-partition state.
    let partitions = state["states"].as_array().expect("per-account cursors");
    assert_eq!(partitions.len(), 2, "{state}");
    let state_file = files.json(
        "state.json",
        &json!([{"type": "STREAM", "stream": {"stream_descriptor": {"name": "account_items"}, "stream_state": state}}]),
    );
    let again = run_manifest(
        "demo.yaml",
        &api,
        &config,
        &files,
        &["--streams", "account_items", "--state", state_file.to_str().unwrap()],
    );
    assert!(again.success(), "{}", again.explain());
    assert!(again.ids("account_items").is_empty(), "nothing new since the state: {:?}", again.ids("account_items"));
    // A sync that found nothing new still ends the stream with its STATE (as the CDK does), the
    // bookmark it was handed: a platform keeping only this sync's states keeps it.
    assert_eq!(again.last_state("account_items").as_ref(), Some(&state), "{}", again.explain());
}

#[test]
fn spec_check_and_discover_answer_from_the_manifest() {
    let api = demo_api(DemoApiConfig { records: 5, ..Default::default() });
    let files = Files::new();
    let spec = host(&["spec"]).arg(manifest("demo.yaml")).run();
    assert!(spec.success(), "{}", spec.explain());
    let spec = &spec.of_type("SPEC")[0]["spec"];
    assert_eq!(spec["connectionSpecification"]["required"], json!(["base_url"]), "{spec}");
    let config = files.json("config.json", &demo_config(&api, 5));
    let check = against("check", manifest("demo.yaml"), &config, &api).run();
    assert_eq!(check.of_type("CONNECTION_STATUS")[0]["connectionStatus"]["status"], "SUCCEEDED", "{}", check.explain());
    let discover = against("discover", manifest("demo.yaml"), &config, &api).run();
    assert!(discover.success(), "{}", discover.explain());
    let streams = &discover.of_type("CATALOG")[0]["catalog"]["streams"];
    let names: Vec<&str> = streams.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["items", "accounts", "account_items"]);
    let account_items = &streams[2];
    assert_eq!(account_items["default_cursor_field"], json!(["updated_at"]));
    assert_eq!(account_items["source_defined_primary_key"], json!([["id"]]));
    assert_eq!(account_items["json_schema"]["properties"]["amount"]["type"], "integer");
    // `read` with a configured catalog, as a platform runs it.
    let catalog = files.json("catalog.json", &catalog(&[("accounts", "full_refresh")]));
    let read = host(&["read"])
        .arg(manifest("demo.yaml"))
        .arg("--config")
        .arg(&config)
        .arg("--catalog")
        .arg(&catalog)
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    assert!(read.success(), "{}", read.explain());
    assert_eq!(read.ids("accounts"), (1..=5).collect::<Vec<_>>());
    assert!(read.ids("items").is_empty(), "only the catalog's streams");
    // A config the manifest's spec refuses is refused before any request.
    let bad = files.json("bad.json", &json!({"page_size": 5}));
    let check = host(&["check"]).arg(manifest("demo.yaml")).arg("--config").arg(&bad).run();
    let status = &check.of_type("CONNECTION_STATUS")[0]["connectionStatus"];
    assert_eq!(status["status"], "FAILED");
    assert!(status["message"].as_str().unwrap().contains("base_url"), "{status}");
}

#[test]
fn the_engine_takes_a_manifest_injected_in_the_config() {
    let api = demo_api(DemoApiConfig { records: 12, ..Default::default() });
    let files = Files::new();
    let yaml = std::fs::read_to_string(manifest("demo.yaml")).unwrap();
    let as_json = sluice_host::manifest::parse(yaml.as_bytes()).unwrap();
    let mut config = demo_config(&api, 5);
    config["__injected_declarative_manifest"] = as_json;
    let config = files.json("config.json", &config);
    let run = against("run", plugin("declarative"), config, &api).arg("--streams").arg("items").run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("items"), (1..=12).collect::<Vec<_>>());
}

#[test]
fn unsupported_components_are_refused_at_load_naming_their_place() {
    let files = Files::new();
    let yaml = std::fs::read_to_string(manifest("demo.yaml")).unwrap().replace(
        "extractor: {type: DpathExtractor, field_path: [data]}\n      paginator:\n        type: DefaultPaginator\n        page_token_option: {type: RequestOption, inject_into: request_parameter, field_name: cursor}",
        "extractor: {type: CustomRecordExtractor, class_name: source_x.components.Extractor}\n      paginator:\n        type: DefaultPaginator\n        page_token_option: {type: RequestOption, inject_into: request_parameter, field_name: cursor}",
    );
    assert!(yaml.contains("CustomRecordExtractor"));
    let path = files.text("custom.yaml", yaml.as_bytes());
    // The stream that needs it is refused alone: discovered, said, and failed when read, while
    // its siblings read.
    let api = demo_api(DemoApiConfig { records: 30, accounts: 2, ..Default::default() });
    let config = files.json("config.json", &demo_config(&api, 10));
    let discover = against("discover", &path, &config, &api).run();
    assert!(discover.success(), "{}", discover.explain());
    let names: Vec<&str> = discover.of_type("CATALOG")[0]["catalog"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"items") && names.contains(&"accounts"), "{names:?}");
    let warned = discover.logs().join("\n");
    assert!(warned.contains("streams[0].retriever.record_selector.extractor: CustomRecordExtractor"), "{warned}");
    let run = against("run", &path, &config, &api).run();
    let message = run.errors()[0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("streams[0].retriever.record_selector.extractor: CustomRecordExtractor"), "{message}");
    assert!(message.contains("components.py"), "{message}");
    assert_eq!(run.errors()[0]["failure_type"], "config_error");
    assert_eq!(run.errors().len(), 1, "{}", run.explain());
    assert!(run.statuses("items").contains(&"INCOMPLETE".to_string()), "{:?}", run.statuses("items"));
    assert_eq!(run.statuses("accounts").last().map(String::as_str), Some("COMPLETE"));
    assert_eq!(sorted(run.ids("account_items")), (1..=30).collect::<Vec<_>>());
}

#[test]
fn a_hostile_manifest_is_contained_like_a_hostile_plugin() {
    let api = demo_api(DemoApiConfig { records: 3, ..Default::default() });
    let files = Files::new();
    // Its requests go where the operator granted, nowhere else.
    let yaml = std::fs::read_to_string(manifest("demo.yaml")).unwrap().replace(
        "url_base: \"{{ config['base_url'] }}\"",
        "url_base: \"http://127.0.0.2:{{ config['base_url'].split(':')[-1] }}\"",
    );
    let path = files.text("elsewhere.yaml", yaml.as_bytes());
    let config = files.json("config.json", &demo_config(&api, 5));
    let run = against("run", &path, &config, &api).arg("--streams").arg("items").run();
    assert!(!run.success());
    assert!(run.explain().contains("127.0.0.2"), "{}", run.explain());
    assert_eq!(api.stats().requests, 0, "nothing reached the API");
    // A billion-laughs document is refused before anything runs.
    let mut bomb = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    for w in names.windows(2) {
        let (prev, name) = (w[0], w[1]);
        bomb.push_str(&format!(
            "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
    }
    let path = files.text("bomb.yaml", bomb.as_bytes());
    let run = host(&["spec"]).arg(&path).run();
    assert!(!run.success());
    assert!(run.explain().contains("cannot be loaded"), "{}", run.explain());
    // A reference bomb that YAML aliases do not show is stopped by the engine, in the sandbox.
    let mut defs = String::new();
    for i in 1..40 {
        defs.push_str(&format!(
            "  l{i}: [\"#/definitions/l{p}\", \"#/definitions/l{p}\", \"#/definitions/l{p}\"]\n",
            p = i - 1
        ));
    }
    let yaml = format!(
        "version: 6.0.0\ndefinitions:\n  l0: x\n{defs}spec:\n  connection_specification: {{type: object}}\nstreams:\n  - name: s\n    retriever:\n      requester: {{url_base: \"#/definitions/l39\"}}\n"
    );
    let path = files.text("refs.yaml", yaml.as_bytes());
    let config = files.json("empty.json", &json!({}));
    let run = host(&["discover"]).arg(&path).arg("--config").arg(&config).run();
    assert!(!run.success());
    assert!(run.explain().contains("expands to more than"), "{}", run.explain());
}

#[test]
fn templates_that_burn_memory_or_cpu_hit_the_sandbox_limits() {
    let files = Files::new();
    let api = demo_api(DemoApiConfig { records: 3, ..Default::default() });
    let config = files.json("config.json", &demo_config(&api, 5));
    let demo = std::fs::read_to_string(manifest("demo.yaml")).unwrap();
    // Doubling a string 40 times: no one operation is large, the whole is a terabyte.
    let memory = demo.replace(
        "path: /items\n",
        "path: \"/items{% set ns = namespace(s='x') %}{% for i in [1] * 40 %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}\"\n",
    );
    let cpu = demo.replace(
        "path: /items\n",
        "path: \"/items{% for a in [1] * 20000 %}{% for b in [1] * 20000 %}{% endfor %}{% endfor %}\"\n",
    );
    for (name, yaml, limit) in [("memory", memory, "memory"), ("cpu", cpu, "CPU")] {
        assert_ne!(yaml, demo, "{name}: the template went in");
        let path = files.text(&format!("{name}.yaml"), yaml.as_bytes());
        let run = against("run", &path, &config, &api)
            .args(["--streams", "items", "--memory-mb", "64", "--cpu-ms-per-call", "300"].map(String::from))
            .run();
        assert!(!run.success(), "{name}");
        let errors = format!("{:?}", run.errors());
        assert!(errors.contains(limit), "{name}: {errors}");
        assert!(run.ids("items").is_empty());
    }
}

#[test]
fn the_conformance_kit_passes_on_every_test_manifest() {
    let api =
        demo_api(DemoApiConfig { records: 60, accounts: 4, retry_after_secs: 0, job_polls: 1, ..Default::default() });
    let files = Files::new();
    let base = api.base_url();
    let cases = [
        ("demo.yaml", demo_config(&api, 10)),
        ("offset.yaml", json!({"base_url": base, "page_size": 10})),
        ("link_header.yaml", json!({"base_url": base})),
        ("session_token.yaml", json!({"base_url": base, "username": "demo", "password": "demo-password"})),
        (
            "oauth.yaml",
            json!({"base_url": base, "client_id": "demo-client", "client_secret": "demo-secret", "refresh_token": "demo-refresh"}),
        ),
        (
            "auth.yaml",
            json!({"base_url": base, "api_key": "demo-key", "credentials": {"auth_type": "basic", "username": "demo", "password": "demo-password"}}),
        ),
        ("errors.yaml", json!({"base_url": base, "accounts": [1, 2, 3, 4]})),
        ("throttled.yaml", json!({"base_url": base})),
        (
            "windows.yaml",
            json!({"base_url": base, "start_date": "2024-01-01T00:00:30Z", "end_date": "2024-01-01T01:30:29Z"}),
        ),
        ("transformations.yaml", json!({"base_url": base})),
        ("reports.yaml", json!({"base_url": base, "accounts": [1, 2]})),
    ];
    for (name, config) in cases {
        let config = files.json(&format!("{name}.json"), &config);
        let run = against("test", manifest(name), &config, &api).run_raw();
        let report = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{name}:\n{report}\n{}", String::from_utf8_lossy(&run.stderr));
        assert!(report.contains("PASS  read"), "{name}: {report}");
    }
}

/// The demo API's item `id` as JSON, as every endpoint serves it.
fn item(id: u64, accounts: u64) -> Value {
    serde_json::to_value(sluice_tests::demo_api::data::item(id, accounts)).unwrap()
}

fn items(ids: impl IntoIterator<Item = u64>, accounts: u64) -> Vec<Value> {
    ids.into_iter().map(|id| item(id, accounts)).collect()
}

fn records(run: &HostRun, stream: &str) -> Vec<Value> {
    run.records(stream).into_iter().cloned().collect()
}

fn base(api: &DemoApi) -> Value {
    json!({"base_url": api.base_url()})
}

#[test]
fn offset_pagination_reads_every_page() {
    let api = demo_api(DemoApiConfig { records: 95, accounts: 3, ..Default::default() });
    let files = Files::new();
    for page_size in [10, 19, 95, 200] {
        let run = run_manifest(
            "offset.yaml",
            &api,
            &json!({"base_url": api.base_url(), "page_size": page_size}),
            &files,
            &[],
        );
        assert!(run.success(), "{}", run.explain());
        assert_eq!(records(&run, "offset_items"), items(1..=95, 3), "page size {page_size}");
    }
    // A short page ends the partition: ten pages of 10, six of 19 (the last empty), two of 95,
    // one of 200.
    assert_eq!(api.stats().requests_by_path["/v2/items"], 10 + 6 + 2 + 1, "{:?}", api.stats());
}

#[test]
fn link_headers_lead_to_the_next_page() {
    let api = demo_api(DemoApiConfig { records: 60, accounts: 2, ..Default::default() });
    let files = Files::new();
    let run = run_manifest("link_header.yaml", &api, &base(&api), &files, &[]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "linked_items"), items(1..=60, 2));
    assert_eq!(api.stats().requests_by_path["/v2/linked_items"], 3, "pages of 25: 25, 25, 10");
}

#[test]
fn a_session_token_login_precedes_the_requests() {
    let api = demo_api(DemoApiConfig { records: 100, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = json!({"base_url": api.base_url(), "username": "demo", "password": "demo-password"});
    let run = run_manifest("session_token.yaml", &api, &config, &files, &[]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "session_items"), items(1..=100, 2));
    let stats = api.stats();
    assert_eq!(stats.requests_by_path["/v2/session/items"], 3, "pages of 40, ended by has_more");
    assert_eq!(stats.sessions_created, 1, "one login, kept for the partition");
    // The password is a secret of the manifest's spec: masked wherever it might show.
    assert!(!run.stdout().contains("demo-password"));
    let wrong = json!({"base_url": api.base_url(), "username": "demo", "password": "nope"});
    let run = run_manifest("session_token.yaml", &api, &wrong, &files, &[]);
    assert!(!run.success());
    assert!(run.explain().contains("401"), "{}", run.explain());
    // The login body as `request_body` (a RequestBodyJsonObject), as newer manifests write it.
    let block = |key: &str, indent: &str| {
        format!(
            "{key}\n{indent}username: \"{{{{ config['username'] }}}}\"\n{indent}password: \"{{{{ config['password'] }}}}\"\n"
        )
    };
    let yaml = std::fs::read_to_string(manifest("session_token.yaml")).unwrap().replace(
        &block("            request_body_json:", "              "),
        &block(
            "            request_body:\n              type: RequestBodyJsonObject\n              value:",
            "                ",
        ),
    );
    assert!(yaml.contains("RequestBodyJsonObject"), "{yaml}");
    let path = files.text("request_body.yaml", yaml.as_bytes());
    let run = against("run", &path, files.json("config.json", &config), &api).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "session_items"), items(1..=100, 2));
}

#[test]
fn oauth_tokens_are_refreshed_when_they_expire() {
    let files = Files::new();
    let config = |api: &DemoApi| json!({"base_url": api.base_url(), "client_id": "demo-client", "client_secret": "demo-secret", "refresh_token": "demo-refresh"});
    let api = demo_api(DemoApiConfig { records: 90, accounts: 2, ..Default::default() });
    let run = run_manifest("oauth.yaml", &api, &config(&api), &files, &[]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "oauth_items"), items(1..=90, 2));
    assert_eq!(api.stats().tokens_issued, 1, "a token that lasts an hour is fetched once");
    // Tokens that expire within the refresh margin are fetched again before each request.
    let api = demo_api(DemoApiConfig { records: 90, accounts: 2, oauth_expires_in_secs: 30, ..Default::default() });
    let run = run_manifest("oauth.yaml", &api, &config(&api), &files, &[]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "oauth_items"), items(1..=90, 2));
    assert_eq!(api.stats().tokens_issued, api.stats().requests_by_path["/v2/oauth/items"]);
    let mut bad = config(&api);
    bad["client_secret"] = json!("wrong");
    let run = run_manifest("oauth.yaml", &api, &bad, &files, &[]);
    assert!(!run.success());
    assert!(run.explain().contains("OAuth token at"), "{}", run.explain());
    assert_eq!(run.errors()[0]["failure_type"], "config_error");
}

#[test]
fn api_keys_and_basic_credentials_chosen_by_the_config() {
    let api = demo_api(DemoApiConfig { records: 70, accounts: 2, ..Default::default() });
    let files = Files::new();
    let basic = json!({"auth_type": "basic", "username": "demo", "password": "demo-password"});
    let config = json!({"base_url": api.base_url(), "api_key": "demo-key", "credentials": basic});
    let run = run_manifest("auth.yaml", &api, &config, &files, &[]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "keyed_items"), items(1..=70, 2));
    assert_eq!(records(&run, "basic_items"), items(1..=70, 2));
    // The config picks the API key for basic_items instead, which that endpoint refuses.
    let config = json!({"base_url": api.base_url(), "api_key": "demo-key", "credentials": {"auth_type": "key"}});
    let run = run_manifest("auth.yaml", &api, &config, &files, &["--streams", "basic_items"]);
    assert!(!run.success());
    let message = run.errors()[0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("api_key=") && message.contains("answered 401"), "{message}");
    // A choice the manifest's spec does not offer is refused before anything is sent.
    let config = json!({"base_url": api.base_url(), "api_key": "demo-key", "credentials": {"auth_type": "oauth"}});
    let run = run_manifest("auth.yaml", &api, &config, &files, &["--streams", "basic_items"]);
    assert!(!run.success());
    assert!(run.explain().contains("credentials.auth_type"), "{}", run.explain());
}

#[test]
fn error_filters_ignore_and_fail_as_the_manifest_says() {
    let api = demo_api(DemoApiConfig { records: 80, accounts: 8, ..Default::default() });
    let files = Files::new();
    let run = run_manifest(
        "errors.yaml",
        &api,
        &json!({"base_url": api.base_url(), "accounts": [1, 2, 3, 4, 5, 8]}),
        &files,
        &[],
    );
    assert!(run.success(), "{}", run.explain());
    // Accounts 4 and 8 are suspended (403, ignored): the others' items only.
    let mut got: Vec<u64> = run.ids("account_items");
    got.sort_unstable();
    let want: Vec<u64> = (1..=80).filter(|id| [1, 2, 3, 5].contains(&((id - 1) % 8 + 1))).collect();
    assert_eq!(got, want);
    let run = run_manifest("errors.yaml", &api, &json!({"base_url": api.base_url(), "accounts": [1, 99]}), &files, &[]);
    assert!(!run.success());
    let error = &run.errors()[0];
    assert!(error["message"].as_str().unwrap().contains("account 99 does not exist"), "{error}");
    assert_eq!(error["failure_type"], "config_error");
}

#[test]
fn a_429_with_retry_after_is_waited_out_by_the_host() {
    let api = demo_api(DemoApiConfig { records: 50, accounts: 2, retry_after_secs: 0, ..Default::default() });
    let files = Files::new();
    let run = run_manifest("throttled.yaml", &api, &base(&api), &files, &[]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(records(&run, "throttled_items"), items(1..=50, 2));
    // Pages 1-3 hold records (20, 20, 10): each refused once, then read.
    let stats = api.stats();
    assert_eq!(stats.throttled, 3, "{stats:?}");
    assert_eq!(stats.requests_by_path["/v2/throttled_items"], 6);
}

#[test]
fn date_windows_are_host_partitions_checkpointed_one_by_one() {
    // Items are one a minute from 2024-01-01T00:01:00Z: 200 of them reach 03:20.
    let api = demo_api(DemoApiConfig { records: 200, accounts: 3, ..Default::default() });
    let files = Files::new();
    let config =
        json!({"base_url": api.base_url(), "start_date": "2024-01-01T00:00:30Z", "end_date": "2024-01-01T04:00:29Z"});
    let run = run_manifest("windows.yaml", &api, &config, &files, &["--concurrency", "3"]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(by_id(&run, "windowed_items"), items(1..=200, 3));
    let state = run.last_state("windowed_items").expect("state");
    // As the CDK writes it: the newest record read (item 200), not the end of the last window.
    assert_eq!(state["updated_at"], "2024-01-01T03:20:00Z", "every window finished: {state}");
    // The next run reads again from the newest record, as the CDK does, and nothing before it.
    let state_file = files.json(
        "state.json",
        &json!([{"type": "STREAM", "stream": {"stream_descriptor": {"name": "windowed_items"}, "stream_state": state}}]),
    );
    let before = api.stats().requests_by_path["/items"];
    let again = run_manifest("windows.yaml", &api, &config, &files, &["--state", state_file.to_str().unwrap()]);
    assert!(again.success(), "{}", again.explain());
    // (`updated_after` is exclusive on this API, so item 200 itself does not come back.)
    assert!(again.ids("windowed_items").is_empty());
    assert_eq!(api.stats().requests_by_path["/items"], before + 1, "only the last window is read again");
    // A later end reads only the new window.
    let mut later = config.clone();
    later["end_date"] = json!("2024-01-01T05:00:29Z");
    let api_more = demo_api(DemoApiConfig { records: 290, accounts: 3, ..Default::default() });
    later["base_url"] = json!(api_more.base_url());
    let run = against("run", manifest("windows.yaml"), files.json("later.json", &later), &api_more)
        .arg("--state")
        .arg(&state_file)
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(
        sorted(run.ids("windowed_items")),
        // Late records after the newest one read (201-240, in windows that had ended) are read
        // now, as the CDK reads them; 260 sits exactly on a window start, which this API's
        // exclusive `updated_after` leaves out (it does for the CDK too).
        (201..=290).filter(|id| *id != 260).collect::<Vec<_>>(),
        "every record after the bookmark"
    );
}

#[test]
fn client_side_incremental_windows_keep_only_their_own_records() {
    // The API is asked for everything each time; the engine keeps what falls in the window.
    let api = demo_api(DemoApiConfig { records: 150, accounts: 3, ..Default::default() });
    let files = Files::new();
    let yaml = std::fs::read_to_string(manifest("windows.yaml")).unwrap();
    let options = "      start_time_option: {type: RequestOption, inject_into: request_parameter, field_name: updated_after}\n      end_time_option: {type: RequestOption, inject_into: request_parameter, field_name: updated_until}\n";
    assert!(yaml.contains(options));
    let yaml = yaml.replace(options, "      is_client_side_incremental: true\n");
    let path = files.text("client-side.yaml", yaml.as_bytes());
    let config =
        json!({"base_url": api.base_url(), "start_date": "2024-01-01T00:00:30Z", "end_date": "2024-01-01T03:00:29Z"});
    let run = against("run", &path, files.json("config.json", &config), &api).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(by_id(&run, "windowed_items"), items(1..=150, 3), "each record once, from its own window");
    assert!(api.stats().requests_by_path["/items"] >= 3 * 6, "three windows, each reading all 150 items");
}

#[test]
fn filters_and_transformations_shape_the_records() {
    let api = demo_api(DemoApiConfig { records: 120, accounts: 3, ..Default::default() });
    let files = Files::new();
    let run = run_manifest("transformations.yaml", &api, &base(&api), &files, &[]);
    assert!(run.success(), "{}", run.explain());
    let want: Vec<Value> = (1..=120)
        .map(|id| item(id, 3))
        .filter(|r| r["amount"].as_u64().unwrap() > 500)
        .map(|mut r| {
            let amount = r["amount"].as_u64().unwrap();
            let day = r["updated_at"].as_str().unwrap()[..10].to_string();
            let id = r["id"].as_u64().unwrap();
            let map = r.as_object_mut().unwrap();
            map.remove("name");
            map.insert("amount_cents".into(), json!(amount * 100));
            map.insert("meta".into(), json!({"origin": "demo-api", "day": day}));
            map.insert("id_text".into(), json!(id.to_string()));
            r
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(records(&run, "big_items"), want);
}

#[test]
fn report_jobs_run_on_the_host_orchestrator_with_csv_and_jsonl_downloads() {
    let api = demo_api(DemoApiConfig { records: 90, accounts: 3, job_polls: 2, ..Default::default() });
    let files = Files::new();
    let config = json!({"base_url": api.base_url(), "accounts": [1, 2, 3], "max_jobs": 2});
    let run = run_manifest("reports.yaml", &api, &config, &files, &["--job-poll-ms", "10"]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(by_id(&run, "report_items"), items(1..=90, 3));
    let stats = api.stats();
    assert_eq!(stats.jobs_created, 3);
    assert_eq!(stats.jobs_deleted, 3, "every job deleted once read");
    assert!(stats.max_jobs_running <= 2, "max_concurrent_async_job_count holds: {stats:?}");
    // The same jobs as JSON lines, with the decoder swapped.
    let yaml =
        std::fs::read_to_string(manifest("reports.yaml")).unwrap().replace("type: CsvDecoder", "type: JsonlDecoder");
    let path = files.text("reports-jsonl.yaml", yaml.as_bytes());
    let mut config = config;
    config["format"] = json!("jsonl");
    let run = against("run", &path, files.json("jsonl.json", &config), &api).arg("--job-poll-ms").arg("10").run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(by_id(&run, "report_items"), items(1..=90, 3));
}

#[test]
fn a_packaged_manifest_runs_as_a_source_with_its_engine_pinned() {
    let api = demo_api(DemoApiConfig { records: 30, accounts: 2, ..Default::default() });
    // Beside the host binary, so the package links it instead of copying it.
    let scratch = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    let out = scratch.path().join("pkg");
    let made = host(&["package", "--name", "demo-low-code", "--allow-host", &grant(&api), "--out"])
        .arg(&out)
        .arg(manifest("demo.yaml"))
        .run_raw();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    for file in ["demo-low-code.yaml", "declarative.wasm", "demo-low-code.policy.json", "source-demo-low-code"] {
        assert!(out.join(file).is_file(), "{file} in the package");
    }
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 10)).display().to_string();
    let catalog = files.json("catalog.json", &catalog(&[("items", "full_refresh")])).display().to_string();
    let source =
        |args: &[&str]| std::process::Command::new(out.join("source-demo-low-code")).args(args).output().unwrap();
    let read = source(&["read", "--config", &config, "--catalog", &catalog]);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    let records = String::from_utf8_lossy(&read.stdout).lines().filter(|l| l.contains("\"type\":\"RECORD\"")).count();
    assert_eq!(records, 30);
    let spec = source(&["spec"]);
    assert!(String::from_utf8_lossy(&spec.stdout).contains("Demo API (declarative)"), "the manifest's spec");
    // Another engine in the packaged one's place is not run.
    std::fs::copy(plugin("hostile"), out.join("declarative.wasm")).unwrap();
    let swapped = source(&["spec"]);
    assert!(!swapped.status.success());
    assert!(
        String::from_utf8_lossy(&swapped.stderr).contains("is not the declarative engine packaged with demo-low-code")
    );
}

#[test]
fn report_downloads_in_lines_are_streamed_past_the_response_cap() {
    // 3000 rows in three reports of about 60 KB each, read under a 16 KB response cap: only a
    // download read a piece at a time gets through.
    let api = demo_api(DemoApiConfig { records: 3000, accounts: 3, job_polls: 1, ..Default::default() });
    let files = Files::new();
    let yaml = std::fs::read_to_string(manifest("reports.yaml")).unwrap();
    let plain = yaml.replace("compression: gzip", "compression: none");
    let gzip_csv = "      download_decoder:\n        type: GzipDecoder\n        decoder:\n          type: CsvDecoder\n";
    assert!(plain.contains(gzip_csv));
    for (format, decoder) in [("csv", "CsvDecoder"), ("jsonl", "JsonlDecoder")] {
        let text = plain.replace(gzip_csv, &format!("      download_decoder:\n        type: {decoder}\n"));
        let path = files.text(&format!("reports-{format}.yaml"), text.as_bytes());
        let config = json!({"base_url": api.base_url(), "accounts": [1, 2, 3], "format": format});
        let run = against("run", &path, files.json(&format!("{format}.json"), &config), &api)
            .args(["--job-poll-ms", "10", "--http-max-response-bytes", "16384"].map(String::from))
            .run();
        assert!(run.success(), "{format}: {}", run.explain());
        assert_eq!(by_id(&run, "report_items"), items(1..=3000, 3), "{format}");
    }
    // A gzip download is read whole, and a big one is refused by the cap, naming it.
    let big = demo_api(DemoApiConfig { records: 6000, accounts: 1, job_polls: 1, ..Default::default() });
    let config = json!({"base_url": big.base_url(), "accounts": [1], "format": "csv"});
    let run = against("run", manifest("reports.yaml"), files.json("whole.json", &config), &big)
        .args(["--job-poll-ms", "10", "--http-max-response-bytes", "16384"].map(String::from))
        .run();
    assert!(!run.success());
    assert!(run.explain().contains("too large"), "{}", run.explain());
}

/// `host manifests check DIR` reports the engine's reach over a folder laid out as Airbyte's
/// connectors are: a manifest read in full, one with a stream it cannot read (named, with the
/// component), one with custom components, one that is not YAML; a connector's metadata.yaml is
/// no manifest. No config and no network are needed.
#[test]
fn manifests_check_reports_the_reach_over_a_folder() {
    let files = Files::new();
    let folder = |name: &str| {
        let dir = files.path().join("connectors").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    let demo = std::fs::read_to_string(manifest("demo.yaml")).unwrap();
    std::fs::write(folder("source-demo").join("manifest.yaml"), &demo).unwrap();
    std::fs::write(folder("source-demo").join("metadata.yaml"), "data:\n  name: Demo\n").unwrap();
    let custom = demo.replacen(
        "extractor: {type: DpathExtractor, field_path: [data]}",
        "extractor: {type: CustomRecordExtractor, class_name: source_x.components.Extractor}",
        1,
    );
    std::fs::write(folder("source-partial").join("manifest.yaml"), custom).unwrap();
    std::fs::write(folder("source-custom").join("manifest.yaml"), &demo).unwrap();
    std::fs::write(folder("source-custom").join("components.py"), "class Extractor: pass\n").unwrap();
    std::fs::write(folder("source-broken").join("manifest.yaml"), "streams: [unclosed\n").unwrap();
    let output = host(&["manifests", "check"]).arg(files.path().join("connectors")).command().output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(!output.status.success(), "not every manifest is read in full: {text}");
    let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name}: {text}"));
    assert!(
        line("source-demo/manifest.yaml").starts_with("ok ") && line("source-demo").contains("3 streams"),
        "{text}"
    );
    assert!(
        line("source-partial/manifest.yaml").starts_with("partial ")
            && line("source-partial").contains("1 of 3 streams"),
        "{text}"
    );
    // The stream, and the place and component that keep it from being read.
    assert!(text.contains("accounts: streams[1].retriever.record_selector.extractor: CustomRecordExtractor"), "{text}");
    // A components.py that no component names changes nothing (source-bamboo-hr ships one).
    assert!(line("source-custom/").starts_with("ok "), "{text}");
    assert!(line("source-broken/").starts_with("refused "), "{text}");
    assert!(!text.contains("metadata.yaml"), "{text}");
    assert!(text.contains("4 manifests: 2 read in full (50 %), 1 in part, 1 refused"), "{text}");
}

/// A ListPartitionRouter's keys in the config: the engine names the fields the manifest's
/// templates read outside the listing (contract 0.1.7), so each partition's instance is handed
/// the config without the list, and still reads its account.
#[test]
fn partitions_of_a_config_list_read_without_the_list() {
    let api = demo_api(DemoApiConfig { records: 40, accounts: 20, ..Default::default() });
    let files = Files::new();
    let accounts: Vec<u64> = (1..=20).collect();
    let config = json!({"base_url": api.base_url(), "accounts": accounts, "unused": "x"});
    let run = run_manifest("partitions.yaml", &api, &config, &files, &[]);
    assert!(run.success(), "{}", run.explain());
    let mut ids: Vec<u64> = run.ids("account_items");
    ids.sort();
    assert_eq!(ids, (1..=40).collect::<Vec<_>>());
    let said = run.logs().iter().any(|l| l.contains("without the config fields they do not use: accounts, unused"));
    assert!(said, "{:?}", run.logs());
}

/// A manifest's `api_budget` governs its requests as the CDK's call budget does: the policy
/// whose matcher takes `/items` lets a burst of its limit through, then one request per window;
/// requests no policy takes (`/accounts`) are not held.
#[test]
fn a_manifests_api_budget_holds_the_requests_it_matches() {
    let api = demo_api(DemoApiConfig { records: 60, accounts: 2, ..Default::default() });
    let files = Files::new();
    let mut yaml = std::fs::read_to_string(manifest("demo.yaml")).unwrap();
    yaml.push_str(
        "\napi_budget:\n  type: HTTPAPIBudget\n  policies:\n    - type: MovingWindowCallRatePolicy\n      \
         rates: [{limit: 2, interval: PT0.4S}]\n      matchers: [{method: GET, url_path_pattern: \"^/items$\"}]\n",
    );
    let budgeted = files.path().join("budgeted.yaml");
    std::fs::write(&budgeted, yaml).unwrap();
    let config = files.json("config.json", &demo_config(&api, 10));
    let streams = || ["--streams".to_string(), "items,accounts".to_string()];
    // The same read without the budget first (it also warms the engine's compiled-code cache, so
    // the budgeted read's time is the budget's).
    let unbudgeted = against("run", manifest("demo.yaml"), &config, &api).args(streams()).run();
    assert!(unbudgeted.success(), "{}", unbudgeted.explain());
    let started = std::time::Instant::now();
    let run = against("run", &budgeted, &config, &api).args(streams()).run();
    let elapsed = started.elapsed();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("items"), unbudgeted.ids("items"));
    assert_eq!(run.ids("items").len(), 60);
    assert!(run.logs().iter().any(|l| l.contains("api_budget: 1 policies")), "{}", run.explain());
    // At least six pages of items: two at once, then two per 0.4 s window.
    assert!(elapsed >= std::time::Duration::from_millis(800), "6 pages of items or more in {elapsed:?}");
}
