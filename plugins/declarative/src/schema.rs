//! A stream's JSON schema, from its `schema_loader`: an `InlineSchemaLoader`'s as written, a
//! `DynamicSchemaLoader`'s built from what the API says of its fields, as the CDK 7.39 builds it
//! (source-airtable: a table's field list, each field's name and type mapped to an Airbyte type).
//! Discover shows it, and `schema_normalization: Default` casts records by it.

use crate::engine::{Engine, Scope, kind};
use crate::records::Shaper;
use serde_json::{Map, Value, json};
use sluice_guest::{Error, Result};

/// Fields a dynamic schema may have: the API's answer is untrusted, and every field costs a
/// condition per type mapping.
pub const MAX_FIELDS: usize = 10_000;

/// The schema of a stream: `None` without a loader that gives one (the records are then taken
/// as they come).
pub fn of(engine: &Engine, stream: &Value, name: &str) -> Result<Option<Value>> {
    let Some(loader) = stream.get("schema_loader") else { return Ok(None) };
    match kind(loader) {
        "InlineSchemaLoader" => Ok(loader.get("schema").cloned()),
        "DynamicSchemaLoader" => dynamic(engine, loader, name).map(Some),
        _ if crate::custom::is_custom_node(loader) => crate::custom::schema(engine, loader).map(Some),
        _ => Ok(None),
    }
}

/// `DynamicSchemaLoader.get_json_schema`: the first record its retriever reads; the list at
/// `schema_pointer` in it, each item a field (`key_pointer` its name, `type_pointer` its type,
/// mapped by `types_mapping`); the fields filtered and transformed as records are.
pub fn dynamic(engine: &Engine, loader: &Value, name: &str) -> Result<Value> {
    let at = format!("stream {name}: schema_loader");
    let fail = |why: String| Error::config(format!("{at}: {why}"));
    let retriever = json!({"name": format!("{name}.schema_loader"), "retriever": loader["retriever"]});
    let identifier = &loader["schema_type_identifier"];
    let ctx = engine.context(identifier, &Scope::default(), Vec::new());
    let pointer = |field: &str| -> Result<Option<Vec<String>>> {
        match identifier.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|p| match p {
                    Value::String(t) => engine.text(Some(p), &ctx).map_err(|e| fail(format!("{field} {t:?}: {e}"))),
                    other => Ok(crate::engine::plain(other)),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(fail(format!("schema_type_identifier.{field} must be a list, not {other}"))),
        }
    };
    let key_pointer =
        pointer("key_pointer")?.ok_or_else(|| fail("schema_type_identifier needs a key_pointer".into()))?;
    let type_pointer = pointer("type_pointer")?.filter(|p| !p.is_empty());
    let schema_pointer = pointer("schema_pointer")?.unwrap_or_default();
    let types_mapping = identifier.get("types_mapping").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);

    let record = crate::retrieve::first_record(engine, &retriever, &format!("{name}.schema_loader"))?;
    let definitions = match &record {
        None => Vec::new(),
        Some(record) => match dig(record, &schema_pointer) {
            Some(Value::Array(items)) => items.clone(),
            other => {
                return Err(fail(format!(
                    "the schema_pointer {schema_pointer:?} leads to {}, not a list of fields",
                    other.map_or_else(|| "nothing".to_string(), Value::to_string)
                )));
            }
        },
    };
    if definitions.len() > MAX_FIELDS {
        return Err(fail(format!("{} fields, more than {MAX_FIELDS}", definitions.len())));
    }
    let mut properties = Map::new();
    for definition in &definitions {
        let key = match dig(definition, &key_pointer) {
            Some(Value::String(key)) => key.clone(),
            other => {
                return Err(fail(format!(
                    "Expected key to be a string. Got {}",
                    other.map_or_else(|| "None".to_string(), crate::interpolation::py_str_json)
                )));
            }
        };
        let raw_type = match &type_pointer {
            Some(path) => dig(definition, path).cloned().unwrap_or_else(|| json!("string")),
            None => json!("string"),
        };
        let (mapped, from_map) = map_type(engine, types_mapping, raw_type, definition)?;
        let field_type = field_type(mapped, from_map).map_err(fail)?;
        properties.insert(key, field_type);
    }
    // `schema_filter` sees each field as a record of its own ({name: type}); the
    // transformations see them all as one.
    if let Some(filter) = loader.get("schema_filter").filter(|f| !f.is_null()) {
        let shaper = Shaper {
            engine,
            filter: Some(filter),
            transformations: &[],
            transform_first: false,
            schema: None,
            normalizer: None,
        };
        let one_each = properties.into_iter().map(|(k, v)| json!({k: v})).collect();
        properties = Map::new();
        for kept in shaper.shape(one_each, &Scope::default(), name)? {
            properties.extend(kept.as_object().cloned().unwrap_or_default());
        }
    }
    let transformations = loader.get("schema_transformations").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let shaper =
        Shaper { engine, filter: None, transformations, transform_first: false, schema: None, normalizer: None };
    let properties = shaper.shape(vec![Value::Object(properties)], &Scope::default(), name)?.pop().unwrap_or_default();
    Ok(json!({
        "$schema": "https://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": true,
        "properties": properties,
    }))
}

