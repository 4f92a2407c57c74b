//! Behaving as the sources and taps platforms drive (the Airbyte CDK, the Singer SDK): what
//! PyAirbyte, the Airbyte platform and Meltano send and expect, against the demo API.

use crate::support::*;
use serde_json::{Value, json};

fn read(api: &DemoApi, config: &Value, catalog: &Value, files: &Files) -> HostRun {
    host(&["read", "--catalog"])
        .arg(files.json("catalog.json", catalog))
        .demo_source(api, files.json("config.json", config))
        .run()
}

/// PyAirbyte configures every stream as incremental; a stream without a cursor is then read in
/// full, as the CDK does, with a warning (it used to fail the whole read).
#[test]
fn an_incremental_entry_for_a_stream_without_a_cursor_is_read_in_full() {
    let api = demo_api(DemoApiConfig { records: 50, accounts: 3, ..Default::default() });
    let files = Files::new();
    let run = read(&api, &demo_config(&api, 20), &catalog(&[("accounts", "incremental")]), &files);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("accounts"), [1, 2, 3]);
    let warning = run.logs().into_iter().find(|l| l.contains("stream accounts has no cursor field")).unwrap();
    assert!(warning.contains("read in full"), "{warning}");
    assert_eq!(run.last_state("accounts"), Some(json!({"__ab_no_cursor_state_message": true})));
}

/// A catalog stream the connector lacks fails as the CDK reports it (a config error naming it,
/// its status INCOMPLETE, the exit code), and the other streams are read in full.
#[test]
fn a_catalog_stream_the_connector_lacks_is_reported_and_the_rest_read() {
    let api = demo_api(DemoApiConfig { records: 50, accounts: 3, ..Default::default() });
    let files = Files::new();
    let selection = catalog(&[("gone_stream", "full_refresh"), ("items", "incremental")]);
    let run = read(&api, &demo_config(&api, 20), &selection, &files);
    assert!(!run.success(), "a stream that could not be read fails the sync");
    assert_eq!(sorted(run.ids("items")), (1..=50).collect::<Vec<_>>());
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["stream_descriptor"]["name"], "gone_stream");
    assert_eq!(errors[0]["failure_type"], "config_error");
    let internal = errors[0]["internal_message"].as_str().unwrap();
    assert!(internal.contains("The stream 'gone_stream' in your connection configuration was not found"), "{internal}");
    assert_eq!(run.statuses("gone_stream"), ["INCOMPLETE"]);
    assert_eq!(run.statuses("items").last().unwrap(), "COMPLETE");
}

/// Every STATE says how many records of its stream came since the stream's previous STATE
/// (`sourceStats.recordCount`, as airbyte-cdk sets it), so the counts add up to the records.
#[test]
fn states_count_the_records_since_the_previous_state() {
    let api = demo_api(DemoApiConfig { records: 120, accounts: 4, ..Default::default() });
    let files = Files::new();
    let selection = catalog(&[("account_items", "incremental"), ("accounts", "full_refresh")]);
    let run = read(&api, &demo_config(&api, 10), &selection, &files);
    assert!(run.success(), "{}", run.explain());
    for stream in ["account_items", "accounts"] {
        let states: Vec<&Value> = run
            .of_type("STATE")
            .into_iter()
            .filter(|m| m["state"]["stream"]["stream_descriptor"]["name"] == stream)
            .collect();
        assert!(!states.is_empty(), "{stream} has a STATE");
        let counted: f64 = states.iter().map(|s| s["state"]["sourceStats"]["recordCount"].as_f64().unwrap()).sum();
        assert_eq!(counted as usize, run.records(stream).len(), "{stream}");
    }
}

