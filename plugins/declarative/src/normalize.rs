//! `RecordSelector.schema_normalization: Default`, as the CDK 7.39's `TypeTransformer` with
//! `DefaultSchemaNormalization` does it: each value a schema's `properties` (or `items`) names
//! is cast to the one type the schema gives it, with Python's casts (`str(5)` is `"5"`,
//! `float("1.5")` is `1.5`, `"yes"` is `True`, a scalar where an array is wanted is `[x]`); a
//! cast that fails leaves the value as it was. Only `properties`, `items` and `$ref` are
//! followed (the CDK's validator has no other keywords), and the record itself is not cast.
//!
//! The record and the schema are both untrusted: the walk is bounded in depth (a `$ref` may
//! point back at itself), and it visits each value of the record at most once per schema path.

use crate::interpolation::py_str_json;
use serde_json::{Number, Value};

/// How deep the walk follows the schema (and `$ref`s within it).
const MAX_DEPTH: usize = 64;

/// Normalizes a record in place against its stream's schema.
pub fn normalize(record: &mut Value, schema: &Value) {
    walk(record, schema, schema, 0);
}

/// The schema's keywords in their order, as the CDK's validator visits them: `properties` casts
/// each named field then descends into it, `items` each item, `$ref` descends into its target.
fn walk(value: &mut Value, schema: &Value, root: &Value, depth: usize) {
    let Some(keywords) = schema.as_object() else { return };
    if depth > MAX_DEPTH {
        return;
    }
    for (keyword, sub) in keywords {
        match keyword.as_str() {
            "properties" => {
                let (Some(fields), Some(properties)) = (value.as_object_mut(), sub.as_object()) else { continue };
                for (name, field_schema) in properties {
                    if let Some(field) = fields.get_mut(name) {
                        cast(field, field_schema);
                        walk(field, field_schema, root, depth + 1);
                    }
                }
            }
            // A list of schemas (tuple items) or a boolean is not followed: the CDK fails on one.
            "items" if sub.is_object() => {
                let Some(items) = value.as_array_mut() else { continue };
                for item in items {
                    cast(item, sub);
                    walk(item, sub, root, depth + 1);
                }
            }
            "$ref" => {
                if let Some(target) = sub.as_str().and_then(|r| local_ref(root, r)) {
                    walk(value, target, root, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// A `#/...` reference within the schema (JSON pointer, `~0` and `~1` escapes).
fn local_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// `TypeTransformer.default_convert`: the value cast to the schema's one type (`null` aside).
fn cast(value: &mut Value, schema: &Value) {
    let Some(schema) = schema.as_object() else { return };
    let types = schema.get("type");
    let nullable = match types {
        Some(Value::String(t)) => t.contains("null"),
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    };
    if value.is_null() && nullable {
        return;
    }
    let target = match types {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            let mut others = ts.iter().filter(|t| *t != "null");
            match (others.next(), others.next()) {
                (Some(Value::String(t)), None) => t.as_str(),
                _ => return,
            }
        }
        _ => return,
    };
    let cast = match target {
        "string" => match &*value {
            Value::String(_) => None,
            other => Some(Value::String(py_str_json(other))),
        },
        "number" => py_float(value).map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "integer" => py_int(value),
        "boolean" => match &*value {
            Value::String(s) => str_to_bool(s).map(Value::Bool),
            other => Some(Value::Bool(!crate::engine::is_py_false(other))),
        },
        "array" => wrap_scalar(value, schema.get("items")),
        _ => None,
    };
    if let Some(cast) = cast {
        *value = cast;
    }
}

/// `float(x)`: numbers and booleans, and text Python reads as a float (an infinity or NaN is
/// written as `null`, as the CDK's serializer writes it).
fn py_float(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => {
            let digits = without_underscores(s.trim())?;
            let lower = digits.to_ascii_lowercase();
            let unsigned = lower.trim_start_matches(['+', '-']);
            // Rust reads a few spellings Python does not ("infinity" is both's, "inf" too).
            if unsigned.is_empty() || lower.len() - unsigned.len() > 1 {
                return None;
            }
            lower.parse::<f64>().ok()
        }
        _ => None,
    }
}

/// `int(x)`: integers, floats truncated, booleans, and base-10 integer text; what does not fit
/// 64 bits is left alone (Python's integers are unbounded).
fn py_int(value: &Value) -> Option<Value> {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => None,
        Value::Number(n) => {
            let f = n.as_f64()?.trunc();
            (f.is_finite() && f.abs() < 9.2e18).then(|| Value::from(f as i64))
        }
        Value::Bool(b) => Some(Value::from(i64::from(*b))),
        Value::String(s) => {
            let digits = without_underscores(s.trim())?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(&digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let digits = digits.strip_prefix('+').unwrap_or(&digits);
            digits.parse::<i64>().map(Value::from).or_else(|_| digits.parse::<u64>().map(Value::from)).ok()
        }
        _ => None,
    }
}

/// Python's numeric literals allow `_` between digits only.
fn without_underscores(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'_' {
            let around = |j: Option<usize>| j.and_then(|j| bytes.get(j)).is_some_and(u8::is_ascii_digit);
            if !around(i.checked_sub(1)) || !around(Some(i + 1)) {
                return None;
            }
        }
    }
    Some(text.replace('_', ""))
}

/// The CDK's `_strtobool`.
fn str_to_bool(text: &str) -> Option<bool> {
    match text.trim().to_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Some(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// A scalar (or `null`) where an array is wanted becomes a one-item array, when the items'
/// types are all simple ones (as a list: the CDK reads a `type` string as a set of letters).
fn wrap_scalar(value: &Value, items: Option<&Value>) -> Option<Value> {
    let simple = ["string", "number", "integer", "boolean", "null"];
    let item_types_simple = match items {
        None => true,
        Some(Value::Object(items)) => match items.get("type") {
            None => true,
            Some(Value::Array(ts)) => ts.iter().all(|t| t.as_str().is_some_and(|t| simple.contains(&t))),
            Some(Value::String(t)) => t.is_empty(),
            Some(_) => false,
        },
        Some(_) => false,
    };
    match value {
        Value::Array(_) | Value::Object(_) => None,
        scalar if item_types_simple => Some(Value::Array(vec![scalar.clone()])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn normalized(mut record: Value, schema: Value) -> Value {
        normalize(&mut record, &schema);
        record
    }

    #[test]
    fn values_are_cast_as_pythons_casts_cast_them() {
        let schema = json!({"type": "object", "properties": {
            "s": {"type": "string"}, "s_obj": {"type": ["null", "string"]}, "s_none": {"type": "string"},
            "n": {"type": "number"}, "n_bad": {"type": "number"}, "n_int": {"type": ["number", "null"]},
            "i": {"type": "integer"}, "i_float": {"type": "integer"}, "i_bad": {"type": "integer"},
            "b": {"type": "boolean"}, "b_num": {"type": "boolean"}, "b_bad": {"type": "boolean"},
            "a": {"type": "array"}, "a_typed": {"type": "array", "items": {"type": "string"}},
            "two": {"type": ["string", "integer"]}, "null_kept": {"type": ["null", "integer"]},
        }});
        let record = json!({
            "s": 5, "s_obj": {"k": [1, true, null]}, "s_none": null,
            "n": " 1_000.5 ", "n_bad": "1__0", "n_int": 3,
            "i": "+42", "i_float": -3.9, "i_bad": "4.5",
            "b": "Yes", "b_num": 0, "b_bad": "maybe",
            "a": "one", "a_typed": "one",
            "two": 5, "null_kept": null, "unnamed": 7,
        });
        assert_eq!(
            normalized(record, schema),
            json!({
                "s": "5", "s_obj": "{'k': [1, True, None]}", "s_none": "None",
                "n": 1000.5, "n_bad": "1__0", "n_int": 3.0,
                "i": 42, "i_float": -3, "i_bad": "4.5",
                "b": true, "b_num": false, "b_bad": "maybe",
                "a": ["one"], "a_typed": "one",
                "two": 5, "null_kept": null, "unnamed": 7,
            })
        );
    }

    #[test]
    fn nested_properties_items_and_refs_are_followed() {
        let schema = json!({
            "definitions": {"amount": {"type": "object", "properties": {"value": {"type": "number"}}}},
            "properties": {
                "lines": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
                "total": {"$ref": "#/definitions/amount"},
                "loop": {"$ref": "#"},
            }
        });
        let record = json!({"lines": [{"qty": "2"}, {"qty": 3.5}, "x"], "total": {"value": "7"}, "loop": {"total": {"value": "1"}}});
        assert_eq!(
            normalized(record, schema),
            json!({"lines": [{"qty": 2}, {"qty": 3}, "x"], "total": {"value": 7.0}, "loop": {"total": {"value": 1.0}}})
        );
    }

    #[test]
    fn a_schema_that_refers_to_itself_ends() {
        let schema = json!({"properties": {"a": {"$ref": "#"}}});
        let mut deep = json!({});
        for _ in 0..200 {
            deep = json!({"a": deep});
        }
        let _ = normalized(deep, schema);
    }
}
