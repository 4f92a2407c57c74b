//! Secrets from the config: the values of fields the spec marks `"airbyte_secret": true` never
//! appear in LOG, TRACE or error messages, whatever the connector prints: not raw, not in the
//! forms a URL, JSON text or base64 gives them, and not split over messages (any piece of half a
//! secret or more is masked in free text). Stream names and schemas that contain one are refused
//! (see `run::session::discover`), so no message kind carries one. Record data and state are the
//! operator's data and go out as the API gave them.

use base64::Engine as _;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

pub const MASK: &str = "**********";

/// Secrets shorter than this are not masked: they would mask unrelated text everywhere. The
/// run warns about each one instead.
pub const MIN_MASKED_CHARS: usize = 4;

/// How deep `$ref`s are followed while collecting secret fields (a cycle ends there).
const MAX_REF_DEPTH: usize = 32;

/// The secret values of one run, and the names of the fields holding them; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Secrets(Arc<RwLock<Known>>);

#[derive(Debug, Default)]
struct Known {
    /// Every form of every secret, longest first.
    values: Vec<String>,
    names: Vec<String>,
    /// Pieces of the raw secrets, for masking a secret split over messages: each secret's
    /// windows of `len / 2` bytes (at least [`MIN_MASKED_CHARS`]).
    pieces: Vec<Pieces>,
    /// Fields whose secret value is too short to mask.
    too_short: Vec<String>,
}

#[derive(Debug)]
struct Pieces {
    width: usize,
    windows: HashSet<Vec<u8>>,
}

impl Secrets {
    /// Collects the config values at every path the spec marks secret.
    pub fn set_from(&self, spec: &Value, config: &Value) {
        let mut found = Vec::new();
        collect(spec, spec, config, "", 0, &mut found, &mut Seen::new());
        let mut names = Vec::new();
        collect_names(spec, spec, 0, &mut names, &mut Seen::new());
        names.sort();
        names.dedup();
        let mut values = Vec::new();
        let mut pieces = Vec::new();
        let mut too_short = Vec::new();
        for (path, value) in found {
            if value.chars().count() < MIN_MASKED_CHARS {
                too_short.push(path);
                continue;
            }
            values.extend(forms(&value));
            let width = (value.len() / 2).max(MIN_MASKED_CHARS);
            if width < value.len() {
                let windows = value.as_bytes().windows(width).map(<[u8]>::to_vec).collect();
                pieces.push(Pieces { width, windows });
            }
        }
        // Longest first, so a secret containing another is masked whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        too_short.sort();
        too_short.dedup();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Known { values, names, pieces, too_short };
    }

    /// Names of the fields the spec marks secret (query parameters of these names are masked in
    /// HTTP recordings, whatever their value).
    pub fn names(&self) -> Vec<String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).names.clone()
    }

    /// Config fields marked secret whose values are too short to be masked reliably.
    pub fn too_short(&self) -> Vec<String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).too_short.clone()
    }

    /// True when `text` holds a secret in any of the forms [`Secrets::mask`] masks whole.
    pub fn appear_in(&self, text: &str) -> bool {
        self.0.read().unwrap_or_else(|e| e.into_inner()).values.iter().any(|v| text.contains(v.as_str()))
    }

    /// `text` with every form of every secret masked (for structured text such as JSON: the
    /// result stays valid wherever a secret sat inside a string).
    pub fn mask(&self, text: &str) -> String {
        let secrets = self.0.read().unwrap_or_else(|e| e.into_inner());
        let mut text = text.to_string();
        for secret in secrets.values.iter() {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), MASK);
            }
        }
        text
    }

    /// [`Secrets::mask`], and also any piece of half a secret or more: for free text (logs,
    /// error messages), where a connector may split a secret over two messages.
    pub fn mask_text(&self, text: &str) -> String {
        let masked = self.mask(text);
        let secrets = self.0.read().unwrap_or_else(|e| e.into_inner());
        let bytes = masked.as_bytes();
        let mut hidden = vec![false; bytes.len()];
        for pieces in &secrets.pieces {
            if bytes.len() < pieces.width {
                continue;
            }
            for (at, window) in bytes.windows(pieces.width).enumerate() {
                // A piece stands alone (a secret cut where one message ends and the next
                // begins), never inside a longer word: `comp` of a secret is not in `company`.
                let end = at + pieces.width;
                let alone = (at == 0 || !bytes[at - 1].is_ascii_alphanumeric())
                    && (end == bytes.len() || !bytes[end].is_ascii_alphanumeric());
                if alone && pieces.windows.contains(window) {
                    hidden[at..at + pieces.width].iter_mut().for_each(|h| *h = true);
                }
            }
        }
        if !hidden.contains(&true) {
            return masked;
        }
        // Masked runs become one mask each, widened to character boundaries.
        let mut out = String::with_capacity(masked.len());
        let mut in_mask = false;
        for (at, c) in masked.char_indices() {
            if hidden[at..at + c.len_utf8()].contains(&true) {
                if !in_mask {
                    out.push_str(MASK);
                    in_mask = true;
                }
            } else {
                in_mask = false;
                out.push(c);
            }
        }
        out
    }
}

