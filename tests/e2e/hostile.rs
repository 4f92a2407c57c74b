//! The hostile suite: each misbehaviour of the `hostile` plugin, paired with a test that it is
//! contained with a clear error naming the cause, that the host stays alive and reports, and
//! that the run's other partitions complete.

use crate::support::*;
use serde_json::{Value, json};

/// Tight limits keep the suite quick: 64 MiB of memory, 300 ms of CPU per call, unless a test
/// sets its own.
const LIMITS: [(&str, &str); 2] = [("--memory-mb", "64"), ("--cpu-ms-per-call", "300")];

fn hostile(mode: &str, extra: Value, args: &[&str]) -> HostRun {
    let files = Files::new();
    let mut config = json!({"mode": mode});
    config.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    let defaults = LIMITS.iter().filter(|(flag, _)| !args.contains(flag)).flat_map(|(f, v)| [*f, *v]);
    host(&["run"])
        .args(defaults.chain(args.iter().copied()).map(|s| s.to_string()))
        .arg(plugin("hostile"))
        .arg("--config")
        .arg(files.json("config.json", &config))
        .run()
}

/// The well-behaved partitions 0 and 2 completed; partition 1 failed with one error, returned.
fn contained(run: &HostRun) -> String {
    assert!(!run.success(), "the hostile partition must fail the run");
    assert_eq!(sorted(run.ids("numbers")), [0, 2], "the other partitions complete: {}", run.explain());
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{}", run.explain());
    assert!(errors[0]["message"].as_str().unwrap().contains("partition {\"p\":1}"), "{}", errors[0]);
    assert_eq!(run.statuses("numbers").last().unwrap(), "INCOMPLETE");
    assert!(run.logs().last().unwrap().starts_with("read 2 records"), "the host reports to the end: {:?}", run.logs());
    errors[0]["message"].as_str().unwrap().to_string()
}

/// The hostile partition's one record, for modes that report what the sandbox let them do.
fn attempt(run: &HostRun) -> Value {
    assert!(run.success(), "{}", run.explain());
    run.records("numbers").into_iter().find(|r| r.get("attempt").is_some() || r.get("vars").is_some()).unwrap().clone()
}

#[test]
fn an_endless_loop_is_stopped_by_the_cpu_budget() {
    let message = contained(&hostile("loop", json!({}), &[]));
    assert!(message.contains("CPU budget of 300 ms"), "{message}");
}

#[test]
fn a_memory_bomb_is_stopped_by_the_memory_limit() {
    let message = contained(&hostile("memory", json!({}), &[]));
    assert!(message.contains("exceeded its memory limit") && message.contains("64 MiB"), "{message}");
}

#[test]
fn deep_recursion_overflows_the_stack_cleanly() {
    let message = contained(&hostile("recursion", json!({}), &[]));
    assert!(message.contains("overflowed its stack"), "{message}");
}

#[test]
fn the_stack_size_is_the_operators() {
    // 3000 frames fit the default 512 KiB stack, not a 16 KiB one.
    let fits = hostile("recursion-depth", json!({"depth": 3000}), &[]);
    assert!(fits.success(), "{}", fits.explain());
    let message = contained(&hostile("recursion-depth", json!({"depth": 3000}), &["--wasm-stack-kib", "16"]));
    assert!(message.contains("overflowed its stack"), "{message}");
}

#[test]
fn files_are_not_there() {
    for mode in ["read-file", "list-root"] {
        let record = attempt(&hostile(mode, json!({}), &[]));
        assert_eq!(record["ok"], false, "{mode}: {record}");
    }
}

#[test]
fn the_environment_is_empty() {
    let record = attempt(&hostile("env", json!({}), &[]));
    assert_eq!(record["vars"], 0);
    assert_eq!(record["home"], Value::Null);
}

#[test]
fn sockets_cannot_be_opened() {
    let api = demo_api(DemoApiConfig::default());
    let record = attempt(&hostile("socket", json!({"target": host_port(&api)}), &[]));
    assert_eq!(record["ok"], false, "{record}");
    assert_eq!(api.stats().requests, 0, "nothing reached the API");
}