/// The config is checked against the spec before the connector sees it: the error names the
/// field and the rule, for check, discover and read alike, and nothing reaches the API.
#[test]
fn the_config_is_checked_against_the_spec_first() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let bad = files.json("bad.json", &json!({"base_url": api.base_url(), "page_size": "ten"}));
    let run = host(&["read", "--catalog"]).arg(files.json("c.json", &catalog(&[("items", "full_refresh")])));
    let read = run.demo_source(&api, &bad).run();
    assert!(!read.success());
    let error = read.errors()[0]["message"].as_str().unwrap().to_string();
    assert!(error.contains("field page_size: \"ten\" is not of type \"integer\""), "{error}");
    assert_eq!(read.errors()[0]["failure_type"], "config_error");
    let discover = host(&["discover"]).demo_source(&api, &bad).run();
    assert!(discover.errors()[0]["message"].as_str().unwrap().contains("field page_size"), "{}", discover.explain());
    let check = host(&["check"]).demo_source(&api, &bad).run();
    let status = &check.of_type("CONNECTION_STATUS")[0]["connectionStatus"];
    assert_eq!(status["status"], "FAILED");
    assert!(status["message"].as_str().unwrap().contains("field page_size"), "{status}");
    // A bound the schema asserts (`format` is an annotation, as in the CDK).
    let zero = files.json("zero.json", &json!({"base_url": api.base_url(), "page_size": 0}));
    let check = host(&["check", "--config"]).arg(&zero).arg(plugin("demo-source")).run();
    let status = &check.of_type("CONNECTION_STATUS")[0]["connectionStatus"];
    assert!(
        status["message"].as_str().unwrap().contains("field page_size: 0 is less than the minimum of 1"),
        "{status}"
    );
    assert_eq!(api.stats().requests, 0, "nothing reached the API");
}

/// A Singer run with state and nothing new still ends with a STATE holding that state: with
/// `tap | target > state.json` the file used to end up empty, and the next run read everything.
#[test]
fn a_singer_run_with_nothing_new_ends_with_its_state() {
    let api = demo_api(DemoApiConfig { records: 60, accounts: 3, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 25));
    let tap = |state: Option<&std::path::Path>| {
        let mut run = host(&["run", "--format", "singer", "--streams", "account_items"]);
        if let Some(state) = state {
            run = run.arg("--state").arg(state);
        }
        run.demo_source(&api, &config).run()
    };
    let first = tap(None);
    assert!(first.success(), "{}", first.stderr());
    let saved = first.of_type("STATE").last().unwrap()["value"].clone();
    let second = tap(Some(&files.json("state.json", &saved)));
    assert!(second.success(), "{}", second.stderr());
    assert!(second.of_type("RECORD").is_empty(), "nothing new");
    let states = second.of_type("STATE");
    assert_eq!(states.len(), 1, "one STATE at the end");
    assert_eq!(states[0]["value"], saved, "the state carried through unchanged");
}

