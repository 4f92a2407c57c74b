//! The operator's side of the sandbox: `host inspect`, policy files, and HTTP caps.

use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[test]
fn inspect_shows_identity_needs_and_the_effective_grant() {
    let api = demo_api(DemoApiConfig::default());
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 10));
    let run = host(&["inspect", "--json", "--config"]).arg(&config).arg(plugin("demo-source")).run_raw();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_slice(&run.stdout).unwrap();
    let wasm = std::fs::read(plugin("demo-source")).unwrap();
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&wasm))
    };
    assert_eq!(report["sha256"], json!(sha));
    assert_eq!(report["wit"], "sluice:connector@0.1.7");
    assert_eq!(report["declared_hosts"], json!([grant(&api)]));
    assert_eq!(report["missing_grants"], json!([grant(&api)]), "nothing granted yet");

    let granted = host(&["inspect", "--json", "--config"])
        .arg(&config)
        .arg("--allow-host")
        .arg(grant(&api))
        .arg(plugin("demo-source"))
        .run_raw();
    let report: Value = serde_json::from_slice(&granted.stdout).unwrap();
    assert_eq!(report["missing_grants"], json!([]));

    // The text form names the gap too; and a run's first LOG line carries the same identity.
    let text = host(&["inspect", "--config"]).arg(&config).arg(plugin("demo-source")).run_raw();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains(&format!("NOT granted: {}", grant(&api))), "{text}");
    let run = host(&["spec"]).arg(plugin("demo-source")).run();
    assert!(run.logs()[0].contains(&sha) && run.logs()[0].contains("sluice:connector@0.1.7"), "{:?}", run.logs());
}

#[test]
fn a_policy_file_sets_grants_and_limits() {
    let api = demo_api(DemoApiConfig { records: 30, ..Default::default() });
    let files = Files::new();
    let policy =
        files.json("policy.json", &json!({"allow_hosts": [grant(&api)], "limits": {"memory_bytes": 32 << 20}}));
    let run = host(&["run", "--streams", "items", "--policy"])
        .arg(&policy)
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(files.json("config.json", &demo_config(&api, 10)))
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("items").len(), 30, "the policy file granted the API");
    let bomb = host(&["run", "--policy"])
        .arg(&policy)
        .arg(plugin("hostile"))
        .arg("--config")
        .arg(files.json("bomb.json", &json!({"mode": "memory"})))
        .run();
    let message = bomb.errors()[0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("the limit is 32 MiB"), "{message}");
    // Flags win over the file.
    let flagged = host(&["run", "--memory-mb", "48", "--policy"])
        .arg(&policy)
        .arg(plugin("hostile"))
        .arg("--config")
        .arg(files.json("bomb.json", &json!({"mode": "memory"})))
        .run();
    assert!(flagged.errors()[0]["message"].as_str().unwrap().contains("the limit is 48 MiB"));
    // A misspelt key is an error that names it, not a silent default.
    let typo = host(&["run", "--policy"])
        .arg(files.json("typo.json", &json!({"limits": {"memory_mega": 1}})))
        .arg(plugin("hostile"))
        .arg("--config")
        .arg(files.json("bomb.json", &json!({"mode": "memory"})))
        .run();
    assert!(!typo.success());
    assert!(typo.stderr().contains("memory_mega"), "{}", typo.stderr());
}

#[test]
fn requests_in_flight_and_per_host_rate_are_capped() {
    let api = demo_api(DemoApiConfig { records: 400, latency_ms: 20, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 20, "window_minutes": 30}));
    let run = host(&["run", "--streams", "windowed_items", "--concurrency", "8", "--http-max-in-flight", "2"])
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("windowed_items").len(), 400);
    assert_eq!(api.stats().max_in_flight, 2, "8 partitions, but at most 2 requests at once");

    let paced = demo_api(DemoApiConfig { records: 100, ..Default::default() });
    let started = Instant::now();
    let run = host(&["run", "--streams", "items", "--http-max-rate", "20"])
        .demo_source(&paced, files.json("paced.json", &demo_config(&paced, 10)))
        .run();
    assert!(run.success(), "{}", run.explain());
    // 10 requests at 20 per second: the last starts no sooner than 450 ms after the first.
    assert_eq!(paced.stats().requests, 10);
    assert!(started.elapsed() >= Duration::from_millis(450), "{:?}", started.elapsed());
}