fn request(target: String, declare: Vec<String>, grants: &[String]) -> (HostRun, String) {
    let mut args: Vec<&str> = vec!["--deny-ungranted"];
    for g in grants {
        args.extend(["--allow-host", g.as_str()]);
    }
    let run = hostile("request", json!({"target": target, "declare": declare}), &args);
    let message = contained(&run);
    (run, message)
}

#[test]
fn a_host_that_is_not_granted_is_denied() {
    let api = demo_api(DemoApiConfig::default());
    // Declared by the plugin, not granted by the operator.
    let (run, message) = request(format!("{}/items", api.base_url()), vec![grant(&api)], &[]);
    assert!(message.contains("denied") && message.contains("not granted"), "{message}");
    assert!(run.logs().iter().any(|l| l.starts_with("request denied")));
    assert_eq!(api.stats().requests, 0);
    // Granted by the operator, not declared by the plugin.
    let (_, message) = request(format!("{}/items", api.base_url()), vec![], &[grant(&api)]);
    assert!(message.contains("not among the hosts the plugin declared"), "{message}");
    assert_eq!(api.stats().requests, 0);
}

#[test]
fn a_redirect_to_a_host_that_is_not_granted_is_denied() {
    let api = demo_api(DemoApiConfig::default());
    let elsewhere = demo_api(DemoApiConfig::default());
    let target = format!("{}/redirect?to={}/items", api.base_url(), elsewhere.base_url());
    // Both declared; only the first granted.
    let (run, message) = request(target, vec![grant(&api), grant(&elsewhere)], &[grant(&api)]);
    assert!(message.contains(&format!("the redirect to {}/items is denied", elsewhere.base_url())), "{message}");
    assert!(run.logs().last().unwrap().contains("1 denied"), "counted: {:?}", run.logs().last());
    assert_eq!(api.stats().requests, 1, "the redirecting request was sent");
    assert_eq!(elsewhere.stats().requests, 0, "the redirect was not followed");
}

#[test]
fn internal_addresses_need_an_address_grant() {
    let api = demo_api(DemoApiConfig::default());
    // The metadata address, declared but not granted: denied with no network I/O.
    let (_, message) =
        request("http://169.254.169.254/latest/meta-data/".into(), vec!["http://169.254.169.254".into()], &[]);
    assert!(message.contains("169.254.169.254:80 is not granted"), "{message}");
    // A name that resolves to loopback, even when the name is granted: refused.
    let by_name = format!("http://localhost:{}", api.addr().port());
    let (_, message) = request(format!("{by_name}/items"), vec![by_name.clone()], &[by_name]);
    assert!(message.contains("resolves to the internal address"), "{message}");
    assert_eq!(api.stats().requests, 0);
    // Granted by address: allowed.
    let run = hostile(
        "request",
        json!({"target": format!("{}/items", api.base_url()), "declare": [grant(&api)]}),
        &["--allow-host", &grant(&api)],
    );
    assert!(run.success(), "{}", run.explain());
    assert_eq!(api.stats().requests, 1);
}

#[test]
fn a_100_mb_record_is_refused() {
    let run = hostile("big-record", json!({}), &["--memory-mb", "512"]);
    let message = contained(&run);
    assert!(message.contains("exceeds the limit of 16777216 bytes"), "{message}");
}

#[test]
fn invalid_utf8_is_refused() {
    let message = contained(&hostile("invalid-utf8", json!({}), &[]));
    assert!(message.contains("crashed") && message.to_lowercase().contains("utf-8"), "{message}");
}

#[test]
fn a_log_flood_is_capped() {
    let run = hostile("log-flood", json!({}), &["--max-logs-per-call", "100", "--cpu-ms-per-call", "20000"]);
    assert!(run.success(), "{}", run.explain());
    let floods = run.logs().iter().filter(|l| l.starts_with("flood ")).count();
    assert_eq!(floods, 100);
    assert!(run.logs().iter().any(|l| l.contains("199900 more log messages from the connector were dropped")));
}

