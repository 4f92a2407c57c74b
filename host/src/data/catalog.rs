//! Which streams to read and how: an Airbyte configured catalog, or a Singer catalog whose
//! streams are marked selected. Unknown keys are ignored, as platforms add their own.

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

/// One selected stream; `incremental` is `None` when the catalog leaves it to the stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selected {
    pub name: String,
    pub incremental: Option<bool>,
    /// Top-level properties the catalog deselects (Singer `selected: false` on a property's
    /// breadcrumb, as Meltano writes for `select` rules): left out of records and the SCHEMA.
    pub excluded: Vec<String>,
}

/// The largest catalog file read. A configured catalog carries every selected stream's schema;
/// the largest real ones (hundreds of streams) are a few MiB.
pub const MAX_CATALOG_BYTES: u64 = 64 << 20;

/// Reads a catalog file of either kind, at most [`MAX_CATALOG_BYTES`] of it.
pub fn load(path: &std::path::Path) -> Result<Vec<Selected>> {
    let bytes = crate::data::files::read_capped(path, crate::data::files::Cap::new("catalog", MAX_CATALOG_BYTES))?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("cannot read catalog {}: not UTF-8", path.display()))?;
    parse(&text).with_context(|| format!("invalid catalog {}", path.display()))
}

pub fn parse(text: &str) -> Result<Vec<Selected>> {
    let catalog: Value = serde_json::from_str(text).map_err(|e| anyhow!("not valid JSON: {e}"))?;
    let streams = catalog.get("streams").and_then(Value::as_array).ok_or_else(|| anyhow!("no \"streams\" array"))?;
    let mut selected = Vec::new();
    for (i, entry) in streams.iter().enumerate() {
        let at = |what: &str| anyhow!("streams[{i}]: {what}");
        if let Some(stream) = entry.get("stream").filter(|s| s.is_object()) {
            // Airbyte: every listed stream is selected; sync_mode says how.
            let name = stream.get("name").and_then(Value::as_str).ok_or_else(|| at("stream.name is missing"))?;
            let incremental = match entry.get("sync_mode").and_then(Value::as_str) {
                Some("incremental") => true,
                Some("full_refresh") => false,
                Some(other) => {
                    return Err(at(&format!("unknown sync_mode {other:?} (expected full_refresh or incremental)")));
                }
                None => return Err(at("sync_mode is missing")),
            };
            selected.push(Selected { name: name.to_string(), incremental: Some(incremental), excluded: Vec::new() });
        } else if let Some(id) = entry.get("tap_stream_id").or(entry.get("stream")).and_then(Value::as_str) {
            // Singer: a stream is read when it (or its top-level metadata) says selected.
            let top = entry
                .get("metadata")
                .and_then(Value::as_array)
                .and_then(|m| m.iter().find(|m| m.get("breadcrumb").is_some_and(|b| b == &json!([]))))
                .and_then(|m| m.get("metadata"));
            let flag = |key: &str| top.and_then(|m| m.get(key)).or(entry.get(key));
            if flag("selected").and_then(Value::as_bool) != Some(true) {
                continue;
            }
            let method = flag("replication-method").or(entry.get("replication_method")).and_then(Value::as_str);
            let incremental = match method.map(str::to_ascii_uppercase).as_deref() {
                Some("INCREMENTAL") => Some(true),
                Some("FULL_TABLE") => Some(false),
                _ => None,
            };
            let excluded = entry
                .get("metadata")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|m| {
                    let crumb = m.get("breadcrumb")?.as_array()?;
                    let meta = m.get("metadata")?;
                    let deselected = meta.get("selected").and_then(Value::as_bool) == Some(false)
                        && meta.get("inclusion").and_then(Value::as_str) != Some("automatic");
                    match crumb.as_slice() {
                        [Value::String(p), Value::String(name)] if p == "properties" && deselected => {
                            Some(name.clone())
                        }
                        _ => None,
                    }
                })
                .collect();
            selected.push(Selected { name: id.to_string(), incremental, excluded });
        } else {
            return Err(at("neither an Airbyte configured stream nor a Singer stream"));
        }
    }
    if selected.is_empty() {
        bail!("the catalog selects no streams");
    }
    Ok(selected)
}

