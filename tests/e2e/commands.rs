//! spec, check, discover, and loading plugins (the compiled-component cache, bad files).

use crate::support::*;
use serde_json::json;

#[test]
fn spec_describes_the_config() {
    let run = host(&["spec"]).arg(plugin("demo-source")).run();
    assert!(run.success(), "{}", run.explain());
    let specs = run.of_type("SPEC");
    assert_eq!(specs.len(), 1);
    let schema = &specs[0]["spec"]["connectionSpecification"];
    assert_eq!(schema["required"], json!(["base_url"]));
    assert_eq!(schema["properties"]["page_size"]["type"], "integer");
    // What the Airbyte platform reads besides the schema; the connector's documentationUrl is
    // lifted out of its spec.
    let spec = &specs[0]["spec"];
    assert_eq!(spec["protocol_version"], "0.2.0");
    assert_eq!(spec["supportsIncremental"], true);
    assert_eq!(spec["documentationUrl"], "https://example.com/sluice/demo-source");
    assert!(schema.get("documentationUrl").is_none(), "{schema}");
}

#[test]
fn check_succeeds_against_the_api() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let run = host(&["check"]).demo_source(&api, files.json("config.json", &demo_config(&api, 10))).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.of_type("CONNECTION_STATUS")[0]["connectionStatus"], json!({"status": "SUCCEEDED"}));
    assert!(api.stats().requests >= 1, "check must reach the API");
}

#[test]
fn bad_config_fails_the_check_with_a_message() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let check = |config: &std::path::Path| {
        let run = host(&["check"]).demo_source(&api, config).run();
        let statuses = run.of_type("CONNECTION_STATUS");
        assert_eq!(statuses.len(), 1, "{}", run.stdout());
        assert_eq!(statuses[0]["connectionStatus"]["status"], "FAILED");
        statuses[0]["connectionStatus"]["message"].as_str().unwrap().to_string()
    };
    let missing = check(&files.json("missing.json", &json!({"page_size": 5})));
    assert!(missing.contains("base_url"), "{missing}");
    let zero = check(&files.json("zero.json", &json!({"base_url": api.base_url(), "page_size": 0})));
    assert!(zero.contains("page_size"), "{zero}");
    let not_json = check(&files.text("broken.json", b"{\"base_url\": "));
    assert!(not_json.contains("not valid JSON"), "{not_json}");
    let wrong_type = check(&files.json("array.json", &json!([1])));
    assert!(wrong_type.contains("JSON object"), "{wrong_type}");
    // A host nobody granted: the check fails, naming the grant that is missing.
    let ungranted = host(&["check"])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(files.json("c.json", &demo_config(&api, 5)))
        .run();
    let status = &ungranted.of_type("CONNECTION_STATUS")[0]["connectionStatus"];
    assert_eq!(status["status"], "FAILED");
    assert!(status["message"].as_str().unwrap().contains("--allow-host"), "{status}");
}

#[test]
fn discover_lists_streams_with_keys_and_cursors() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let run = host(&["discover"])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(files.json("config.json", &demo_config(&api, 10)))
        .run();
    assert!(run.success(), "{}", run.explain());
    let streams = run.of_type("CATALOG")[0]["catalog"]["streams"].as_array().unwrap().clone();
    let names: Vec<&str> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["items", "accounts", "account_items", "windowed_items"]);
    for s in &streams {
        assert_eq!(s["source_defined_primary_key"], json!([["id"]]));
        assert_eq!(s["json_schema"]["type"], "object");
    }
    assert_eq!(streams[2]["supported_sync_modes"], json!(["full_refresh", "incremental"]));
    assert_eq!(streams[2]["default_cursor_field"], json!(["updated_at"]));
    assert_eq!(streams[3]["default_cursor_field"], json!(["updated_at"]));
    assert_eq!(streams[0]["supported_sync_modes"], json!(["full_refresh"]));
}

/// The compiled components in a cache directory (besides them it holds the cache's key).
fn cache_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let all = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
    all.filter(|p| p.extension().is_some_and(|e| e == "cwasm")).collect()
}

#[test]
fn second_load_uses_the_compiled_cache() {
    let cache = tempfile::tempdir().unwrap();
    let first = host(&["spec"]).arg(plugin("demo-source")).cache_dir(cache.path()).run();
    assert!(first.success(), "{}", first.stderr());
    assert!(first.logs()[0].contains("compiled in"), "{:?}", first.logs());
    let cached = cache_entries(cache.path());
    assert_eq!(cached.len(), 1, "one compiled component: {cached:?}");
    assert!(cached[0].extension().is_some_and(|e| e == "cwasm"));
    let modified = std::fs::metadata(&cached[0]).unwrap().modified().unwrap();

    let second = host(&["spec"]).arg(plugin("demo-source")).cache_dir(cache.path()).run();
    assert!(second.success());
    assert!(second.logs()[0].contains("loaded compiled code from cache"), "{:?}", second.logs());
    assert_eq!(std::fs::metadata(&cached[0]).unwrap().modified().unwrap(), modified, "not rewritten");
    assert_eq!(second.of_type("SPEC"), first.of_type("SPEC"));
}

