//! Real certified connectors with custom components, read by Sluice and by the Airbyte CDK with
//! unsafe code enabled against a mock API the test starts: the same records and the same final
//! states. Each case is a folder of `tests/fixtures/certified/` whose `case.json` pins the
//! connector's package on PyPI (fetched by `just setup-certified` into
//! `target/tools/certified/NAME/`: its manifest and components.py, nothing of them committed),
//! says which URLs of the manifest go to the mock (`replace`, `{MOCK}` its address), the config,
//! the streams and their sync modes, and the mock's answers (`routes`, see
//! `sluice_tests::fixture_api`).

use crate::cdk::Sync;
use crate::support::*;
use serde_json::Value;
use sluice_tests::fixture_api::{FixtureApi, Route};
use std::path::PathBuf;

/// The cases, or only those `SLUICE_CERTIFIED` names (comma-separated), to try one while writing it.
fn cases() -> Vec<PathBuf> {
    let dir = workspace_root().join("tests/fixtures/certified");
    let only = std::env::var("SLUICE_CERTIFIED").ok();
    let only: Option<Vec<&str>> = only.as_deref().map(|names| names.split(',').collect());
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|case| only.as_ref().is_none_or(|names| names.iter().any(|n| case.ends_with(n))))
        .collect();
    cases.sort();
    cases
}

/// One certified connector: the mock's answers, the manifest pointed at it, both engines' reads.
fn read_case(dir: &std::path::Path) {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let case: Value = serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let fetched = workspace_root().join("target/tools/certified").join(&name);
    assert!(fetched.join("manifest.yaml").is_file(), "{name}: run `just setup-certified` first (`just test` does)");
    let routes: Vec<Route> = serde_json::from_value(case["routes"].clone()).expect("routes");
    let mock = FixtureApi::start(routes).unwrap();
    let files = Files::new();
    // The connector as fetched, its API's URLs pointed at the mock, with its components.py.
    let folder = files.path().join(&name);
    std::fs::create_dir(&folder).unwrap();
    let mut manifest = std::fs::read_to_string(fetched.join("manifest.yaml")).unwrap();
    for (from, to) in case["replace"].as_object().unwrap() {
        assert!(manifest.contains(from.as_str()), "{name}: the manifest has no {from}");
        manifest = manifest.replace(from.as_str(), &to.as_str().unwrap().replace("{MOCK}", &mock.url()));
    }
    std::fs::write(folder.join("manifest.yaml"), manifest).unwrap();
    std::fs::copy(fetched.join("components.py"), folder.join("components.py")).unwrap();
    let streams: Vec<(String, String)> = case["streams"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(stream, mode)| (stream.clone(), mode.as_str().unwrap().to_string()))
        .collect();
    let modes: Vec<(&str, &str)> = streams.iter().map(|(s, m)| (s.as_str(), m.as_str())).collect();
    let api = demo_api(DemoApiConfig::default());
    let manifest_path = folder.join("manifest.yaml").display().to_string();
    let sync = Sync {
        manifest: &manifest_path,
        api: &api,
        config: case["config"].clone(),
        catalog: catalog(&modes),
        files: &files,
    };
    let theirs = sync.cdk(None);
    let ours = sync.sluice_granting(None, &mock.url());
    for (stream, _) in &streams {
        let (a, b) = (ours.records(stream), theirs.records(stream));
        assert!(!b.is_empty(), "{name}: the CDK read nothing of {stream}: {}\n{:?}", theirs.explain(), mock.log());
        assert_eq!(a, b, "{name}: {stream}: Sluice's records on the left, the CDK's on the right\n{}", ours.explain());
        // As the CDK and Sluice must agree on it (a per-partition state's `lookback_window` is how
        // long the CDK's sync took).
        let (a, b) = (crate::cdk::comparable(ours.state_of(stream)), crate::cdk::comparable(theirs.state_of(stream)));
        assert_eq!(a, b, "{name}: the final state of {stream}");
    }
}

/// Every case of `tests/fixtures/certified/`.
#[test]
fn certified_connectors_read_what_the_cdk_reads() {
    let cases = cases();
    assert!(!cases.is_empty());
    for case in cases {
        read_case(&case);
    }
}
