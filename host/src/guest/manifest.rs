//! Declarative manifests as plugins: `host run manifest.yaml` runs the manifest in the
//! declarative engine (a component shipped with the host, `declarative.wasm`), sandboxed like any
//! plugin. The host reads the YAML only to hand it on as JSON (in the config, under
//! `__injected_declarative_manifest`, as `source-declarative-manifest` takes it) and to answer
//! `spec` from the manifest's own spec; everything else the manifest says is interpreted by the
//! engine, inside the sandbox.
//!
//! A manifest is untrusted input: its size is capped before it is parsed, and before anything
//! is built from it one pass over its YAML events (linear in its size, nothing expanded)
//! measures what it would become: how deep it nests (a deep document made the parser's work
//! quadratic: 21 s for 100,000 levels) and how large it expands to once its aliases are
//! replaced (a 1 MiB string aliased 800 times cost 1.6 GiB before the expanded size was
//! checked). Past [`MAX_YAML_DEPTH`], or past [`MAX_EXPANDED_BYTES`] or [`MAX_EXPANDED_NODES`]
//! expanded, it is refused there.

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where the config carries the manifest.
pub const MANIFEST_KEY: &str = "__injected_declarative_manifest";
/// The largest manifest file (the biggest real ones are a few hundred KB).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest manifest once aliases are expanded, as JSON (about: each scalar counts its bytes
/// and 3 more, each collection 2).
pub const MAX_EXPANDED_BYTES: usize = 16 << 20;
/// The most values (scalars and collections) a manifest may expand to.
pub const MAX_EXPANDED_NODES: u64 = 2 << 20;
/// The deepest nesting of a manifest, aliases expanded (real ones nest a dozen levels; the
/// YAML and JSON parsers stop at 128).
pub const MAX_YAML_DEPTH: usize = 100;
/// The config key the CDK's source-declarative-manifest takes custom code (components.py) from.
pub const INJECTED_KEY: &str = "__injected_components_py";
/// The config key the engine learns that custom code is there from (the CDK's checksums key).
pub const CHECKSUMS_KEY: &str = "__injected_components_py_checksums";
/// Overrides where the engine component is.
pub const ENGINE_ENV: &str = "SLUICE_DECLARATIVE_ENGINE";
pub const ENGINE_FILE: &str = "declarative.wasm";

/// A loaded manifest.
#[derive(Debug)]
pub struct Manifest {
    pub path: PathBuf,
    pub sha256: String,
    /// The manifest as JSON, handed to the engine.
    pub json: Value,
    /// The spec `host spec` answers: the manifest's `connection_specification` (with its
    /// `documentationUrl`).
    pub spec: String,
}

/// Whether `path` names a manifest rather than a component: by its extension.
pub fn is_manifest(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

pub fn load(path: &Path) -> Result<Manifest> {
    use std::io::Read;
    let shown = path.display();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .with_context(|| format!("cannot read the manifest {shown}"))?
        .take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the manifest {shown}"))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        bail!("the manifest {shown} is larger than {} MiB", MAX_MANIFEST_BYTES >> 20);
    }
    let json = parse(&bytes).with_context(|| format!("the manifest {shown} cannot be loaded"))?;
    let spec = spec_of(&json).with_context(|| format!("the manifest {shown} cannot be loaded"))?;
    Ok(Manifest { path: path.to_path_buf(), sha256: hex::encode(Sha256::digest(&bytes)), json, spec })
}

/// YAML to JSON, refusing documents that expand past the cap.
pub fn parse(bytes: &[u8]) -> Result<Value> {
    let text = std::str::from_utf8(bytes).map_err(|e| anyhow!("it is not UTF-8 text: {e}"))?;
    prescan::measure(bytes).0.map_err(|e| anyhow!("{e}"))?;
    let value: Value = serde_norway::from_str(text).map_err(|e| anyhow!("it is not valid YAML: {e}"))?;
    let size = serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_EXPANDED_BYTES {
        bail!("it expands to {} MiB of JSON (more than {} MiB)", size >> 20, MAX_EXPANDED_BYTES >> 20);
    }
    if !value.is_object() {
        bail!("it is not a mapping (a DeclarativeSource with version, streams and spec)");
    }
    Ok(value)
}

