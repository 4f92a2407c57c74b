//! Secrets from the config: the values of fields the spec marks `"airbyte_secret": true` never
//! appear in LOG, TRACE or error messages, whatever the connector prints.

use serde_json::Value;
use std::sync::{Arc, RwLock};

const MASK: &str = "**********";

/// The secret values of one run; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Secrets(Arc<RwLock<Vec<String>>>);

impl Secrets {
    /// Collects the config values at every path the spec marks secret.
    pub fn set_from(&self, spec: &Value, config: &Value) {
        let mut values = Vec::new();
        collect(spec, config, &mut values);
        // Longest first, so a secret containing another is masked whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = values;
    }

    pub fn mask(&self, text: &str) -> String {
        let secrets = self.0.read().unwrap_or_else(|e| e.into_inner());
        let mut text = text.to_string();
        for secret in secrets.iter() {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), MASK);
            }
        }
        text
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
    }
}