/// A platform passes only the standard arguments: grants come from SLUICE_ALLOW_HOSTS, or from
/// the policy file beside the plugin (`NAME.policy.json` next to `NAME.wasm`) when the package
/// pins it (`NAME.package.json`, as `host package` writes it); with neither the run refuses to
/// start and names the grant it needs. A policy beside the plugin that nothing pins came with
/// the plugin: it is ignored with a warning. The first LOG line names the policy in force.
#[test]
fn grants_come_from_the_environment_or_the_policy_beside_the_plugin() {
    let api = demo_api(DemoApiConfig { records: 30, accounts: 2, ..Default::default() });
    let files = Files::new();
    let wasm = files.path().join("source-demo.wasm");
    std::fs::copy(plugin("demo-source"), &wasm).unwrap();
    let config = files.json("config.json", &demo_config(&api, 10));
    let selection = files.json("catalog.json", &catalog(&[("items", "incremental")]));
    let standard = || host(&["read", "--config"]).arg(&config).arg("--catalog").arg(&selection).arg(&wasm);
    let refused = standard().run();
    assert!(!refused.success());
    let message = refused.errors()[0]["message"].as_str().unwrap().to_string();
    assert!(message.contains(&format!("--allow-host {}", grant(&api))), "{message}");
    assert!(refused.logs()[0].contains("policy: the defaults (no policy file given)"), "{:?}", refused.logs());

    let from_env =
        standard().envs(&[("SLUICE_ALLOW_HOSTS".into(), format!("api.example.com:443,{}", grant(&api)))]).run();
    assert!(from_env.success(), "{}", from_env.explain());
    assert_eq!(from_env.ids("items").len(), 30);

    // Beside the plugin but pinned by nothing: the plugin's own, ignored (no grant, so the run
    // refuses to start), and the run says so.
    let policy = json!({"allow_hosts": [grant(&api)], "limits": {"max_records_per_page": 5}});
    let policy_text = policy.to_string();
    let policy_file = files.path().join("source-demo.policy.json");
    std::fs::write(&policy_file, &policy_text).unwrap();
    let unpinned = standard().run();
    assert!(!unpinned.success());
    assert!(unpinned.errors()[0]["message"].as_str().unwrap().contains("--allow-host"), "{}", unpinned.explain());
    assert!(
        unpinned.logs().iter().any(|l| l.contains("source-demo.policy.json beside the plugin is ignored")),
        "{:?}",
        unpinned.logs()
    );

    // Pinned by the package (plugin and policy by sha256): its grant lets the run start, and its
    // limits hold: pages of 10 exceed 5 records a page.
    let sha = |bytes: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes));
    let package = json!({"name": "source-demo", "plugin": "source-demo.wasm", "sha256": sha(&std::fs::read(&wasm).unwrap()),
        "sluice": "0.1.0", "policy": {"file": "source-demo.policy.json", "sha256": sha(policy_text.as_bytes())}});
    files.json("source-demo.package.json", &package);
    let beside = standard().run();
    let errors = beside.errors();
    assert!(
        !errors.is_empty() && errors[0]["message"].as_str().unwrap().contains("limit of 5 records per page"),
        "{}",
        beside.explain()
    );
    assert!(beside.logs()[0].contains("source-demo.policy.json (pinned by"), "{:?}", beside.logs());
    // A policy given explicitly wins over the one beside the plugin, and is named.
    let explicit = files.json("explicit.json", &json!({"allow_hosts": [grant(&api)]}));
    let chosen = standard().envs(&[("SLUICE_POLICY".into(), explicit.display().to_string())]).run();
    assert!(chosen.success(), "{}", chosen.explain());
    assert_eq!(chosen.ids("items").len(), 30);
    assert!(chosen.logs()[0].contains("explicit.json (given with SLUICE_POLICY)"), "{:?}", chosen.logs());
    // The pinned policy changed after packaging: refused, never half-honoured.
    std::fs::write(&policy_file, json!({"allow_hosts": [grant(&api), "http://169.254.169.254"]}).to_string()).unwrap();
    let tampered = standard().run();
    assert!(!tampered.success());
    assert!(tampered.stderr().contains("is not the one packaged"), "{}", tampered.explain());
}

/// `run --about` describes the connector as a Singer tap does for Meltano, with no config: its
/// capabilities and its settings (the spec), as JSON or a markdown table.
#[test]
fn about_describes_the_connector_without_a_config() {
    let output = host(&["run", "--about"]).arg(plugin("demo-source")).run_raw();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let about: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(about["name"], "demo-source");
    assert!(about["capabilities"].as_array().unwrap().contains(&json!("properties")));
    assert_eq!(about["settings"]["required"], json!(["base_url"]));
    let output = host(&["run", "--about=markdown"]).arg(plugin("demo-source")).run_raw();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("| base_url | True |"), "{text}");
    assert!(
        text.contains("| api_key | False |  | Sent as a bearer token, when the API requires one (secret) |"),
        "{text}"
    );
    // Any other run still needs its config, and says so.
    let run = host(&["run"]).arg(plugin("demo-source")).run_raw();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("--config FILE is required"));
}

