//! The config against the manifest's `connection_specification`, as the CDK checks it before
//! any command: required fields, types, enums and constants, down nested objects and arrays. The
//! host checks the config with a full JSON Schema validator too; this is for a config that reaches
//! the engine directly (with the manifest in it), so it fails as a config error naming the field
//! rather than as a request that goes wrong.

use serde_json::Value;

pub fn check(schema: &Value, config: &Value) -> Result<(), String> {
    walk(schema, config, &At::Root)
}

/// Where in the config a value is, written out only for an error: a config of long lists is
/// checked in every instance, and formatting each element's path cost more than the check.
enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn is_root(&self) -> bool {
        matches!(self, At::Root)
    }

    fn path(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Key(At::Root, key) => key.to_string(),
            At::Key(parent, key) => format!("{}.{key}", parent.path()),
            At::Index(parent, i) => format!("{}[{i}]", parent.path()),
        }
    }
}

fn walk(schema: &Value, value: &Value, at: &At) -> Result<(), String> {
    let Some(schema) = schema.as_object() else { return Ok(()) };
    let name = || if at.is_root() { "the config".to_string() } else { format!("{:?}", at.path()) };
    if let Some(types) = schema.get("type") {
        let fits = match types {
            Value::String(t) => is_type(value, t),
            Value::Array(ts) => {
                let mut named = false;
                ts.iter().filter_map(Value::as_str).any(|t| {
                    named = true;
                    is_type(value, t)
                }) || !named
            }
            _ => true,
        };
        if !fits {
            let named: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                _ => types.as_array().into_iter().flatten().filter_map(Value::as_str).collect(),
            };
            return Err(format!("{} must be {}, not {}", name(), named.join(" or "), describe(value)));
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        return Err(format!("{} must be one of {}, not {value}", name(), Value::Array(options.clone())));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!("{} must be {constant}, not {value}", name()));
    }
    if let Value::Object(map) = value {
        for field in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !map.contains_key(field) {
                return Err(format!(
                    "{field:?} is required{}",
                    if at.is_root() { String::new() } else { format!(" in {:?}", at.path()) }
                ));
            }
        }
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (k, sub) in properties {
                if let Some(v) = map.get(k) {
                    walk(sub, v, &At::Key(at, k))?;
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, v) in items.iter().enumerate() {
            walk(item_schema, v, &At::Index(at, i))?;
        }
    }
    Ok(())
}

fn is_type(value: &Value, t: &str) -> bool {
    match t {
        "string" => value.is_string(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_types_and_enums_are_checked_by_name() {
        let spec = json!({"type": "object", "required": ["base_url"], "properties": {
            "base_url": {"type": "string"},
            "page_size": {"type": "integer"},
            "auth": {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a", "b"]}}},
            "ids": {"type": "array", "items": {"type": "integer"}}
        }});
        assert!(check(&spec, &json!({"base_url": "x", "page_size": 5, "auth": {"kind": "a"}, "ids": [1]})).is_ok());
        assert_eq!(check(&spec, &json!({})).unwrap_err(), "\"base_url\" is required");
        assert_eq!(check(&spec, &json!({"base_url": 1})).unwrap_err(), "\"base_url\" must be string, not a number");
        assert_eq!(
            check(&spec, &json!({"base_url": "x", "page_size": 1.5})).unwrap_err(),
            "\"page_size\" must be integer, not a number"
        );
        assert!(
            check(&spec, &json!({"base_url": "x", "auth": {"kind": "c"}}))
                .unwrap_err()
                .contains("\"auth.kind\" must be one of")
        );
        assert_eq!(
            check(&spec, &json!({"base_url": "x", "auth": {}})).unwrap_err(),
            "\"kind\" is required in \"auth\""
        );
        assert!(check(&spec, &json!({"base_url": "x", "ids": ["a"]})).unwrap_err().contains("ids[0]"));
    }
}