fn spec_of(manifest: &Value) -> Result<String> {
    let spec = manifest.get("spec").ok_or_else(|| anyhow!("it has no spec (spec.connection_specification)"))?;
    // `$ref`s inside the spec are the engine's business; a spec that is one stays as written.
    let mut connection = match spec.get("connection_specification") {
        Some(Value::Object(c)) => c.clone(),
        _ => bail!("spec.connection_specification must be a JSON schema object"),
    };
    if let Some(url) = spec.get("documentation_url").and_then(Value::as_str) {
        connection.entry("documentationUrl").or_insert_with(|| Value::from(url));
    }
    Ok(Value::Object(connection).to_string())
}

/// The config the engine gets: the operator's, with the manifest in it (unless it has one), and
/// with custom code, the code's sha256 in place of the code (which the host hands to the
/// components runtime itself).
pub fn inject(config: &str, manifest: &Value, components_sha256: Option<&str>) -> String {
    match serde_json::from_str::<Value>(config) {
        Ok(Value::Object(mut map)) => {
            map.entry(MANIFEST_KEY).or_insert_with(|| manifest.clone());
            map.remove(INJECTED_KEY);
            map.remove(CHECKSUMS_KEY);
            if let Some(sha256) = components_sha256 {
                map.insert(CHECKSUMS_KEY.into(), serde_json::json!({"sha256": sha256}));
            }
            Value::Object(map).to_string()
        }
        // Not an object: the run refuses it before any call, so it is passed on as it is.
        _ => config.to_string(),
    }
}

