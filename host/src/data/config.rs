//! The operator's config checked against the connector's spec (its JSON Schema) before any call
//! that uses it, as the Airbyte CDK does: an error names the field and the rule it breaks, not
//! whatever the connector's own parser says.

use serde_json::Value;

/// Errors named at most, of a config that breaks many rules.
const MAX_ERRORS: usize = 5;

/// Why the spec itself cannot check a config (a connector's bug, said as a warning), or the
/// config's errors.
pub enum Verdict {
    Valid,
    /// The config breaks the spec: one line per rule broken, naming the field.
    Invalid(String),
    /// The spec is no usable JSON Schema; the config is not checked.
    Unchecked(String),
}

/// Checks `config` against `spec`. Formats (`date-time`, `uri`, `email`, ...) are annotations,
/// as in the Airbyte CDK (it validates without a format checker): real specs pair `format: date`
/// with a `pattern` of another date form, and the CDK runs them.
pub fn check(spec: &Value, config: &Value) -> Verdict {
    // Bounded before it is built: depth (subschemas and $refs), patterns (a linear-time engine).
    let validator = match super::schema::validator(spec, false) {
        Ok(v) => v,
        Err(e) => return Verdict::Unchecked(format!("the connector's spec is not a usable JSON Schema: {e}")),
    };
    let mut errors: Vec<String> = Vec::new();
    let mut more = 0;
    for error in validator.iter_errors(config) {
        if errors.len() == MAX_ERRORS {
            more += 1;
            continue;
        }
        let path = error.instance_path().to_string();
        let field = path.trim_start_matches('/').replace('/', ".");
        let line = if field.is_empty() { format!("the config: {error}") } else { format!("field {field}: {error}") };
        errors.push(line);
    }
    if errors.is_empty() {
        return Verdict::Valid;
    }
    if more > 0 {
        errors.push(format!("and {more} more"));
    }
    Verdict::Invalid(format!("the config does not match the connector's spec: {}", errors.join("; ")))
}

/// The config with only its top-level `fields` (in the config's order; names it does not have
/// left out), for the calls that read a partition (contract 0.1.7, `partition-config`), and the
/// names of the fields left out. `None` when that leaves the config as it is, or it is not an
/// object.
pub fn only_fields(config: &str, fields: &[String]) -> Option<(String, Vec<String>)> {
    let Ok(Value::Object(mut all)) = serde_json::from_str::<Value>(config) else { return None };
    let mut left_out = Vec::new();
    all.retain(|name, _| {
        let kept = fields.iter().any(|f| f == name);
        if !kept {
            left_out.push(name.clone());
        }
        kept
    });
    (!left_out.is_empty()).then(|| (Value::Object(all).to_string(), left_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> Value {
        json!({
            "type": "object",
            "required": ["base_url"],
            "properties": {
                "base_url": {"type": "string", "format": "uri"},
                "page_size": {"type": "integer", "minimum": 1},
                "nested": {"type": "object", "properties": {"start": {"type": "string", "format": "date-time"}}}
            }
        })
    }

    #[test]
    fn errors_name_the_field_and_the_rule() {
        let invalid = |config: Value| match check(&spec(), &config) {
            Verdict::Invalid(m) => m,
            _ => panic!("{config} should be invalid"),
        };
        let m = invalid(json!({"base_url": "http://h", "page_size": "ten"}));
        assert!(m.contains("field page_size: \"ten\" is not of type \"integer\""), "{m}");
        // Formats are annotations.
        assert!(matches!(check(&spec(), &json!({"base_url": "not a url"})), Verdict::Valid));
        assert!(matches!(check(&spec(), &json!({"base_url": "h", "nested": {"start": "yesterday"}})), Verdict::Valid));
        let m = invalid(json!({"page_size": 0}));
        assert!(m.contains("the config: \"base_url\" is a required property"), "{m}");
        assert!(m.contains("field page_size: 0 is less than the minimum of 1"), "{m}");
        let m = invalid(json!({"base_url": "http://h", "nested": {"start": 5}}));
        assert!(m.contains("field nested.start") && m.contains("string"), "{m}");
        assert!(matches!(check(&spec(), &json!({"base_url": "http://h", "page_size": 5})), Verdict::Valid));
        assert!(matches!(check(&json!({"type": 5}), &json!({})), Verdict::Unchecked(_)));
    }

    #[test]
    fn a_partitions_config_keeps_the_fields_named_in_the_configs_order() {
        let config = r#"{"base_url": "http://h", "accounts": [1, 2, 3], "token": "t", "n": 1.50}"#;
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (only, left_out) = only_fields(config, &names(&["token", "base_url", "absent"])).unwrap();
        assert_eq!(only, r#"{"base_url":"http://h","token":"t"}"#);
        assert_eq!(left_out, ["accounts", "n"]);
        // Numbers as written (the connector parses them as it would the whole config).
        assert_eq!(only_fields(config, &names(&["n"])).unwrap().0, r#"{"n":1.50}"#);
        assert_eq!(only_fields(config, &names(&["base_url", "accounts", "token", "n"])), None, "nothing left out");
        assert_eq!(only_fields("[1]", &names(&["a"])), None);
        assert_eq!(only_fields(config, &[]).unwrap().0, "{}");
    }

    /// A spec with a 50,000-long `$ref` chain aborted the host (stack overflow) while the
    /// config validator was built; on a 256 KiB stack it is now a warning, the config unchecked.
    #[test]
    fn a_spec_too_deep_to_build_is_unchecked_not_a_crash() {
        let mut defs = serde_json::Map::new();
        for i in 0..50_000 {
            defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}));
        }
        defs.insert("d50000".into(), json!({"type": "string"}));
        let spec = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs});
        let verdict = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || match check(&spec, &json!({"a": "x"})) {
                Verdict::Unchecked(why) => why,
                _ => panic!("not unchecked"),
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(verdict.contains("levels deep"), "{verdict}");
    }
}