/// `host package` writes a connector as platforms run it: `source-NAME` answers the Airbyte
/// commands and `tap-NAME` the Singer ones with the packaged plugin and its grants, no other
/// argument needed; a plugin swapped in afterwards is refused; the Meltano definition names the
/// tap and marks secret settings.
#[test]
fn a_packaged_connector_runs_with_the_platforms_arguments() {
    let api = demo_api(DemoApiConfig { records: 40, accounts: 2, ..Default::default() });
    // Beside the host binary, so the package links it instead of copying 500 MB.
    let scratch = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    let out = scratch.path().join("pkg");
    let files = Files::new();
    let made = host(&["package", "--name", "demo", "--allow-host", &grant(&api), "--out"])
        .arg(&out)
        .arg(plugin("demo-source"))
        .run_raw();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let config = files.json("config.json", &demo_config(&api, 10));
    let source = |args: &[&str]| {
        let output = std::process::Command::new(out.join("source-demo")).args(args).output().unwrap();
        let messages: Vec<Value> =
            String::from_utf8_lossy(&output.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        (output, messages)
    };
    let (spec, messages) = source(&["spec"]);
    assert!(spec.status.success(), "{}", String::from_utf8_lossy(&spec.stderr));
    assert!(messages.iter().any(|m| m["type"] == "SPEC"));
    let config_arg = config.display().to_string();
    let (_, messages) = source(&["check", "--config", &config_arg]);
    let status = messages.iter().find(|m| m["type"] == "CONNECTION_STATUS").unwrap();
    assert_eq!(status["connectionStatus"]["status"], "SUCCEEDED", "{status}");
    let selection = files.json("catalog.json", &catalog(&[("items", "incremental")]));
    let (read, messages) = source(&["read", "--config", &config_arg, "--catalog", &selection.display().to_string()]);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    assert_eq!(messages.iter().filter(|m| m["type"] == "RECORD").count(), 40);

    let tap = std::process::Command::new(out.join("tap-demo")).args(["--config", &config_arg]).output().unwrap();
    assert!(tap.status.success(), "{}", String::from_utf8_lossy(&tap.stderr));
    let singer = String::from_utf8_lossy(&tap.stdout);
    assert!(singer.lines().any(|l| l.starts_with("{\"type\":\"SCHEMA\"")), "Singer messages");
    let about =
        std::process::Command::new(out.join("tap-demo")).args(["--about", "--format", "json"]).output().unwrap();
    let about: Value = serde_json::from_slice(&about.stdout).unwrap();
    assert_eq!(about["name"], "demo");

    let meltano = std::fs::read_to_string(out.join("meltano-plugin.yml")).unwrap();
    assert!(meltano.contains("- name: \"tap-demo\""), "{meltano}");
    assert!(meltano.contains("- name: \"api_key\"\n      kind: string\n      sensitive: true"), "{meltano}");

    // Another plugin in the packaged one's place is not run.
    std::fs::copy(plugin("hostile"), out.join("demo.wasm")).unwrap();
    let (swapped, _) = source(&["spec"]);
    assert!(!swapped.status.success());
    assert!(String::from_utf8_lossy(&swapped.stderr).contains("is not the plugin packaged as demo"));
}

/// A platform client installed by `just setup-platform-clients`.
fn client(path: &str) -> std::path::PathBuf {
    let path = workspace_root().join(path);
    assert!(path.exists(), "{} is missing: run `just setup-platform-clients` (`just test` does)", path.display());
    path
}

/// The demo API before and after it grew by 50 items, and the demo connector packaged as `demo`
/// with both granted, in `DIR/pkg` of a scratch folder beside the host binary (so the package
/// links it instead of copying 500 MB).
fn packaged_demo() -> (DemoApi, DemoApi, tempfile::TempDir, std::path::PathBuf) {
    let first = demo_api(DemoApiConfig { records: 100, accounts: 3, ..Default::default() });
    let grown = demo_api(DemoApiConfig { records: 150, accounts: 3, ..Default::default() });
    let scratch = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    let out = scratch.path().join("pkg");
    let grants = format!("{},{}", grant(&first), grant(&grown));
    let made = host(&["package", "--name", "demo", "--allow-host", &grants, "--out"])
        .arg(&out)
        .arg(plugin("demo-source"))
        .run_raw();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    (first, grown, scratch, out)
}

/// PyAirbyte itself (0.71.3, `just setup-platform-clients`) reads a packaged source through
/// `local_executable` into its DuckDB cache: exact rows per stream; a second read brings nothing
/// new for the incremental streams (the full-refresh ones are read again); after the API grew,
/// exactly the new rows arrive.
#[test]
fn pyairbyte_reads_a_packaged_source_incrementally() {
    let python = client("target/tools/pyairbyte/bin/python");
    let (first, grown, scratch, out) = packaged_demo();
    let files = Files::new();
    let (c1, c2) = (files.json("c1.json", &demo_config(&first, 25)), files.json("c2.json", &demo_config(&grown, 25)));
    let cache = scratch.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let output = std::process::Command::new(&python)
        .arg(workspace_root().join("tests/clients/pyairbyte_read.py"))
        .arg(out.join("source-demo"))
        .args([&c1, &c2, &cache])
        .current_dir(scratch.path())
        .env("HOME", scratch.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let reads: Vec<Value> =
        stdout.lines().filter(|l| l.starts_with("{\"processed\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    let counts = |n: u64| json!({"items": n, "accounts": 3, "account_items": n, "windowed_items": n});
    assert_eq!(reads[0], json!({"processed": 303, "counts": counts(100)}));
    assert_eq!(reads[1], json!({"processed": 103, "counts": counts(100)}), "only the full-refresh streams again");
    assert_eq!(reads[2], json!({"processed": 253, "counts": counts(150)}), "50 new rows per incremental stream");
}

/// Meltano itself (4.4.1) runs the packaged tap from the generated plugin definition, with
/// target-jsonl: field selection honoured, its state stored (`meltano state get`), the second run
/// incremental (nothing new), and after the API grew exactly the new rows.
#[test]
fn meltano_runs_a_packaged_tap_incrementally_with_field_selection() {
    let meltano = client("target/tools/meltano/bin/meltano");
    let (first, grown, scratch, out) = packaged_demo();
    let (project, loaded) = (scratch.path().join("project"), scratch.path().join("out"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&loaded).unwrap();
    let definition = std::fs::read_to_string(out.join("meltano-plugin.yml")).unwrap();
    let q = |s: &str| serde_json::to_string(s).unwrap();
    let yml = format!(
        "default_environment: dev\nproject_id: sluice-test\nsend_anonymous_usage_stats: false\nenvironments:\n- name: dev\n\
         {definition}    config:\n      base_url: {}\n      page_size: 25\n    select:\n    - account_items.id\n    - account_items.amount\n\
         \x20 loaders:\n  - name: target-jsonl\n    namespace: target_jsonl\n    executable: {}\n    config:\n      destination_path: {}\n      do_timestamp_file: false\n",
        q(&first.base_url()),
        q(&crate::singer::target("target-jsonl").display().to_string()),
        q(&loaded.display().to_string()),
    );
    std::fs::write(project.join("meltano.yml"), yml).unwrap();
    let meltano_run = |args: &[&str], env: &[(&str, String)]| {
        let output = std::process::Command::new(&meltano)
            .args(args)
            .current_dir(&project)
            .env("HOME", scratch.path())
            .env("MELTANO_SEND_ANONYMOUS_USAGE_STATS", "false")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "meltano {args:?}: {text}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let rows = || -> Vec<Value> {
        let text = std::fs::read_to_string(loaded.join("account_items.jsonl")).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    meltano_run(&["run", "tap-demo", "target-jsonl"], &[]);
    let after_first = rows();
    assert_eq!(after_first.len(), 100);
    for row in &after_first {
        let fields: Vec<&String> = row.as_object().unwrap().keys().collect();
        assert_eq!(fields, ["id", "amount", "updated_at"], "selected fields and the replication key: {row}");
    }
    assert!(!loaded.join("items.jsonl").exists(), "streams not selected are not read");
    let state = meltano_run(&["state", "get", "dev:tap-demo-to-target-jsonl"], &[]);
    assert!(state.contains("\"account_items\"") && state.contains("\"cursor\""), "{state}");
    meltano_run(&["run", "tap-demo", "target-jsonl"], &[]);
    assert_eq!(rows().len(), 100, "nothing new on the second run");
    meltano_run(&["run", "tap-demo", "target-jsonl"], &[("TAP_DEMO_BASE_URL", grown.base_url())]);
    let ids: Vec<u64> = rows().iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 150);
    assert_eq!(sorted(ids[100..].to_vec()), (101..=150).collect::<Vec<_>>(), "exactly the new rows");
}

/// `host package --oci` writes an OCI image podman loads (entrypoint, `AIRBYTE_ENTRYPOINT`, the
/// `io.airbyte.*` labels); its filesystem, exported by podman, runs `spec` and `read` through the
/// entrypoint under chroot (containers cannot be started on these machines).
#[test]
fn the_oci_image_loads_and_its_entrypoint_reads() {
    let api = demo_api(DemoApiConfig { records: 30, accounts: 2, ..Default::default() });
    // podman names an image it loads from a folder after the folder's path: lower case only.
    let scratch = tempfile::Builder::new()
        .prefix("oci")
        .rand_bytes(0)
        .suffix(&std::process::id().to_string())
        .tempdir_in(workspace_root().join("target"))
        .unwrap();
    let out = scratch.path().join("pkg");
    let made = host(&["package", "--name", "demo", "--oci", "--image-version", "1.2.3", "--allow-host", &grant(&api)])
        .arg("--out")
        .arg(&out)
        .arg(plugin("demo-source"))
        .run_raw();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let podman = |args: &[&std::ffi::OsStr]| {
        let output = std::process::Command::new("podman").args(args).output().expect("podman is installed (.ci/run)");
        assert!(output.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    let loaded = podman(&[&os("load"), &os("-i"), out.join("image").as_os_str()]);
    let image = loaded.lines().find_map(|l| l.strip_prefix("Loaded image: ")).unwrap().trim().to_string();
    let inspected: Value = serde_json::from_str(&podman(&[&os("image"), &os("inspect"), &os(&image)])).unwrap();
    let config = &inspected[0]["Config"];
    assert_eq!(config["Entrypoint"], json!(["/airbyte/source-demo"]), "{config}");
    assert!(config["Env"].as_array().unwrap().contains(&json!("AIRBYTE_ENTRYPOINT=/airbyte/source-demo")));
    assert_eq!(config["Labels"]["io.airbyte.name"], "airbyte/source-demo");
    assert_eq!(config["Labels"]["io.airbyte.version"], "1.2.3");
    // Its root filesystem, as podman exports it.
    let container = podman(&[&os("create"), &os(&image)]).trim().to_string();
    let rootfs = scratch.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    let tarball = scratch.path().join("rootfs.tar");
    podman(&[&os("export"), &os("-o"), tarball.as_os_str(), &os(&container)]);
    podman(&[&os("rm"), &os(&container)]);
    podman(&[&os("rmi"), &os(&image)]);
    let untar = std::process::Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&rootfs).status().unwrap();
    assert!(untar.success());
    std::fs::write(rootfs.join("tmp/config.json"), demo_config(&api, 10).to_string()).unwrap();
    std::fs::write(rootfs.join("tmp/catalog.json"), catalog(&[("items", "incremental")]).to_string()).unwrap();
    let entrypoint = |args: &[&str]| {
        let output = std::process::Command::new(which("chroot"))
            .arg(&rootfs)
            .arg("/airbyte/source-demo")
            .args(args)
            .env_clear()
            .env("SLUICE_CACHE_DIR", "/tmp/sluice")
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect::<Vec<Value>>()
    };
    assert!(entrypoint(&["spec"]).iter().any(|m| m["type"] == "SPEC"));
    let read = entrypoint(&["read", "--config", "/tmp/config.json", "--catalog", "/tmp/catalog.json"]);
    assert_eq!(read.iter().filter(|m| m["type"] == "RECORD").count(), 30);
}

/// A program's path on this machine's PATH (the entrypoint runs with an empty environment).
fn which(program: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// An empty state file is no state, with a warning naming it: never a silent full re-read.
#[test]
fn an_empty_state_file_is_warned_about() {
    let api = demo_api(DemoApiConfig { records: 20, accounts: 2, ..Default::default() });
    let files = Files::new();
    let empty = files.text("state.json", b"");
    let run = host(&["run", "--streams", "account_items", "--state"])
        .arg(&empty)
        .demo_source(&api, files.json("c.json", &demo_config(&api, 10)))
        .run();
    assert!(run.success(), "{}", run.explain());
    assert!(run.stderr().contains(&format!("state file {} is empty", empty.display())), "{}", run.stderr());
    assert_eq!(run.ids("account_items").len(), 20);
}

/// `run --test` (a Singer tap's `--test`) is the connector's check, its verdict in the exit code.
#[test]
fn the_connection_test_exits_with_the_checks_verdict() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let good = host(&["run", "--test"]).demo_source(&api, files.json("c.json", &demo_config(&api, 10))).run_raw();
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));
    assert!(String::from_utf8_lossy(&good.stderr).contains("connection test passed"));
    let bad = files.json("bad.json", &json!({"base_url": api.base_url(), "page_size": 0}));
    let failed = host(&["run", "--test"]).demo_source(&api, &bad).run_raw();
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("connection test failed: the config does not match"));
}
