//! Secrets from the config: the values of fields the spec marks `"airbyte_secret": true` never
//! appear in LOG, TRACE or error messages, whatever the connector prints.

use serde_json::Value;
use std::sync::{Arc, RwLock};

pub const MASK: &str = "**********";

/// The secret values of one run, and the names of the fields holding them; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Secrets(Arc<RwLock<Known>>);

#[derive(Debug, Default)]
struct Known {
    values: Vec<String>,
    names: Vec<String>,
}

impl Secrets {
    /// Collects the config values at every path the spec marks secret.
    pub fn set_from(&self, spec: &Value, config: &Value) {
        let mut found = Vec::new();
        collect(spec, config, &mut found);
        let mut names = Vec::new();
        collect_names(spec, &mut names);
        names.sort();
        names.dedup();
        // A very short secret would mask unrelated text everywhere; such values are no secret
        // worth the name. The forms a value takes in a URL or in JSON text are masked too.
        let mut values = Vec::new();
        for value in found.into_iter().filter(|v| v.chars().count() >= 4) {
            let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
            let escaped = serde_json::to_string(&value).unwrap_or_default();
            values.extend([encoded, escaped.trim_matches('"').to_string(), value]);
        }
        // Longest first, so a secret containing another is masked whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Known { values, names };
    }

    /// Names of the fields the spec marks secret (query parameters of these names are masked in
    /// HTTP recordings, whatever their value).
    pub fn names(&self) -> Vec<String> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).names.clone()
    }

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
}

/// The names of every property the spec marks secret, at any depth.
fn collect_names(schema: &Value, out: &mut Vec<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub_schema) in properties {
            if sub_schema.get("airbyte_secret").and_then(Value::as_bool) == Some(true) {
                out.push(name.clone());
            }
            collect_names(sub_schema, out);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for alternative in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            collect_names(alternative, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_names(items, out);
    }
}

fn collect(schema: &Value, value: &Value, out: &mut Vec<String>) {
    if schema.get("airbyte_secret").and_then(Value::as_bool) == Some(true) {
        match value {
            Value::String(s) if !s.is_empty() => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            _ => {}
        }
        return;
    }
    if let (Some(properties), Some(object)) = (schema.get("properties").and_then(Value::as_object), value.as_object()) {
        for (name, sub_schema) in properties {
            if let Some(sub_value) = object.get(name) {
                collect(sub_schema, sub_value, out);
            }
        }
    }
    // Alternatives (`oneOf`, `anyOf`) each may mark fields secret.
    for key in ["oneOf", "anyOf", "allOf"] {
        for alternative in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            collect(alternative, value, out);
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        list.iter().for_each(|v| collect(items, v, out));
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