/// The forms a secret takes in the output: raw, URL-encoded (`+` or `%20` for spaces, and
/// every byte escaped), JSON-escaped, and base64 (standard and URL-safe) at each of the three
/// alignments it can have inside a longer encoded value (an `user:password` header).
fn forms(value: &str) -> Vec<String> {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let form: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
    let escaped = serde_json::to_string(value).unwrap_or_default();
    let mut forms = vec![
        value.to_string(),
        form.replace('+', "%20"),
        form,
        utf8_percent_encode(value, NON_ALPHANUMERIC).to_string(),
        escaped.trim_matches('"').to_string(),
    ];
    for engine in [base64::engine::general_purpose::STANDARD, base64::engine::general_purpose::URL_SAFE] {
        for offset in 0..3usize {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(value.as_bytes());
            let encoded = engine.encode(&bytes);
            // Only the characters that depend on the secret's bytes alone.
            let (start, end) = ((offset * 8).div_ceil(6), (bytes.len() * 8) / 6);
            if end > start && end - start >= MIN_MASKED_CHARS {
                forms.push(encoded[start..end].to_string());
            }
        }
    }
    forms
}

/// `schema`, or what its local `$ref` (`#/definitions/x`, `#/$defs/x`) points at in `root`.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => root.pointer(pointer).unwrap_or(schema),
        None => schema,
    }
}

/// The least depth each (schema, value) pair was walked at: a pair is walked again only nearer
/// the top, so a spec whose `allOf`s each name the next level twice costs its size (times the
/// depth limit), not 2 to the power of the depth.
type Seen = HashMap<(usize, usize), usize>;

/// True when `schema` (with `value`) was walked at `depth` or nearer the top already.
fn seen_before(seen: &mut Seen, schema: &Value, value: Option<&Value>, depth: usize) -> bool {
    let key = (schema as *const Value as usize, value.map_or(0, |v| v as *const Value as usize));
    match seen.get(&key) {
        Some(&at) if at <= depth => true,
        _ => {
            seen.insert(key, depth);
            false
        }
    }
}

/// The names of every property the spec marks secret, at any depth.
fn collect_names(root: &Value, schema: &Value, depth: usize, out: &mut Vec<String>, seen: &mut Seen) {
    if depth > MAX_REF_DEPTH {
        return;
    }
    let schema = resolve(root, schema);
    if seen_before(seen, schema, None, depth) {
        return;
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub_schema) in properties {
            if resolve(root, sub_schema).get("airbyte_secret").and_then(Value::as_bool) == Some(true) {
                out.push(name.clone());
            }
            collect_names(root, sub_schema, depth + 1, out, seen);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for alternative in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            collect_names(root, alternative, depth + 1, out, seen);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub_schema) = schema.get(key).filter(|s| s.is_object()) {
            collect_names(root, sub_schema, depth + 1, out, seen);
        }
    }
}

