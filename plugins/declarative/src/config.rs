//! The operator's config as the engine holds it: each top-level field kept as its JSON text and
//! parsed when a template (or the engine) first names it. Every partition runs in a fresh
//! instance, which loads the config again; a config holding long lists (a ListPartitionRouter's
//! keys) made each partition pay for parsing every list, so a run's cost grew with the square of
//! its partitions. Now a partition parses what its templates use.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use std::cell::OnceCell;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// The config's top-level fields, in their order, each parsed once when first used.
pub struct Config {
    fields: Arc<Fields>,
    whole: OnceCell<Value>,
}

/// The fields, shared with the templates' view of them ([`Config::template_value`]).
#[derive(Debug)]
struct Fields {
    raw: Vec<(String, Box<RawValue>)>,
    parsed: Vec<OnceLock<Value>>,
}

impl Config {
    /// Reads a config text (a JSON object), taking out the field `take` (the manifest), parsed.
    pub fn parse(text: &str, take: &str) -> Result<(Config, Option<Value>), String> {
        let Object(mut raw) = serde_json::from_str::<Object>(text).map_err(|e| e.to_string())?;
        let taken = match raw.iter().position(|(k, _)| k == take) {
            Some(i) => Some(serde_json::from_str::<Value>(raw.remove(i).1.get()).map_err(|e| e.to_string())?),
            None => None,
        };
        let parsed = raw.iter().map(|_| OnceLock::new()).collect();
        Ok((Config { fields: Arc::new(Fields { raw, parsed }), whole: OnceCell::new() }, taken))
    }

    /// One top-level field.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// Whether `key` was parsed (named by a template or the engine), for tests.
    #[cfg(test)]
    pub fn was_parsed(&self, key: &str) -> bool {
        self.fields.index(key).is_some_and(|i| self.fields.parsed[i].get().is_some())
    }

    /// The whole config as one value (parsed at the first call: checking it against the spec, a
    /// selector that walks it).
    pub fn value(&self) -> &Value {
        self.whole.get_or_init(|| {
            let map = self.fields.raw.iter().enumerate().map(|(i, (k, _))| (k.clone(), self.fields.at(i).clone()));
            Value::Object(map.collect())
        })
    }

    /// `config` as templates see it: a mapping whose fields are converted when looked up.
    pub fn template_value(&self, convert: fn(&Value) -> minijinja::Value) -> minijinja::Value {
        let converted = self.fields.raw.iter().map(|_| OnceLock::new()).collect();
        minijinja::Value::from_object(TemplateConfig { fields: self.fields.clone(), convert, converted })
    }
}

impl Fields {
    fn index(&self, key: &str) -> Option<usize> {
        self.raw.iter().position(|(k, _)| k == key)
    }

    fn at(&self, i: usize) -> &Value {
        // The text was checked to be JSON when the config was read.
        self.parsed[i].get_or_init(|| serde_json::from_str(self.raw[i].1.get()).unwrap_or(Value::Null))
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.index(key).map(|i| self.at(i))
    }
}

/// The templates' `config`: a minijinja mapping over the lazily parsed fields.
#[derive(Debug)]
struct TemplateConfig {
    fields: Arc<Fields>,
    convert: fn(&Value) -> minijinja::Value,
    converted: Vec<OnceLock<minijinja::Value>>,
}

impl minijinja::value::Object for TemplateConfig {
    fn repr(self: &Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let i = self.fields.index(key.as_str()?)?;
        Some(self.converted[i].get_or_init(|| (self.convert)(self.fields.at(i))).clone())
    }

    fn enumerate(self: &Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Values(
            self.fields.raw.iter().map(|(k, _)| minijinja::Value::from(k.as_str())).collect(),
        )
    }
}

/// A JSON object's fields as text, in order; a repeated key keeps its first place and its last
/// value, as serde_json's map does.
struct Object(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Object;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
                let mut fields: Vec<(String, Box<RawValue>)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    match fields.iter_mut().find(|(k, _)| *k == key) {
                        Some(field) => field.1 = value,
                        None => fields.push((key, value)),
                    }
                }
                Ok(Object(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_parse_when_named_and_the_manifest_is_taken_out() {
        let text = r#"{"base_url": "http://h", "__m": {"streams": []}, "ids": [1, 2, 3], "base_url": "http://last"}"#;
        let (config, manifest) = Config::parse(text, "__m").unwrap();
        assert_eq!(manifest, Some(json!({"streams": []})));
        assert_eq!(config.get("base_url"), Some(&json!("http://last")));
        assert!(config.fields.parsed[1].get().is_none(), "ids is not parsed until named");
        assert_eq!(config.get("ids"), Some(&json!([1, 2, 3])));
        assert_eq!(config.value(), &json!({"base_url": "http://last", "ids": [1, 2, 3]}));
        assert!(Config::parse("[1]", "__m").is_err());
        assert!(Config::parse(r#"{"a": [1,}"#, "__m").is_err());
    }
}