/// A Singer catalog for `--discover`, every stream selected.
pub fn singer_catalog(streams: &[crate::bindings::Stream]) -> Value {
    let entries: Vec<Value> = streams
        .iter()
        .map(|s| {
            let schema: Value = serde_json::from_str(&s.json_schema).unwrap_or(json!({}));
            let keys: Vec<&str> = s.primary_key.iter().filter(|k| k.len() == 1).map(|k| k[0].as_str()).collect();
            let cursor = s.cursor_field.as_ref().filter(|c| c.len() == 1).map(|c| c[0].clone());
            let mut top = json!({"inclusion": "available", "selected": true, "table-key-properties": keys});
            let mut entry =
                json!({"tap_stream_id": s.name, "stream": s.name, "schema": schema, "key_properties": keys});
            match &cursor {
                Some(c) => {
                    top["valid-replication-keys"] = json!([c]);
                    top["replication-method"] = json!("INCREMENTAL");
                    entry["replication_key"] = json!(c);
                    entry["replication_method"] = json!("INCREMENTAL");
                }
                None => {
                    top["forced-replication-method"] = json!("FULL_TABLE");
                    entry["replication_method"] = json!("FULL_TABLE");
                }
            }
            // Each property too, so Meltano can select fields: keys and the replication key are
            // always read (`automatic`), the others may be left out.
            let mut metadata = vec![json!({"breadcrumb": [], "metadata": top})];
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for name in properties.keys() {
                    let automatic = keys.contains(&name.as_str()) || cursor.as_deref() == Some(name.as_str());
                    let inclusion = if automatic { "automatic" } else { "available" };
                    metadata.push(json!({"breadcrumb": ["properties", name],
                        "metadata": {"inclusion": inclusion, "selected-by-default": true}}));
                }
            }
            entry["metadata"] = Value::Array(metadata);
            entry
        })
        .collect();
    json!({"streams": entries})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn airbyte_catalogs() {
        let c = parse(
            r#"{"streams":[{"stream":{"name":"items","json_schema":{},"supported_sync_modes":["full_refresh"]},
                "sync_mode":"incremental","destination_sync_mode":"append","cursor_field":["updated_at"],"extra":1}]}"#,
        )
        .unwrap();
        assert_eq!(c, [Selected { name: "items".into(), incremental: Some(true), excluded: vec![] }]);
        let e = parse(r#"{"streams":[{"stream":{"name":"a"},"sync_mode":"sometimes"}]}"#).unwrap_err();
        assert!(e.to_string().contains("streams[0]: unknown sync_mode"), "{e}");
        assert!(parse(r#"{"streams":[]}"#).unwrap_err().to_string().contains("no streams"));
        assert!(parse("[]").unwrap_err().to_string().contains("\"streams\""));
    }

    #[test]
    fn singer_catalogs_round_trip() {
        let stream = crate::bindings::Stream {
            name: "a".into(),
            json_schema: "{}".into(),
            primary_key: vec![vec!["id".into()]],
            cursor_field: Some(vec!["u".into()]),
        };
        let mut catalog = singer_catalog(&[
            stream.clone(),
            crate::bindings::Stream { name: "b".into(), cursor_field: None, ..stream },
        ]);
        assert_eq!(
            parse(&catalog.to_string()).unwrap(),
            [
                Selected { name: "a".into(), incremental: Some(true), excluded: vec![] },
                Selected { name: "b".into(), incremental: Some(false), excluded: vec![] }
            ]
        );
        catalog["streams"][0]["metadata"][0]["metadata"]["selected"] = json!(false);
        assert_eq!(parse(&catalog.to_string()).unwrap().len(), 1);
    }

    #[test]
    fn singer_properties_can_be_deselected_but_not_automatic_ones() {
        let stream = crate::bindings::Stream {
            name: "a".into(),
            json_schema: r#"{"properties": {"id": {}, "u": {}, "name": {}, "note": {}}}"#.into(),
            primary_key: vec![vec!["id".into()]],
            cursor_field: Some(vec!["u".into()]),
        };
        let mut catalog = singer_catalog(&[stream]);
        let metadata = catalog["streams"][0]["metadata"].as_array_mut().unwrap();
        let inclusion = |m: &Value| m["metadata"]["inclusion"].as_str().unwrap().to_string();
        let by_property: std::collections::BTreeMap<String, String> =
            metadata[1..].iter().map(|m| (m["breadcrumb"][1].as_str().unwrap().to_string(), inclusion(m))).collect();
        assert_eq!(by_property["id"], "automatic");
        assert_eq!(by_property["u"], "automatic");
        assert_eq!(by_property["name"], "available");
        for m in metadata[1..].iter_mut() {
            m["metadata"]["selected"] = json!(false);
        }
        let selected = parse(&catalog.to_string()).unwrap();
        assert_eq!(selected[0].excluded, ["name", "note"]);
    }
}