/// The operator's config without the manifest (for checking it against the manifest's spec).
pub fn without_manifest(config: &Value) -> Value {
    match config {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| *k != MANIFEST_KEY).map(|(k, v)| (k.clone(), v.clone())).collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

/// The engine component: `$SLUICE_DECLARATIVE_ENGINE`, else `declarative.wasm` beside the host
/// executable, else `../plugins/declarative.wasm` from it (the build tree's `target/plugins`).
pub fn engine_path() -> Result<PathBuf> {
    shipped_component(ENGINE_ENV, ENGINE_FILE, "the declarative engine")
}

/// A component shipped with the host (`what`): the path in `$env`, else `file` beside the host
/// executable, else in `../plugins` from it (the build tree's `target/plugins`).
pub fn shipped_component(env: &str, file: &str, what: &str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot find the host executable")?;
    let dir = exe.parent().ok_or_else(|| anyhow!("the host executable has no directory"))?;
    let candidates = [dir.join(file), dir.join("../plugins").join(file)];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        anyhow!(
            "{what} ({file}) is not installed: looked at {} and {}; build it with `just build-plugins`, or set {env}",
            candidates[0].display(),
            candidates[1].display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_becomes_json_with_its_spec() {
        let m = parse(b"version: 6.0.0\nspec:\n  documentation_url: https://d\n  connection_specification:\n    type: object\n    properties: {a: {type: string}}\nstreams: []\n").unwrap();
        assert_eq!(m["spec"]["connection_specification"]["properties"]["a"]["type"], "string");
        let spec: Value = serde_json::from_str(&spec_of(&m).unwrap()).unwrap();
        assert_eq!(spec["documentationUrl"], "https://d");
        assert!(spec_of(&serde_json::json!({"streams": []})).unwrap_err().to_string().contains("no spec"));
    }

    #[test]
    fn alias_bombs_and_garbage_are_refused() {
        let mut bomb =
            String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (i, prev) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
            let name = ["b", "c", "d", "e", "f", "g", "h", "i"][i];
            bomb.push_str(&format!(
                "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        let e = parse(bomb.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("repetition limit") || e.contains("expands to"), "{e}");
        assert!(parse(b"- just\n- a list\n").unwrap_err().to_string().contains("not a mapping"));
        assert!(parse(b"a: [unclosed\n").unwrap_err().to_string().contains("not valid YAML"));
    }

    #[test]
    fn the_manifest_goes_into_the_config_unless_it_has_one() {
        let m = serde_json::json!({"version": "1"});
        let injected: Value = serde_json::from_str(&inject(r#"{"a":1}"#, &m, None)).unwrap();
        assert_eq!(injected[MANIFEST_KEY], m);
        let own: Value =
            serde_json::from_str(&inject(r#"{"__injected_declarative_manifest":{"v":2}}"#, &m, None)).unwrap();
        assert_eq!(own[MANIFEST_KEY]["v"], 2);
        assert_eq!(without_manifest(&injected), serde_json::json!({"a": 1}));
    }
}

/// One pass over a YAML document's events, bounding what building it would cost before it is
/// built. libyaml's own parser (the one serde_norway drives), event by event: the pass stops at
/// the first bound crossed, so it never gets far into a document too deep (where the scanner's
/// work per token grows with the depth).
mod prescan {
    use super::{MAX_EXPANDED_BYTES, MAX_EXPANDED_NODES, MAX_YAML_DEPTH};
    use std::collections::HashMap;
    use std::mem::MaybeUninit;
    use unsafe_libyaml_norway as unsafe_yaml;

    /// A parser that is deleted when dropped; boxed, since libyaml's state must not move.
    struct Parser(Box<MaybeUninit<unsafe_yaml::yaml_parser_t>>);

    impl Drop for Parser {
        fn drop(&mut self) {
            // SAFETY: initialised in `measure` before a `Parser` is made.
            unsafe { unsafe_yaml::yaml_parser_delete(self.0.as_mut_ptr()) }
        }
    }

    /// What a node becomes once expanded: JSON bytes (about), values, and nesting.
    #[derive(Clone, Copy, Default)]
    struct Size {
        bytes: u64,
        nodes: u64,
        depth: usize,
    }

    /// The anchor's name, when there is one.
    ///
    /// # Safety
    /// `anchor` is null or a NUL-terminated string libyaml made.
    unsafe fn name(anchor: *const u8) -> Option<Vec<u8>> {
        if anchor.is_null() {
            return None;
        }
        // SAFETY: as the caller says.
        Some(unsafe { std::ffi::CStr::from_ptr(anchor.cast()) }.to_bytes().to_vec())
    }

    /// Whether `input` stays within the bounds, and how many events were read to tell (a
    /// syntax error is left to the real parse to report, with its position).
    pub fn measure(input: &[u8]) -> (Result<(), String>, u64) {
        let mut parser = Parser(Box::new(MaybeUninit::uninit()));
        let p = parser.0.as_mut_ptr();
        // SAFETY: `p` points at memory for a parser that does not move (boxed); once
        // initialised it is deleted by `Parser`'s drop; the input outlives the parser.
        unsafe {
            if unsafe_yaml::yaml_parser_initialize(p).fail {
                std::mem::forget(parser);
                return (Err("the YAML parser cannot start".into()), 0);
            }
            unsafe_yaml::yaml_parser_set_encoding(p, unsafe_yaml::YAML_UTF8_ENCODING);
            unsafe_yaml::yaml_parser_set_input_string(p, input.as_ptr(), input.len() as u64);
        }
        let mut anchors: HashMap<Vec<u8>, Size> = HashMap::new();
        // Open collections: their anchor and their size so far.
        let mut open: Vec<(Option<Vec<u8>>, Size)> = Vec::new();
        let mut total = Size::default();
        let mut events = 0;
        loop {
            let mut event = MaybeUninit::<unsafe_yaml::yaml_event_t>::uninit();
            let e = event.as_mut_ptr();
            // SAFETY: an initialised parser and room for one event.
            if unsafe { unsafe_yaml::yaml_parser_parse(p, e) }.fail {
                return (Ok(()), events);
            }
            events += 1;
            // SAFETY: the event was filled in; each union field is read for its own type.
            let (kind, done) = unsafe {
                let kind = (*e).type_;
                let done = match kind {
                    unsafe_yaml::YAML_SCALAR_EVENT => {
                        let scalar = (*e).data.scalar;
                        Some((name(scalar.anchor), Size { bytes: scalar.length + 3, nodes: 1, depth: 0 }))
                    }
                    unsafe_yaml::YAML_ALIAS_EVENT => {
                        let anchor = name((*e).data.alias.anchor).unwrap_or_default();
                        Some((None, anchors.get(&anchor).copied().unwrap_or_default()))
                    }
                    unsafe_yaml::YAML_SEQUENCE_START_EVENT => {
                        open.push((name((*e).data.sequence_start.anchor), Size { bytes: 2, nodes: 1, depth: 1 }));
                        None
                    }
                    unsafe_yaml::YAML_MAPPING_START_EVENT => {
                        open.push((name((*e).data.mapping_start.anchor), Size { bytes: 2, nodes: 1, depth: 1 }));
                        None
                    }
                    unsafe_yaml::YAML_SEQUENCE_END_EVENT | unsafe_yaml::YAML_MAPPING_END_EVENT => open.pop(),
                    _ => None,
                };
                unsafe_yaml::yaml_event_delete(e);
                (kind, done)
            };
            if kind == unsafe_yaml::YAML_STREAM_END_EVENT {
                return (Ok(()), events);
            }
            // What this event adds once expanded: a collection's own brackets when it opens, a
            // scalar, or everything an alias repeats.
            let added = match (kind, &done) {
                (unsafe_yaml::YAML_SEQUENCE_START_EVENT | unsafe_yaml::YAML_MAPPING_START_EVENT, _) => {
                    Size { bytes: 2, nodes: 1, depth: open.len() }
                }
                (unsafe_yaml::YAML_SCALAR_EVENT | unsafe_yaml::YAML_ALIAS_EVENT, Some((_, size))) => {
                    Size { depth: open.len() + size.depth, ..*size }
                }
                _ => Size::default(),
            };
            total.bytes = total.bytes.saturating_add(added.bytes);
            total.nodes = total.nodes.saturating_add(added.nodes);
            if added.depth > MAX_YAML_DEPTH {
                return (Err(format!("it nests more than {MAX_YAML_DEPTH} levels deep")), events);
            }
            if total.bytes > MAX_EXPANDED_BYTES as u64 {
                return (Err(format!("it expands to more than {} MiB of JSON", MAX_EXPANDED_BYTES >> 20)), events);
            }
            if total.nodes > MAX_EXPANDED_NODES {
                return (Err(format!("it expands to more than {MAX_EXPANDED_NODES} values")), events);
            }
            if let Some((anchor, size)) = done {
                if let Some(anchor) = anchor {
                    anchors.insert(anchor, size);
                }
                if let Some((_, parent)) = open.last_mut() {
                    parent.bytes = parent.bytes.saturating_add(size.bytes);
                    parent.nodes = parent.nodes.saturating_add(size.nodes);
                    parent.depth = parent.depth.max(size.depth + 1);
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// 100,000 levels took the parser 21 s before its recursion limit (2 million fit in the
        /// file cap: hours). The pass stops a little past the bound, whatever follows.
        #[test]
        fn deep_documents_stop_at_the_bound() {
            for deep in ["[".repeat(2_000_000), "- ".repeat(1_000_000), "a: {".repeat(500_000)] {
                let (result, events) = measure(deep.as_bytes());
                assert!(result.unwrap_err().contains("levels deep"));
                assert!(events < 4 * MAX_YAML_DEPTH as u64, "{events} events read");
            }
            let mut fine = "[".repeat(MAX_YAML_DEPTH);
            fine.push_str(&"]".repeat(MAX_YAML_DEPTH));
            assert_eq!(measure(fine.as_bytes()).0, Ok(()));
            // An alias placed deep, of a node that is deep itself, is as deep as both.
            let half = MAX_YAML_DEPTH / 2 + 1;
            let doc = format!(
                "a: &x {}1{}\nb: {}*x{}\n",
                "[".repeat(half),
                "]".repeat(half),
                "[".repeat(half),
                "]".repeat(half)
            );
            assert!(measure(doc.as_bytes()).0.unwrap_err().contains("levels deep"));
        }

        /// A 1 MiB string aliased 800 times cost 1.6 GiB before the expanded size was checked;
        /// short anchors repeated (15 KB) reached 956 MB. Both are refused without expanding,
        /// after reading about as many events as the cap allows.
        #[test]
        fn aliases_are_counted_not_expanded() {
            let mut big = format!("a: &big \"{}\"\nlist:\n", "x".repeat(1 << 20));
            for _ in 0..800 {
                big.push_str("  - *big\n");
            }
            let (result, events) = measure(big.as_bytes());
            assert!(result.unwrap_err().contains("expands to more than 16 MiB"));
            assert!(events < 100, "{events} events");
            // Nested aliases: each level ten of the one before (a billion laughs, shallow).
            let mut laughs = String::from("l0: &l0 [\"lol\"]\n");
            for i in 1..10 {
                let refs = vec![format!("*l{}", i - 1); 10].join(", ");
                laughs.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
            }
            assert!(measure(laughs.as_bytes()).0.unwrap_err().contains("expands to more than"));
            // Many small values: the node count.
            let mut wide = String::from("a: &a [");
            wide.push_str(&vec!["1"; 1000].join(","));
            wide.push_str("]\nb: [");
            wide.push_str(&vec!["*a"; 3000].join(","));
            wide.push_str("]\n");
            assert!(measure(wide.as_bytes()).0.unwrap_err().contains("values"));
            // A manifest with a few aliases passes.
            assert_eq!(measure(b"base: &b {url: 'http://x'}\nstreams: [{r: *b}, {r: *b}]\n").0, Ok(()));
        }
    }
}
