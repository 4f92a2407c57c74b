//! The contract's versions (docs/contract.md): every released version is frozen under
//! `wit/since_vX.Y.Z/`, the current `wit/connector.wit` only adds to the versions of its track,
//! and a guest built for each released version (committed in `tests/fixtures/contract/`) runs.

use crate::support::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wit_parser::{Resolve, Type, TypeDefKind, WorldItem, WorldKey};

/// The released versions, each with the sha256 of its frozen text: a released contract never
/// changes (0.1.3 and 0.1.4 did, after their release, which is what this stops).
const RELEASED: [(&str, &str); 8] = [
    ("0.1.0", "9d9a2796101dd2a6d8e2049440251ed140c3398534dbbbf9cd53ae858a116ccf"),
    ("0.1.1", "97c6d1920cf8cc9f3c6b8387c61cacdd94bd857f55c5d81c1a753a915c898d4d"),
    ("0.1.2", "b530e069423dccaeea679b87247631ff52af672c8624f5bf3797b5624a877376"),
    ("0.1.3", "1ccceb5e7a3799ac778efecdc7715ac80735657bd1c8a9c99dcb96d31925d6d6"),
    ("0.1.4", "85dbecdace449424ec86d308babdea3452f5a5a495db8704ef80128951d7db46"),
    ("0.1.5", "c706f9b7a5d41a9dd9d0e45e1603ad2cbc3f7d3d7883d44c347f6567359287fc"),
    ("0.1.6", "96169ce4fd3ba734820deacd6871ea4f0d117fed66f26e7159aacd52bbd9f227"),
    ("0.1.7", "9352445ad143caf304840274e5171635336a1ca9a72556f718720a0e19066c57"),
];

