//! `host init`: for each language, the project it writes builds with the command its README
//! gives and passes `host test` against the demo API.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first command of the README's Build section that starts with `tool`.
fn documented(readme: &str, tool: &str) -> Vec<String> {
    let build = readme.split("## Build").nth(1).expect("a Build section");
    let line = build
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(tool))
        .unwrap_or_else(|| panic!("no `{tool}` command in the README's Build section:\n{build}"));
    line.split_whitespace().map(str::to_string).collect()
}

fn run(mut command: Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Writes the project, builds it as documented (the language's tool from this repository) and
/// returns its component.
fn init_and_build(lang: &str, dir: &Path) -> PathBuf {
    let name = format!("my-{lang}-source");
    let init = host(&["init", &name, "--lang", lang, "--dir"]).arg(dir).run_raw();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let root = workspace_root();
    match lang {
        "rust" => {
            let argv = documented(&readme, "cargo build");
            let mut cargo = Command::new("cargo");
            // One target dir for every run of this test, so its dependencies build once.
            cargo.args(&argv[1..]).current_dir(dir).env("CARGO_TARGET_DIR", root.join("target/init-projects"));
            run(cargo, "cargo build");
            let wasm = root
                .join("target/init-projects/wasm32-wasip2/release")
                .join(format!("{}.wasm", name.replace('-', "_")));
            assert!(
                readme.contains(&format!("target/wasm32-wasip2/release/{}.wasm", name.replace('-', "_"))),
                "{readme}"
            );
            wasm
        }
        "python" => {
            let argv = documented(&readme, "componentize-py");
            let mut tool = Command::new(root.join("target/tools/componentize-py/bin/componentize-py"));
            tool.args(&argv[1..]).current_dir(dir);
            run(tool, "componentize-py");
            dir.join(format!("{name}.wasm"))
        }
        _ => {
            // `npm run build`: the package's build script, with this repository's componentize-js.
            let package: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
            let script = package["scripts"]["build"].as_str().expect("a build script");
            assert!(readme.contains("npm run build"), "{readme}");
            let argv: Vec<&str> = script.split_whitespace().collect();
            assert_eq!(argv[0], "componentize-js", "{script}");
            let mut tool = Command::new(root.join("guest-sdk/js/node_modules/.bin/componentize-js"));
            tool.args(&argv[1..]).current_dir(dir);
            run(tool, "componentize-js");
            dir.join(format!("{name}.wasm"))
        }
    }
}

fn a_new_project_builds_and_conforms(lang: &str) {
    let files = Files::new();
    let dir = files.path().join("project");
    let wasm = init_and_build(lang, &dir);
    assert!(wasm.exists(), "{} was not built", wasm.display());
    // The project's config, pointed at this test's demo API.
    let api = demo_api(DemoApiConfig { records: 250, accounts: 2, ..Default::default() });
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["base_url"], "http://127.0.0.1:8080", "the README's demo API address");
    config["base_url"] = api.base_url().into();
    config["page_size"] = 100.into();
    let config = files.json("config.json", &config);
    let test = host(&["test"]).arg(&wasm).arg("--config").arg(&config).arg("--allow-host").arg(grant(&api)).run_raw();
    let report = String::from_utf8_lossy(&test.stdout);
    assert!(test.status.success(), "{report}\n{}", String::from_utf8_lossy(&test.stderr));
    assert!(report.contains("0 failed, 0 skipped: the connector conforms"), "{report}");
    // Its records, read for real: every item, over three pages.
    let read = host(&["run"]).arg(&wasm).arg("--config").arg(&config).arg("--allow-host").arg(grant(&api)).run();
    assert!(read.success(), "{}", read.explain());
    assert_eq!(read.ids("items"), (1..=250).collect::<Vec<u64>>());
}

#[test]
fn a_new_rust_project_builds_and_conforms() {
    a_new_project_builds_and_conforms("rust");
}

#[test]
fn a_new_python_project_builds_and_conforms() {
    a_new_project_builds_and_conforms("python");
}

#[test]
fn a_new_javascript_project_builds_and_conforms() {
    a_new_project_builds_and_conforms("js");
}

#[test]
fn init_refuses_a_directory_with_files_and_a_bad_name() {
    let files = Files::new();
    let kept = files.text("keep.txt", b"mine");
    let stderr = |run: std::process::Output| {
        assert!(!run.status.success());
        String::from_utf8_lossy(&run.stderr).to_string()
    };
    let error = stderr(host(&["init", "x", "--lang", "rust", "--dir"]).arg(files.path()).run_raw());
    assert!(error.contains("exists and is not empty: nothing was written"), "{error}");
    assert_eq!(std::fs::read(&kept).unwrap(), b"mine");
    let error = stderr(host(&["init", "My Source", "--lang", "js", "--dir"]).arg(files.path().join("new")).run_raw());
    assert!(error.contains("cannot name a connector"), "{error}");
    assert!(!files.path().join("new").exists());
}