#[test]
fn a_panic_in_any_export_is_contained() {
    let files = Files::new();
    for export in ["capabilities", "check", "discover", "partitions", "read"] {
        let config = files.json(&format!("{export}.json"), &json!({"mode": format!("panic-{export}")}));
        let command = if export == "check" { "check" } else { "run" };
        let run = host(&[command]).arg(plugin("hostile")).arg("--config").arg(&config).run();
        let said = format!("{}{}", run.stderr(), run.stdout());
        assert!(
            said.contains(&format!("{export} panicked on purpose")) || said.contains("crashed"),
            "{export}: {said}"
        );
        if command == "run" {
            assert!(!run.success(), "{export}");
        } else {
            assert_eq!(run.of_type("CONNECTION_STATUS")[0]["connectionStatus"]["status"], "FAILED");
        }
    }
    let spec = host(&["spec"]).arg(plugin("hostile-panic-spec")).run();
    assert!(!spec.success());
    assert!(spec.stderr().contains("spec failed: the connector crashed"), "{}", spec.stderr());
}

/// `check` on a connector whose `spec` traps answers a FAILED status naming the crash (exit 0,
/// as every failed check), not a TRACE and exit 1.
#[test]
fn check_reports_a_crash_in_spec_as_a_failed_check() {
    let files = Files::new();
    let config = files.json("config.json", &json!({"mode": "request"}));
    let check = host(&["check"]).arg(plugin("hostile-panic-spec")).arg("--config").arg(&config).run();
    assert!(check.success(), "{}", check.explain());
    let status = &check.of_type("CONNECTION_STATUS")[0]["connectionStatus"];
    assert_eq!(status["status"], "FAILED", "{}", check.explain());
    assert!(status["message"].as_str().unwrap().contains("spec failed: the connector crashed"), "{status}");
    assert!(check.errors().is_empty(), "{}", check.explain());
}

#[test]
fn secrets_are_masked_in_logs_and_errors() {
    let files = Files::new();
    let api = demo_api(DemoApiConfig::default());
    let secret = "s3cr3t-t0ken-value";
    // The secret rides in the target URL, so it appears in the denial the guest reports.
    let config = json!({"mode": "request", "token": secret, "target": format!("{}/items?key={secret}", api.base_url()), "declare": [grant(&api)]});
    let run = host(&["run", "--deny-ungranted"])
        .arg(plugin("hostile"))
        .arg("--config")
        .arg(files.json("c.json", &config))
        .run();
    assert!(!run.success());
    let everything = format!("{}{}", run.stdout(), run.stderr());
    assert!(!everything.contains(secret), "the secret leaked: {everything}");
    assert!(everything.contains("key=**********"), "{everything}");
}

/// A declared host whose name is not ASCII (an honest connector with an internationalised base
/// URL, or a hostile one) is parsed the way request URLs are, in its punycode form; it used to
/// panic the host, which died with no TRACE and no summary.
#[test]
fn an_internationalised_declared_host_is_parsed_not_a_panic() {
    let files = Files::new();
    let config = files.json(
        "config.json",
        &json!({"mode": "request", "declare": ["bücher.example"], "target": "https://bücher.example/x"}),
    );
    let inspect = host(&["inspect", "--json", "--allow-host", "BÜCHER.example"])
        .arg(plugin("hostile"))
        .arg("--config")
        .arg(&config)
        .run_raw();
    let stdout = String::from_utf8_lossy(&inspect.stdout);
    assert!(inspect.status.success(), "{stdout}{}", String::from_utf8_lossy(&inspect.stderr));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert!(report["declared_hosts"].as_array().unwrap().contains(&json!("xn--bcher-kva.example")), "{report}");
    assert!(report["missing_grants"].as_array().unwrap().is_empty(), "{report}");
    // Without a grant, the run refuses to start and names the host: a clean config error.
    let run = host(&["run"]).arg(plugin("hostile")).arg("--config").arg(&config).run();
    assert!(!run.success());
    assert!(!run.stderr().contains("panicked"), "{}", run.explain());
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{}", run.explain());
    assert!(errors[0]["message"].as_str().unwrap().contains("xn--bcher-kva.example"), "{}", errors[0]);
    assert_eq!(errors[0]["failure_type"], "config_error");
}