fn wit_dir() -> PathBuf {
    workspace_root().join("wit")
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A contract's shape: every interface's functions and named types, and every world's imports
/// and exports, each rendered structurally (docs and spans left out).
#[derive(Debug, Default)]
struct Shape {
    version: String,
    /// "interface.function" or "interface.type" → its structure.
    items: BTreeMap<String, String>,
    /// world → (imports, exports), by interface name.
    worlds: BTreeMap<String, (Vec<String>, Vec<String>)>,
}

fn shape_of(dir: &Path) -> Shape {
    let mut resolve = Resolve::default();
    let (package, _) = resolve.push_dir(dir).unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
    let package = &resolve.packages[package];
    let mut shape =
        Shape { version: package.name.version.as_ref().expect("versioned").to_string(), ..Default::default() };
    for (name, id) in &package.interfaces {
        let interface = &resolve.interfaces[*id];
        for (function, f) in &interface.functions {
            let params: Vec<String> =
                f.params.iter().map(|p| format!("{}: {}", p.name, render(&resolve, &p.ty))).collect();
            let result = f.result.as_ref().map(|t| render(&resolve, t)).unwrap_or_default();
            shape.items.insert(format!("{name}.{function}"), format!("func({}) -> {result}", params.join(", ")));
        }
        for (ty, id) in &interface.types {
            shape.items.insert(format!("{name}.{ty}"), render(&resolve, &Type::Id(*id)));
        }
    }
    let key = |k: &WorldKey| match k {
        WorldKey::Name(n) => n.clone(),
        WorldKey::Interface(id) => resolve.interfaces[*id].name.clone().unwrap_or_default(),
    };
    for (name, id) in &package.worlds {
        let world = &resolve.worlds[*id];
        let names = |items: &wit_parser::IndexMap<WorldKey, WorldItem>| {
            let mut out: Vec<String> = items.keys().map(key).collect();
            out.sort();
            out
        };
        shape.worlds.insert(name.clone(), (names(&world.imports), names(&world.exports)));
    }
    shape
}

/// A type's structure, names of fields and cases included (they are the ABI's order and the
/// bindings' names); aliases are seen through.
fn render(resolve: &Resolve, ty: &Type) -> String {
    let Type::Id(id) = ty else { return format!("{ty:?}").to_lowercase() };
    let opt = |t: &Option<Type>| t.as_ref().map(|t| render(resolve, t)).unwrap_or_else(|| "_".into());
    match &resolve.types[*id].kind {
        TypeDefKind::Record(r) => {
            let fields: Vec<String> =
                r.fields.iter().map(|f| format!("{}: {}", f.name, render(resolve, &f.ty))).collect();
            format!("record {{{}}}", fields.join(", "))
        }
        TypeDefKind::Variant(v) => {
            let cases: Vec<String> = v.cases.iter().map(|c| format!("{}({})", c.name, opt(&c.ty))).collect();
            format!("variant {{{}}}", cases.join(", "))
        }
        TypeDefKind::Enum(e) => {
            format!("enum {{{}}}", e.cases.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "))
        }
        TypeDefKind::Flags(f) => {
            format!("flags {{{}}}", f.flags.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "))
        }
        TypeDefKind::Tuple(t) => {
            format!("tuple<{}>", t.types.iter().map(|t| render(resolve, t)).collect::<Vec<_>>().join(", "))
        }
        TypeDefKind::Option(t) => format!("option<{}>", render(resolve, t)),
        TypeDefKind::Result(r) => format!("result<{}, {}>", opt(&r.ok), opt(&r.err)),
        TypeDefKind::List(t) => format!("list<{}>", render(resolve, t)),
        TypeDefKind::Type(t) => render(resolve, t),
        other => format!("{other:?}"),
    }
}

fn frozen(version: &str) -> PathBuf {
    wit_dir().join(format!("since_v{version}"))
}

/// Each released version's text is the one released, and names its own version.
#[test]
fn released_contracts_are_frozen() {
    for (version, sha256) in RELEASED {
        let text = std::fs::read(frozen(version).join("connector.wit")).unwrap();
        assert_eq!(sha256_hex(&text), sha256, "wit/since_v{version} changed after its release: add a version instead");
        assert_eq!(shape_of(&frozen(version)).version, version);
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(wit_dir())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("since_v").map(str::to_string))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = RELEASED.iter().map(|(v, _)| v.to_string()).collect();
    assert_eq!(on_disk, listed, "every frozen folder is listed here with its sha256");
}

/// The current contract is the newest released one, or a later version of the same track that
/// only adds: every function and type of every release is there unchanged, every world keeps
/// its exports exactly (a guest of that world exports no more) and its imports at least.
#[test]
fn the_current_contract_only_adds_to_its_track() {
    let current_text = std::fs::read(wit_dir().join("connector.wit")).unwrap();
    let current = shape_of(&wit_dir());
    let (newest, newest_sha) = RELEASED[RELEASED.len() - 1];
    if current.version == newest {
        assert_eq!(sha256_hex(&current_text), newest_sha, "wit/connector.wit edited under the released {newest}");
    }
    let track = |v: &str| v.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
    for (version, _) in RELEASED.iter().filter(|(v, _)| track(v) == track(&current.version)) {
        let old = shape_of(&frozen(version));
        for (item, structure) in &old.items {
            assert_eq!(current.items.get(item), Some(structure), "{item} of {version} changed or went away");
        }
        for (world, (imports, exports)) in &old.worlds {
            let (now_imports, now_exports) =
                current.worlds.get(world).unwrap_or_else(|| panic!("world {world} of {version} went away"));
            assert_eq!(now_exports, exports, "world {world} of {version}: its exports changed");
            assert!(imports.iter().all(|i| now_imports.contains(i)), "world {world} of {version} lost an import");
        }
    }
}

/// A guest built for each released version (the demo connector at that release, committed)
/// loads, says which version it was built for, reads the demo API, and where its version has
/// report jobs, reads through them the records today's demo connector reads.
#[test]
fn a_guest_built_for_each_released_contract_runs() {
    let api = demo_api(DemoApiConfig { records: 50, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 20));
    let reports = json!({"base_url": api.base_url(), "page_size": 100, "report_jobs": true, "report_page_size": 70});
    let report_config = files.json("reports.json", &reports);
    let read = |guest: &Path, stream: &str, config: &Path| {
        let run = host(&["run", "--streams", stream, "--job-poll-ms", "20", "--job-poll-max-ms", "50"])
            .arg(guest)
            .arg("--config")
            .arg(config)
            .arg("--allow-host")
            .arg(grant(&api))
            .run();
        assert!(run.success(), "{}: {}", guest.display(), run.explain());
        run
    };
    // Accounts' reports finish in any order: the records compared as sets.
    let sorted = |mut ids: Vec<u64>| {
        ids.sort_unstable();
        ids
    };
    let today = sorted(read(&plugin("demo-source"), "report_items", &report_config).ids("report_items"));
    assert!(!today.is_empty());
    for (version, _) in RELEASED {
        let guest = workspace_root().join(format!("tests/fixtures/contract/demo-source-{version}.wasm"));
        let run = read(&guest, "items", &config);
        assert!(run.logs()[0].contains(&format!("built for sluice:connector@{version}")), "{}", run.logs()[0]);
        assert_eq!(run.ids("items"), (1..=50).collect::<Vec<_>>(), "{version}");
        if version != "0.1.0" {
            let reported = sorted(read(&guest, "report_items", &report_config).ids("report_items"));
            assert_eq!(reported, today, "{version}");
        }
    }
}

/// A guest built for a later release of the track than this host is refused with a message that
/// says the host is the older one (it may call what this host does not have). Today's demo
/// connector with its contract renamed to the next release stands in for one.
#[test]
fn a_guest_newer_than_the_host_is_refused_as_newer() {
    let current = shape_of(&wit_dir()).version;
    let mut parts: Vec<u64> = current.split('.').map(|p| p.parse().unwrap()).collect();
    parts[2] += 1;
    let newer = parts.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
    assert_eq!(newer.len(), current.len(), "the rename keeps every name's length");
    let (from, to) = (format!("@{current}"), format!("@{newer}"));
    let mut guest = std::fs::read(plugin("demo-source")).unwrap();
    let mut renamed = 0;
    for at in 0..guest.len().saturating_sub(from.len()) {
        if guest[at..].starts_with(from.as_bytes()) {
            guest[at..at + to.len()].copy_from_slice(to.as_bytes());
            renamed += 1;
        }
    }
    assert!(renamed > 0);
    let files = Files::new();
    let run = host(&["spec"]).arg(files.text("newer.wasm", &guest)).run();
    assert!(!run.success());
    let stderr = run.stderr();
    assert!(stderr.contains(&format!("built for sluice:connector@{newer}")), "{stderr}");
    assert!(stderr.contains("the plugin is newer than this host: use a newer host"), "{stderr}");
    assert!(stderr.contains(&format!("sluice:connector@0.1.0 to {current}")), "{stderr}");
}