/// The secret values in `value` under `schema`, with their paths (for warnings).
fn collect(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
    depth: usize,
    out: &mut Vec<(String, String)>,
    seen: &mut Seen,
) {
    if depth > MAX_REF_DEPTH {
        return;
    }
    let schema = resolve(root, schema);
    if seen_before(seen, schema, Some(value), depth) {
        return;
    }
    if schema.get("airbyte_secret").and_then(Value::as_bool) == Some(true) {
        match value {
            Value::String(s) if !s.is_empty() => out.push((path.to_string(), s.clone())),
            Value::Number(n) => out.push((path.to_string(), n.to_string())),
            _ => {}
        }
        return;
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(object) = value.as_object() {
        let additional = schema.get("additionalProperties").filter(|s| s.is_object());
        for (name, sub_value) in object {
            let sub_path = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
            if let Some(sub_schema) = properties.and_then(|p| p.get(name)).or(additional) {
                collect(root, sub_schema, sub_value, &sub_path, depth + 1, out, seen);
            }
        }
    }
    // Alternatives (`oneOf`, `anyOf`) each may mark fields secret.
    for key in ["oneOf", "anyOf", "allOf"] {
        for alternative in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            collect(root, alternative, value, path, depth + 1, out, seen);
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (i, v) in list.iter().enumerate() {
            collect(root, items, v, &format!("{path}[{i}]"), depth + 1, out, seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_encoded_forms_and_skips_tiny_values() {
        let spec = json!({"properties": {"k": {"airbyte_secret": true}, "n": {"airbyte_secret": true}}});
        let secrets = Secrets::default();
        secrets.set_from(&spec, &json!({"k": "a b/c\"d", "n": 1}));
        assert_eq!(
            secrets.mask("url ?k=a+b%2Fc%22d json \"a b/c\\\"d\" raw a b/c\"d 1"),
            "url ?k=********** json \"**********\" raw ********** 1"
        );
    }

    /// Each level's `allOf` names the next level four times: walked as a tree that is 4^32
    /// visits (the host never finished); each (schema, value) is walked once now.
    #[test]
    fn branching_refs_cost_the_size_of_the_spec_not_a_power_of_it() {
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = json!({"$ref": format!("#/definitions/d{}", i + 1)});
            defs.insert(format!("d{i}"), json!({"allOf": [next, next, next, next]}));
        }
        defs.insert("d40".into(), json!({"properties": {"key": {"type": "string", "airbyte_secret": true}}}));
        let spec = json!({"definitions": defs, "allOf": [{"$ref": "#/definitions/d0"}]});
        let secrets = Secrets::default();
        secrets.set_from(&spec, &json!({"key": "hunter22"}));
        // Past the depth the walk follows: not found, but the walk ends.
        assert!(!secrets.appear_in("hunter22"));
        let near = json!({"definitions": {"a": {"allOf": [{"$ref": "#/definitions/b"}, {"$ref": "#/definitions/b"}]},
            "b": {"properties": {"key": {"airbyte_secret": true}}}}, "allOf": [{"$ref": "#/definitions/a"}]});
        secrets.set_from(&near, &json!({"key": "hunter22"}));
        assert!(secrets.appear_in("the hunter22 key") && secrets.names() == ["key"]);
    }

    #[test]
    fn secrets_behind_refs_and_additional_properties_are_found() {
        let spec = json!({
            "definitions": {"token": {"type": "string", "airbyte_secret": true}},
            "properties": {
                "auth": {"$ref": "#/definitions/token"},
                "headers": {"type": "object", "additionalProperties": {"type": "string", "airbyte_secret": true}},
                "short": {"airbyte_secret": true}
            }
        });
        let secrets = Secrets::default();
        secrets.set_from(&spec, &json!({"auth": "r3f-t0ken", "headers": {"x-key": "h3ader-value"}, "short": "ab"}));
        assert_eq!(secrets.mask("r3f-t0ken h3ader-value ab"), "********** ********** ab");
        assert_eq!(secrets.too_short(), vec!["short"]);
        assert_eq!(secrets.names(), vec!["auth", "short"]);
    }

    #[test]
    fn masks_url_encoded_base64_and_split_forms() {
        let spec = json!({"properties": {"k": {"airbyte_secret": true}}});
        let secrets = Secrets::default();
        let secret = "open sesame 42";
        secrets.set_from(&spec, &json!({"k": secret}));
        assert_eq!(secrets.mask("path/open%20sesame%2042/x"), "path/**********/x");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        for wrapped in [secret.to_string(), format!("u:{secret}"), format!("us:{secret}"), format!("use:{secret}")] {
            let masked = secrets.mask(&format!("Basic {}", b64(&wrapped)));
            assert!(masked.contains(MASK), "{wrapped}: {masked}");
        }
        // Half a secret in one message and the rest in the next: each half is masked.
        let (first, second) = secret.split_at(7);
        assert_eq!(secrets.mask_text(&format!("part one: {first}")), format!("part one: {MASK}"));
        assert_eq!(secrets.mask_text(&format!("{second} was part two")), format!("{MASK} was part two"));
        assert_eq!(secrets.mask_text("open the door"), "open the door", "a short piece alone is not masked");
    }

    #[test]
    fn pieces_inside_ordinary_words_are_not_masked() {
        let spec = json!({"properties": {"k": {"airbyte_secret": true}}});
        let secrets = Secrets::default();
        secrets.set_from(&spec, &json!({"k": "compXYZ9"}));
        let url = "GET https://api.example.com/v3/company/items?limit=5";
        assert_eq!(secrets.mask_text(url), url);
        assert_eq!(secrets.mask_text("the key ends in XYZ9"), format!("the key ends in {MASK}"));
        assert_eq!(secrets.mask_text("comp"), MASK);
        assert_eq!(secrets.mask_text("/v3/compXYZ9/x"), format!("/v3/{MASK}/x"));
    }

    #[test]
    fn masks_marked_fields_everywhere() {
        let spec = json!({"properties": {
            "api_key": {"type": "string", "airbyte_secret": true},
            "auth": {"oneOf": [{"properties": {"password": {"airbyte_secret": true}}}]},
            "name": {"type": "string"}
        }});
        let config = json!({"api_key": "sk-123456", "auth": {"password": "hunter22"}, "name": "visible"});
        let secrets = Secrets::default();
        secrets.set_from(&spec, &config);
        assert_eq!(secrets.mask("key sk-123456 and hunter22 for visible"), "key ********** and ********** for visible");
        assert_eq!(secrets.names(), vec!["api_key", "password"]);
    }
}
