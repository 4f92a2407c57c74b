//! The config fields a partition's calls read (contract 0.1.7, `partition-config`): the host
//! hands those calls a config with only these, so a ListPartitionRouter's keys (as long as the
//! run has partitions) are not read again in every partition's fresh instance.
//!
//! Found in the manifest's templates: every `config['x']`, `config["x"]`, `config.x` and
//! `config.get('x')` outside a ListPartitionRouter's `values` (which only the listing reads). Any
//! other use of `config` (the whole of it, a key computed at run time), and the components that
//! read the config by path rather than through templates, keep the whole config: this only
//! leaves out what no partition can read.

use serde_json::Value;
use std::collections::BTreeSet;

/// Components that read config fields by path, or run code that may read any: with them, a
/// partition gets the whole config.
const READS_THE_WHOLE_CONFIG: &[&str] = &[
    "SelectiveAuthenticator",
    "ConfigComponentsResolver",
    "ConfigAddFields",
    "ConfigRemapField",
    "ConfigRemoveFields",
    "ConfigMigration",
    "DpathValidator",
    "PredicateValidator",
];

/// Keys whose values name config paths (an OAuth refresh token written back to the config).
const CONFIG_PATH_KEYS: &[&str] = &[
    "refresh_token_config_path",
    "access_token_config_path",
    "token_expiry_date_config_path",
    "authenticator_selection_path",
];

/// The fields, `extra` among them (the engine's own: the manifest), in no particular order; `None`
/// for the whole config.
pub fn of(manifest: &Value, extra: &[&str]) -> Option<Vec<String>> {
    let mut fields: BTreeSet<String> = extra.iter().map(|f| f.to_string()).collect();
    let Value::Object(top) = manifest else { return None };
    for (key, value) in top {
        match key.as_str() {
            // Read by `spec`, `check` and the listing, never by a partition.
            "spec" | "check" | "metadata" | "description" => {}
            "config_normalization_rules" | "dynamic_streams" => return None,
            _ => walk(value, &mut fields)?,
        }
    }
    Some(fields.into_iter().collect())
}

/// Collects the fields `value`'s templates name; `None` when something needs the whole config.
fn walk(value: &Value, fields: &mut BTreeSet<String>) -> Option<()> {
    match value {
        Value::String(text) => named_in_template(text, fields),
        Value::Array(items) => items.iter().try_for_each(|item| walk(item, fields)),
        Value::Object(map) => {
            let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
            if READS_THE_WHOLE_CONFIG.contains(&kind)
                || kind.starts_with("Custom")
                || map.contains_key("class_name")
                || CONFIG_PATH_KEYS.iter().any(|k| map.contains_key(*k))
            {
                return None;
            }
            map.iter()
                .filter(|(key, _)| !(kind == "ListPartitionRouter" && key.as_str() == "values"))
                .try_for_each(|(_, value)| walk(value, fields))
        }
        _ => Some(()),
    }
}

/// The fields one string's template expressions name.
fn named_in_template(text: &str, fields: &mut BTreeSet<String>) -> Option<()> {
    if !text.contains("{{") && !text.contains("{%") {
        return Some(());
    }
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(at) = text[from..].find("config").map(|i| i + from) {
        let end = at + "config".len();
        from = end;
        let starts_a_word = at == 0 || !(word(bytes[at - 1]) || bytes[at - 1] == b'.');
        if !starts_a_word || bytes.get(end).is_some_and(|&b| word(b)) {
            continue;
        }
        fields.insert(accessed(&text[end..])?);
    }
    Some(())
}

/// The field named right after `config`: `['x']`, `["x"]`, `.x`, `.get('x'...)`.
fn accessed(after: &str) -> Option<String> {
    let rest = after.trim_start();
    if let Some(rest) = rest.strip_prefix('[') {
        return quoted(rest.trim_start());
    }
    let rest = rest.strip_prefix('.')?.trim_start();
    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    match name.as_str() {
        "" => None,
        "get" => quoted(rest["get".len()..].trim_start().strip_prefix('(')?.trim_start()),
        // The mapping's own methods see every field.
        "keys" | "values" | "items" | "__contains__" => None,
        _ => Some(name),
    }
}

/// A string literal's text, `'x'` or `"x"` (a name with a backslash is left to the whole config).
fn quoted(text: &str) -> Option<String> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = &text[1..];
    let end = inner.find(quote)?;
    let name = &inner[..end];
    (!name.contains('\\')).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::of;
    use serde_json::json;

    fn stream(extra: serde_json::Value) -> serde_json::Value {
        let mut retriever = json!({"type": "SimpleRetriever",
            "requester": {"type": "HttpRequester", "url_base": "{{ config['base_url'] }}", "path": "/a/{{ stream_partition.id }}",
                "request_headers": {"X-Key": "{{ config.api_key }}", "X-Site": "{{ config.get('site', 'x') }}"}},
            "partition_router": {"type": "ListPartitionRouter", "cursor_field": "id", "values": "{{ config['accounts'] }}"}});
        retriever.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"type": "DeclarativeSource", "spec": {"connection_specification": {"description": "{{ config }}"}},
            "streams": [{"type": "DeclarativeStream", "name": "s", "retriever": retriever,
                "$parameters": {"since": "{{ config[\"start_date\"] }}", "note": "config here is no template"}}]})
    }

    #[test]
    fn the_fields_templates_name_outside_the_listing() {
        let fields = of(&stream(json!({})), &["__m"]).unwrap();
        assert_eq!(fields, ["__m", "api_key", "base_url", "site", "start_date"], "not accounts");
    }

    #[test]
    fn any_other_use_of_the_config_keeps_all_of_it() {
        for extra in [
            json!({"x": "{{ config }}"}),
            json!({"x": "{{ config[stream_partition.key] }}"}),
            json!({"x": "{% for k in config.keys() %}{{ k }}{% endfor %}"}),
            json!({"authenticator": {"type": "SelectiveAuthenticator", "authenticator_selection_path": ["auth", "type"]}}),
            json!({"authenticator": {"type": "OAuthAuthenticator", "refresh_token_config_path": ["refresh_token"]}}),
            json!({"record_filter": {"type": "CustomRecordFilter", "class_name": "components.Filter"}}),
        ] {
            assert_eq!(of(&stream(extra.clone()), &[]), None, "{extra}");
        }
        assert_eq!(of(&json!({"streams": [], "dynamic_streams": []}), &[]), None);
        // A word that ends or starts with `config` is not it.
        let fields = of(&stream(json!({"x": "{{ stream_config.a }} {{ configs }} {{ my.config }}"})), &[]).unwrap();
        assert!(!fields.iter().any(|f| f == "a"), "{fields:?}");
    }
}