/// The cache remembers a plugin file's sha256 by what `stat` says of it, and then does not
/// even read a file whose compiled code it holds: a file written over in place (same path, same
/// size is not needed) is another plugin, read, hashed and run as itself.
#[test]
fn a_plugin_written_over_in_place_is_run_as_itself() {
    let cache = tempfile::tempdir().unwrap();
    let file = cache.path().join("connector.wasm");
    let spec = || host(&["spec"]).arg(&file).cache_dir(cache.path()).run();
    std::fs::copy(plugin("demo-source"), &file).unwrap();
    let demo = spec();
    assert!(demo.success(), "{}", demo.explain());
    let again = spec();
    assert!(again.logs()[0].contains("loaded compiled code from cache"), "{:?}", again.logs());
    assert_eq!(again.of_type("SPEC"), demo.of_type("SPEC"));
    std::fs::write(&file, std::fs::read(plugin("test-connector")).unwrap()).unwrap();
    let other = spec();
    assert!(other.success(), "{}", other.explain());
    assert!(other.logs()[0].contains("compiled in"), "read and compiled as a new plugin: {:?}", other.logs());
    assert_ne!(other.of_type("SPEC"), demo.of_type("SPEC"), "the new file's spec, not the old one's");
}

#[test]
fn a_damaged_cache_entry_is_rebuilt() {
    let cache = tempfile::tempdir().unwrap();
    assert!(host(&["spec"]).arg(plugin("demo-source")).cache_dir(cache.path()).run().success());
    let entry = cache_entries(cache.path()).remove(0);
    std::fs::write(&entry, b"garbage").unwrap();
    let run = host(&["spec"]).arg(plugin("demo-source")).cache_dir(cache.path()).run();
    assert!(run.success(), "{}", run.explain());
    assert!(run.logs()[0].contains("compiled in"), "{:?}", run.logs());
    assert_eq!(run.of_type("SPEC").len(), 1);
}

/// An entry is run only with its MAC beside it: without one, or with another entry's, it is
/// compiled again (and the MAC is what changed hands, not the code).
#[test]
fn a_cache_entry_without_its_own_mac_is_rebuilt() {
    let cache = tempfile::tempdir().unwrap();
    let spec = |name: &str| host(&["spec"]).arg(plugin(name)).cache_dir(cache.path()).run();
    let demo = spec("demo-source").of_type("SPEC")[0].clone();
    let entry = cache_entries(cache.path()).remove(0);
    let mac = entry.with_extension("mac");
    assert_eq!(std::fs::read(&mac).unwrap().len(), 32, "a MAC beside the entry");
    std::fs::remove_file(&mac).unwrap();
    let run = spec("demo-source");
    assert!(run.success(), "{}", run.explain());
    assert!(run.logs()[0].contains("compiled in"), "{:?}", run.logs());
    assert_eq!(run.of_type("SPEC")[0], &demo);
    // Another plugin's MAC beside this entry does not verify either.
    assert!(spec("test-connector").success());
    let other = cache_entries(cache.path()).into_iter().find(|e| e != &entry).expect("a second entry");
    std::fs::copy(other.with_extension("mac"), &mac).unwrap();
    let run = spec("demo-source");
    assert!(run.logs()[0].contains("compiled in"), "{:?}", run.logs());
    assert_eq!(run.of_type("SPEC")[0], &demo);
    let run = spec("demo-source");
    assert!(run.logs()[0].contains("loaded compiled code from cache"), "{:?}", run.logs());
}

/// Runs `spec` on a bad file and returns stderr, checking it is one line and the exit fails.
fn refused(file: &std::path::Path) -> String {
    let run = host(&["spec"]).arg(file).run();
    assert!(!run.success());
    let stderr = run.stderr();
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "a TRACE error too: {}", run.stdout());
    stderr
}

#[test]
fn files_that_are_not_components_are_refused() {
    let files = Files::new();
    let text = refused(&files.text("notes.wasm", b"just some text"));
    assert!(text.contains("not a WebAssembly file"), "{text}");
    let core = refused(&files.text("core.wasm", b"\0asm\x01\0\0\0"));
    assert!(core.contains("core WebAssembly module, not a component"), "{core}");
    let corrupt = refused(&files.text("corrupt.wasm", b"\0asm\x0d\0\x01\0\xff\xff\xff\xff"));
    assert!(corrupt.contains("not a valid WebAssembly component"), "{corrupt}");
    let missing = refused(&files.path().join("nowhere.wasm"));
    assert!(missing.contains("cannot read plugin"), "{missing}");
}