/// A field's JSON Schema from its mapped type: an Airbyte type's name, two of them (either), or
/// a complex type a `types_mapping` gave.
fn field_type(mapped: Value, from_map: bool) -> std::result::Result<Value, String> {
    Ok(match &mapped {
        Value::Array(two) if two.len() == 2 && two.iter().all(Value::is_string) => {
            json!({"oneOf": [airbyte_type(&two[0])?, airbyte_type(&two[1])?]})
        }
        Value::String(_) => airbyte_type(&mapped)?,
        Value::Object(_) if from_map => complex_type(&mapped, 0)?,
        other => {
            return Err(format!(
                "Invalid data type. Available string or two items list of string. Got {}.",
                crate::interpolation::py_str_json(other)
            ));
        }
    })
}

/// `dpath.get` along a plain path (keys and list indexes); the value itself for an empty path.
fn dig<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |node, key| match node {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// `_replace_type_if_not_valid`: the first mapping whose `current_type` is the field's type and
/// whose condition holds (every condition is evaluated, as in the CDK, with `config` and
/// `raw_schema`). Whether the type came from a mapping (only those may be complex types).
fn map_type(engine: &Engine, mapping: &[Value], raw: Value, definition: &Value) -> Result<(Value, bool)> {
    for types_map in mapping {
        let ctx = json!({"parameters": {}, "raw_schema": definition});
        let holds = match types_map.get("condition") {
            None | Some(Value::Null) => true,
            condition => engine.condition(condition, &ctx)?,
        };
        if holds && types_map.get("current_type") == Some(&raw) {
            return Ok((types_map.get("target_type").cloned().unwrap_or(Value::Null), true));
        }
    }
    Ok((raw, false))
}

/// The CDK's `AIRBYTE_DATA_TYPES`.
fn airbyte_type(name: &Value) -> std::result::Result<Value, String> {
    Ok(match name.as_str().unwrap_or_default() {
        "string" => json!({"type": ["null", "string"]}),
        "boolean" => json!({"type": ["null", "boolean"]}),
        "date" => json!({"type": ["null", "string"], "format": "date"}),
        "timestamp_without_timezone" => {
            json!({"type": ["null", "string"], "format": "date-time", "airbyte_type": "timestamp_without_timezone"})
        }
        "timestamp_with_timezone" => json!({"type": ["null", "string"], "format": "date-time"}),
        "time_without_timezone" => {
            json!({"type": ["null", "string"], "format": "time", "airbyte_type": "time_without_timezone"})
        }
        "time_with_timezone" => {
            json!({"type": ["null", "string"], "format": "time", "airbyte_type": "time_with_timezone"})
        }
        "integer" => json!({"type": ["null", "integer"]}),
        "number" => json!({"type": ["null", "number"]}),
        "array" => json!({"type": ["null", "array"]}),
        "object" => json!({"type": ["null", "object"]}),
        _ => return Err(format!("Invalid Airbyte data type: {}", crate::interpolation::py_str_json(name))),
    })
}

/// A `ComplexFieldType` (`field_type`, and `items` for an array, itself a type name or one).
fn complex_type(complex: &Value, depth: usize) -> std::result::Result<Value, String> {
    if depth > 16 {
        return Err("a complex field type nests deeper than 16 levels".into());
    }
    let field_type = complex.get("field_type").cloned().unwrap_or(Value::Null);
    let mut out = airbyte_type(&field_type)?;
    match complex.get("items") {
        None | Some(Value::Null) => {}
        Some(_) if field_type != "array" => {
            return Err("'items' can only be used when 'field_type' is an array.".into());
        }
        Some(items @ Value::String(_)) => out["items"] = airbyte_type(items)?,
        Some(items) => out["items"] = complex_type(items, depth + 1)?,
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_the_cdks_airbyte_types() {
        assert_eq!(airbyte_type(&json!("date")).unwrap(), json!({"type": ["null", "string"], "format": "date"}));
        assert!(airbyte_type(&json!("money")).unwrap_err().contains("Invalid Airbyte data type: money"));
        let nested = json!({"field_type": "array", "items": {"field_type": "array", "items": "string"}});
        assert_eq!(
            complex_type(&nested, 0).unwrap(),
            json!({"type": ["null", "array"], "items": {"type": ["null", "array"], "items": {"type": ["null", "string"]}}})
        );
        let wrong = json!({"field_type": "string", "items": "string"});
        assert!(complex_type(&wrong, 0).unwrap_err().contains("only be used when 'field_type' is an array"));
    }
}