#[test]
fn a_plugin_for_another_wit_version_is_refused() {
    let stderr = refused(&plugin("wrong-version"));
    assert!(stderr.contains("sluice:connector@9.0.0"), "{stderr}");
    assert!(stderr.contains("this host supports sluice:connector@0.1.0 to 0.1.7"), "{stderr}");
    assert!(stderr.contains("a contract this host does not serve"), "{stderr}");
}

/// The exports' types are checked once, when the plugin is loaded (not in every instance): a
/// function of another type than the contract's is refused there, naming it.
#[test]
fn a_plugin_whose_export_has_another_type_is_refused_when_loaded() {
    let stderr = refused(&plugin("wrong-types"));
    assert!(stderr.contains("does not export the connector interface this host expects"), "{stderr}");
    assert!(stderr.contains("type-checking export func `capabilities`"), "{stderr}");
}

#[test]
fn help_lists_the_commands() {
    let run = host(&["--help"]).run_raw();
    let help = String::from_utf8_lossy(&run.stdout).into_owned();
    for command in ["spec", "check", "discover", "read", "run"] {
        assert!(help.contains(command), "{help}");
    }
}

/// The long options in `text`: `--name` words, without a value after `=`.
fn long_options(text: &str) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let name: String = text[at + 2..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        let before = text[..at].chars().next_back();
        if !name.is_empty() && before.is_none_or(|c| c.is_whitespace() || "[(|".contains(c)) {
            found.insert(format!("--{name}"));
        }
    }
    found
}

/// The options a `--help` text lists: each option line's long name (not its aliases, nor the
/// options its description mentions).
fn help_options(help: &str) -> std::collections::BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .filter_map(|line| line.split([' ', ',', '=']).find(|word| word.starts_with("--")))
        .map(|word| word.trim_end_matches(['[', '<']).to_string())
        .collect()
}

/// The README's command synopsis names every command and every long option `host --help` and
/// each command's `--help` print, and nothing they do not.
#[test]
fn the_readme_synopsis_matches_help() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let section = readme.split("## Commands").nth(1).expect("a Commands section").split("\n## ").next().unwrap();
    let synopsis: String = section.split("```text").skip(1).map(|block| block.split("```").next().unwrap()).collect();
    let help = |args: &[&str]| {
        let out = host(args).run_raw();
        assert!(out.status.success(), "host {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&["--help"]);
    // Commands as clap lists them: two spaces, a name, spaces, its summary.
    let commands: Vec<String> = top
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 10, "{top}");
    let mut options = std::collections::BTreeSet::new();
    for command in &commands {
        assert!(synopsis.contains(&format!("host {command}")), "the README's synopsis has no `host {command}`");
        let text = help(&[command, "--help"]);
        // A command with subcommands (recording, manifests, state): their options too.
        if let Some(list) = text.split("Commands:").nth(1) {
            for sub in list.split("\n\n").next().unwrap().lines() {
                if let Some(sub) =
                    sub.strip_prefix("  ").and_then(|s| s.split_whitespace().next()).filter(|s| *s != "help")
                {
                    options.extend(help_options(&help(&[command, sub, "--help"])));
                }
            }
        }
        options.extend(help_options(&text));
    }
    options.remove("--help");
    options.remove("--version");
    let documented = long_options(&synopsis);
    let missing: Vec<_> = options.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&options).collect();
    assert!(missing.is_empty(), "options `host --help` lists that the README's synopsis does not: {missing:?}");
    assert!(stale.is_empty(), "options in the README's synopsis that no command has: {stale:?}");
}

/// The host's allocator gives memory back at once and commits its arenas as used, set before
/// it starts (a constructor in main.rs); an operator's environment still overrides either.
#[test]
fn the_allocator_purges_at_once_unless_told_otherwise() {
    let options = |env: &[(String, String)]| {
        let mut vars = vec![("MIMALLOC_VERBOSE".to_string(), "1".to_string())];
        vars.extend(env.iter().cloned());
        let run = host(&["--help"]).envs(&vars).command().output().expect("run host");
        assert!(run.status.success());
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        let option = |name: &str| {
            let line = stderr.lines().find(|l| l.contains(&format!("option '{name}'")));
            line.unwrap_or_else(|| panic!("mimalloc printed no {name}: {stderr}")).trim().to_string()
        };
        (option("purge_delay"), option("arena_eager_commit"))
    };
    let (purge, commit) = options(&[]);
    assert!(purge.ends_with(": 0"), "{purge}");
    assert!(commit.ends_with(": 0"), "{commit}");
    let (purge, _) = options(&[("MIMALLOC_PURGE_DELAY".to_string(), "25".to_string())]);
    assert!(purge.ends_with(": 25"), "{purge}");
}
