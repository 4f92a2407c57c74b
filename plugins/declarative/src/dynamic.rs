//! `dynamic_streams` (DynamicDeclarativeStream) with a `ConfigComponentsResolver`, as the CDK
//! 7.39 expands them: a stream template copied once per entry of a list in the config (each
//! `stream_config`'s `configs_pointer`, its `default_values` after it; several stream configs
//! give their product), each copy changed by the `components_mapping`: the value template
//! evaluated with `components_values` (the entry) and set at `field_path` (`*` matches any key
//! or index), created there only with `create_or_update`. The streams join the manifest's own
//! before anything else runs, so they are read as any stream is.
//!
//! With an `HttpComponentsResolver` (source-airtable: a stream per table of every base) the
//! entries are what the resolver's retriever reads from the API, each with the slice it was
//! read in (`stream_slice`). Such a definition is [`Deferred`] when the manifest loads: its
//! retriever is checked and given its parameters as a stream's is, and the engine reads it the
//! first time a stream that is not among the manifest's own is asked for
//! (`Engine::manifest`), then loads the manifest again with the entries ([`Fetched`]).
//!
//! The config and the API's answers are untrusted as much as the manifest: the streams a
//! definition may make and the values they hold are bounded before they are built.

use crate::engine::kind;
use crate::interpolation::{Interpolator, PyType};
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Streams all dynamic definitions may make together.
pub const MAX_DYNAMIC_STREAMS: usize = 10_000;

/// What each `HttpComponentsResolver` read, by the definition's place in `dynamic_streams`:
/// `(stream_slice, components_values)` per record.
pub type Fetched = HashMap<usize, Vec<(Value, Value)>>;

/// A definition whose streams an API lists, not read yet.
pub struct Deferred {
    /// Its place in `dynamic_streams`.
    pub index: usize,
    /// Its resolver's retriever, as a stream named [`RESOLVER_STREAM`] and the index.
    pub resolver: Value,
    /// The stream template, references resolved (for the hosts it names).
    pub template: Value,
}

/// The name a resolver's retriever is read under (no stream of a manifest can take it: names
/// with this prefix are kept for it).
const RESOLVER_STREAM: &str = "__http_components_resolver_";

/// Whether the definition's streams are listed by an API (`HttpComponentsResolver`).
pub fn lists_from_api(definition: &Value) -> bool {
    kind(&definition["components_resolver"]) == "HttpComponentsResolver"
}

/// The resolver's retriever as a stream, to be checked and read as one.
pub fn resolver_stream(definition: &Value, index: usize) -> Value {
    let resolver = &definition["components_resolver"];
    let mut stream = json!({
        "type": "DeclarativeStream",
        "name": format!("{RESOLVER_STREAM}{index}"),
        "retriever": resolver.get("retriever").cloned().unwrap_or(Value::Null),
    });
    if let Some(params) = resolver.get("$parameters") {
        stream["$parameters"] = params.clone();
    }
    stream
}

/// The definition a resolver's stream was made for, from its name.
pub fn resolver_index(name: &str) -> Option<usize> {
    name.strip_prefix(RESOLVER_STREAM)?.parse().ok()
}

/// The streams of one `DynamicDeclarativeStream` (its template resolved, not yet given types
/// and parameters). `budget`: the values the streams may hold, taken from as they are made.
pub fn expand(
    definition: &Value,
    index: usize,
    interp: &Interpolator,
    config: &Value,
    listed: Option<&[(Value, Value)]>,
    budget: &mut usize,
) -> Result<Vec<Value>, String> {
    let at = format!("dynamic_streams[{index}]");
    let resolver = definition
        .get("components_resolver")
        .filter(|r| r.is_object())
        .ok_or_else(|| format!("{at}: Missing 'components_resolver' in dynamic definition"))?;
    let (entries, reading) = entries(resolver, config, listed, &at)?;
    let template = definition
        .get("stream_template")
        .filter(|t| t.is_object())
        .ok_or_else(|| format!("{at}: a DynamicDeclarativeStream needs a stream_template"))?;
    let params = resolver.get("$parameters").cloned().unwrap_or_else(|| json!({}));
    let mappings = resolver.get("components_mapping").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let size = nodes(template);
    let mut streams = Vec::with_capacity(entries.len());
    for (slice, values) in entries {
        *budget = budget.checked_sub(size.saturating_add(nodes(&values))).ok_or_else(|| {
            format!("{at}: the dynamic streams hold more than the manifest may once expanded (too many in the config?)")
        })?;
        let mut stream = template.clone();
        // One context per entry (the template in it is copied once); a mapping's own parameters
        // are added to the resolver's for that mapping alone.
        let mut ctx = json!({"parameters": params, "components_values": values, "stream_template_config": template});
        if reading == Reading::Api {
            ctx["stream_slice"] = slice;
        }
        for (m, mapping) in mappings.iter().enumerate() {
            let here = format!("{at}.components_resolver.components_mapping[{m}]");
            let mut own = params.clone();
            if let (Some(own), Some(Value::Object(more))) = (own.as_object_mut(), mapping.get("$parameters")) {
                own.extend(more.clone());
            }
            ctx["parameters"] = own;
            if reading == Reading::Api && mapping.get("condition").is_some_and(|c| !c.is_null()) {
                // The CDK's own words.
                return Err(format!("{here}: `condition` is only supported for     `ConfigComponentsResolver`"));
            }
            if let Some(Value::String(condition)) = mapping.get("condition").filter(|_| reading == Reading::Config)
                && !condition.is_empty()
                && !interp.eval_bool(condition, &ctx).map_err(|e| format!("{here}.condition: {e}"))?
            {
                continue;
            }
            let Some(Value::String(template_value)) = mapping.get("value") else {
                return Err(format!("{here}: Expected a string for value in mapping"));
            };
            let types: &[PyType] = match mapping.get("value_type").and_then(Value::as_str) {
                Some("string") => &[PyType::Str],
                Some("integer") => &[PyType::Int],
                Some("number") => &[PyType::Float, PyType::Int],
                Some("boolean") => &[PyType::Bool],
                _ => &[],
            };
            let value = interp
                .eval_with(template_value, &ctx, Some(template_value), types)
                .map_err(|e| format!("{here}.value: {e}"))?;
            let value = match (value, reading) {
                (Value::String(s), Reading::Parameters) => yaml_scalar(s),
                (Value::String(s), Reading::Config) if types != [PyType::Str] => yaml_scalar(s),
                (other, _) => other,
            };
            let path: Vec<String> = mapping
                .get("field_path")
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{here}: a ComponentMappingDefinition needs a field_path"))?
                .iter()
                .map(|p| match p {
                    Value::String(t) => interp.render(t, &ctx).map_err(|e| format!("{here}.field_path: {e}")),
                    other => Ok(crate::engine::plain(other)),
                })
                .collect::<Result<_, _>>()?;
            if path.last().is_some_and(|p| p == "**") {
                return Err(format!("{here}.field_path: a path cannot end with the '**' wildcard"));
            }
            let updated = set(&mut stream, &path, &value);
            // An API's resolver only sets what the template has.
            let create =
                mapping.get("create_or_update").and_then(Value::as_bool) == Some(true) && reading != Reading::Api;
            if updated == 0 && create && !crate::engine::is_py_false(&value) {
                create_at(&mut stream, &path, value);
            }
        }
        streams.push(stream);
    }
    Ok(streams)
}

/// Which entries a resolver makes streams from, each with its slice (an API's resolver's), and
/// how their values are read back (see `Reading`).
fn entries(
    resolver: &Value,
    config: &Value,
    listed: Option<&[(Value, Value)]>,
    at: &str,
) -> Result<(Vec<(Value, Value)>, Reading), String> {
    Ok(match kind(resolver) {
        "ConfigComponentsResolver" => {
            (stream_configs(resolver, config, at)?.into_iter().map(|e| (Value::Null, e)).collect(), Reading::Config)
        }
        "HttpComponentsResolver" => {
            let listed = listed.ok_or_else(|| format!("{at}: the streams the API lists were not read"))?;
            if listed.len() > MAX_DYNAMIC_STREAMS {
                return Err(format!(
                    "{at}: the API lists {} dynamic streams, more than {MAX_DYNAMIC_STREAMS}",
                    listed.len()
                ));
            }
            (listed.to_vec(), Reading::Api)
        }
        "ParametrizedComponentsResolver" => {
            let list = resolver["stream_parameters"].get("list_of_parameters_for_stream").and_then(Value::as_array);
            let list = list.ok_or_else(|| {
                format!("{at}.components_resolver: stream_parameters needs a list_of_parameters_for_stream")
            })?;
            if list.len() > MAX_DYNAMIC_STREAMS {
                return Err(format!("{at}: {} dynamic streams, more than {MAX_DYNAMIC_STREAMS}", list.len()));
            }
            (list.iter().map(|e| (Value::Null, e.clone())).collect(), Reading::Parameters)
        }
        "" => return Err(format!("{at}.components_resolver: Missing 'type' in components resolver configuration")),
        other => {
            return Err(format!(
                "{at}.components_resolver: {other} is not supported (ConfigComponentsResolver, \
                 ParametrizedComponentsResolver and HttpComponentsResolver are: the streams listed in the config, the \
                 manifest or by the API)"
            ));
        }
    })
}

/// How a resolver reads its mappings' values back: a ConfigComponentsResolver parses text as
/// YAML unless `value_type` is string, and has conditions; a ParametrizedComponentsResolver
/// parses every text as YAML, without conditions; an HttpComponentsResolver takes the value as
/// evaluated, without conditions or `create_or_update`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    Config,
    Parameters,
    Api,
}

/// The entries of the config the streams are made from: each stream config's list (a single
/// value is one entry) and its defaults, their product merged into one mapping each.
fn stream_configs(resolver: &Value, config: &Value, at: &str) -> Result<Vec<Value>, String> {
    let configs: Vec<&Value> = match resolver.get("stream_config") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => return Err(format!("{at}.components_resolver: a ConfigComponentsResolver needs a stream_config")),
    };
    let mut lists: Vec<Vec<Value>> = Vec::new();
    for stream_config in configs {
        let pointer: Vec<String> = stream_config
            .get("configs_pointer")
            .and_then(Value::as_array)
            .map(|p| p.iter().map(crate::engine::plain).collect())
            .unwrap_or_default();
        // dpath.get(config, path, default=[]).
        let found = pointer.iter().try_fold(config, |node, key| match node {
            Value::Object(map) => map.get(key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        });
        let mut entries = match found {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(one) => vec![one.clone()],
        };
        if let Some(Value::Array(defaults)) = stream_config.get("default_values") {
            entries.extend(defaults.iter().cloned());
        }
        lists.push(entries);
    }
    let combinations = lists.iter().try_fold(1usize, |n, l| n.checked_mul(l.len())).unwrap_or(usize::MAX);
    if combinations > MAX_DYNAMIC_STREAMS {
        return Err(format!("{at}: the config lists {combinations} dynamic streams, more than {MAX_DYNAMIC_STREAMS}"));
    }
    let mut product: Vec<Vec<(usize, &Value)>> = vec![Vec::new()];
    for list in &lists {
        product = product
            .into_iter()
            .flat_map(|combo| {
                list.iter().enumerate().map(move |(i, item)| {
                    let mut c = combo.clone();
                    c.push((i, item));
                    c
                })
            })
            .collect();
    }
    Ok(product.into_iter().map(|combo| merge(&combo)).collect())
}

/// `_merge_combination`: the mappings of a combination merged; anything else kept under
/// `source_config_<i>` as `[index, value]`.
fn merge(combo: &[(usize, &Value)]) -> Value {
    let mut out = Map::new();
    for (config_index, (item_index, item)) in combo.iter().enumerate() {
        match item {
            Value::Object(map) => out.extend(map.clone()),
            other => {
                out.entry(format!("source_config_{config_index}")).or_insert_with(|| json!([item_index, other]));
            }
        }
    }
    Value::Object(out)
}

/// `dpath.set`: the value set at every existing place the path matches (`*` any key or index,
/// `**` any number of them); how many were set.
fn set(node: &mut Value, path: &[String], value: &Value) -> usize {
    let Some((first, rest)) = path.split_first() else { return 0 };
    if first == "**" {
        // None of the levels here, or one more below (each child with the same path).
        let here = set(node, rest, value);
        let below: usize = match node {
            Value::Object(map) => map.values_mut().map(|c| set(c, path, value)).sum(),
            Value::Array(items) => items.iter_mut().map(|c| set(c, path, value)).sum(),
            _ => 0,
        };
        return here + below;
    }
    let children: Vec<&mut Value> = match node {
        Value::Object(map) if first == "*" => map.values_mut().collect(),
        Value::Object(map) => map.get_mut(first).into_iter().collect(),
        Value::Array(items) if first == "*" => items.iter_mut().collect(),
        Value::Array(items) => first.parse::<usize>().ok().and_then(|i| items.get_mut(i)).into_iter().collect(),
        _ => Vec::new(),
    };
    if rest.is_empty() {
        let n = children.len();
        children.into_iter().for_each(|c| *c = value.clone());
        return n;
    }
    children.into_iter().map(|c| set(c, rest, value)).sum()
}

/// `dpath.new`: the value at the path, mappings made where keys are missing.
fn create_at(node: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut here = node;
    for key in parents {
        if !here.is_object() && !here.is_array() {
            *here = Value::Object(Map::new());
        }
        here = match here {
            Value::Array(items) => match key.parse::<usize>() {
                Ok(i) if i < items.len() => &mut items[i],
                _ => return,
            },
            Value::Object(map) => map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new())),
            _ => return,
        };
    }
    match here {
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items[i] = value;
            }
        }
        other => *other = json!({ last.clone(): value }),
    }
}

/// `yaml.safe_load` of a rendered text, for the scalars a mapping renders: YAML 1.1's booleans
/// and nulls, integers and floats, a flow list or mapping that is JSON; any other text as it is.
fn yaml_scalar(text: String) -> Value {
    let t = text.trim();
    match t {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Value::Bool(true),
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(n) = t.parse::<i64>() {
        return json!(n);
    }
    if t.contains(['.', 'e', 'E'])
        && t.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c))
        && let Ok(f) = t.parse::<f64>()
    {
        return json!(f);
    }
    if (t.starts_with('[') || t.starts_with('{'))
        && let Ok(v) = serde_json::from_str::<Value>(t)
    {
        return v;
    }
    Value::String(text)
}

/// The values in a tree (for the budget).
fn nodes(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(nodes).sum::<usize>(),
        Value::Array(items) => 1 + items.iter().map(nodes).sum::<usize>(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(definition: Value, config: Value) -> Result<Vec<Value>, String> {
        let cfg = crate::config::Config::parse(&config.to_string(), "__m").unwrap().0;
        let interp = Interpolator::with_config(&cfg);
        expand(&definition, 0, &interp, &config, None, &mut 1_000_000)
    }

    fn definition(mappings: Value) -> Value {
        json!({"type": "DynamicDeclarativeStream",
            "stream_template": {"type": "DeclarativeStream", "name": "t", "retriever": {"requester": {"path": "x"}},
                "transformations": [{"type": "AddFields", "fields": [{"path": ["a"], "value": "v"}]}]},
            "components_resolver": {"type": "ConfigComponentsResolver",
                "stream_config": {"type": "StreamConfig", "configs_pointer": ["accounts"], "default_values": [{"id": 9, "name": "Nine"}]},
                "components_mapping": mappings}})
    }

    #[test]
    fn a_stream_per_config_entry_with_the_mappings_applied() {
        let mappings = json!([
            {"type": "ComponentMappingDefinition", "field_path": ["name"], "value": "s_{{ components_values.name | lower }}"},
            {"type": "ComponentMappingDefinition", "field_path": ["retriever", "requester", "path"], "value": "{{ components_values.id }}", "value_type": "string"},
            {"type": "ComponentMappingDefinition", "field_path": ["transformations", "0", "fields", "*", "value"], "value": "{{ components_values.id }}"},
            {"type": "ComponentMappingDefinition", "field_path": ["missing"], "value": "dropped"},
            {"type": "ComponentMappingDefinition", "field_path": ["made", "here"], "value": "yes", "create_or_update": true},
            {"type": "ComponentMappingDefinition", "field_path": ["name"], "value": "never", "condition": "{{ components_values.id > 100 }}"}
        ]);
        let streams = expanded(definition(mappings), json!({"accounts": [{"id": 1, "name": "One"}]})).unwrap();
        assert_eq!(streams.len(), 2, "the config's entry and the default");
        assert_eq!(streams[0]["name"], "s_one");
        assert_eq!(streams[1]["name"], "s_nine");
        assert_eq!(streams[0]["retriever"]["requester"]["path"], "1", "value_type string keeps text");
        assert_eq!(streams[0]["transformations"][0]["fields"][0]["value"], 1, "YAML reads the number");
        assert!(streams[0].get("missing").is_none(), "dpath.set does not create");
        assert_eq!(streams[0]["made"]["here"], true, "create_or_update creates; yes is YAML's true");
    }

    #[test]
    fn parametrized_streams_and_deep_wildcards() {
        let definition = json!({"type": "DynamicDeclarativeStream",
            "stream_template": {"type": "DeclarativeStream", "name": "t",
                "retriever": {"requester": {"name": "r"}, "record_selector": {"extractor": {"name": "e"}}}},
            "components_resolver": {"type": "ParametrizedComponentsResolver",
                "stream_parameters": {"type": "StreamParametersDefinition",
                    "list_of_parameters_for_stream": [{"name": "labels", "size": "5"}, {"name": "ads", "size": "7"}]},
                "components_mapping": [
                    {"type": "ComponentMappingDefinition", "field_path": ["**", "name"], "value": "{{ components_values.name }}"},
                    {"type": "ComponentMappingDefinition", "field_path": ["size"], "value": "{{ components_values.size }}",
                     "value_type": "string", "create_or_update": true, "condition": "{{ False }}"}]}});
        let streams = expanded(definition, json!({})).unwrap();
        assert_eq!(streams.len(), 2);
        assert_eq!(streams[1]["name"], "ads");
        assert_eq!(streams[1]["retriever"]["requester"]["name"], "ads", "** reaches every depth");
        assert_eq!(streams[1]["retriever"]["record_selector"]["extractor"]["name"], "ads");
        assert_eq!(streams[0]["size"], 5, "read back as YAML even as a string, and no condition");
    }

    #[test]
    fn too_many_streams_and_other_resolvers_are_refused() {
        let many: Vec<Value> = (0..MAX_DYNAMIC_STREAMS as i64).map(|i| json!({"id": i})).collect();
        let err = expanded(definition(json!([])), json!({"accounts": many})).unwrap_err();
        assert!(err.contains("more than 10000"), "{err}");
        let mut other = definition(json!([]));
        other["components_resolver"]["type"] = json!("NoSuchResolver");
        assert!(expanded(other, json!({})).unwrap_err().contains("NoSuchResolver is not supported"));
    }

    #[test]
    fn streams_an_api_lists_take_their_values_as_evaluated() {
        let mut http = definition(json!([
            {"type": "ComponentMappingDefinition", "field_path": ["name"],
             "value": "{{ stream_slice.extra_fields.base }}_{{ components_values.name }}"},
            {"type": "ComponentMappingDefinition", "field_path": ["retriever", "requester", "path"], "value": "{{ components_values.id }}"},
            {"type": "ComponentMappingDefinition", "field_path": ["made"], "value": "yes", "create_or_update": true},
        ]));
        http["components_resolver"]["type"] = json!("HttpComponentsResolver");
        let cfg = crate::config::Config::parse("{}", "__m").unwrap().0;
        let interp = Interpolator::with_config(&cfg);
        let listed = [(json!({"base_id": "b1", "extra_fields": {"base": "sales"}}), json!({"id": 7, "name": "deals"}))];
        let streams = expand(&http, 0, &interp, &json!({}), Some(&listed), &mut 1_000_000).unwrap();
        assert_eq!(streams[0]["name"], "sales_deals");
        assert_eq!(streams[0]["retriever"]["requester"]["path"], 7, "a literal as the CDK evaluates it, not YAML");
        assert!(streams[0].get("made").is_none(), "no create_or_update for an API's resolver");
        assert!(expand(&http, 0, &interp, &json!({}), None, &mut 1_000_000).unwrap_err().contains("were not read"));
        http["components_resolver"]["components_mapping"][0]["condition"] = json!("{{ True }}");
        let err = expand(&http, 0, &interp, &json!({}), Some(&listed), &mut 1_000_000).unwrap_err();
        assert!(err.contains("`condition` is only supported"), "{err}");
    }

    #[test]
    fn yaml_scalars_read_as_safe_load_reads_them() {
        for (text, want) in [
            ("12", json!(12)),
            ("1.5", json!(1.5)),
            ("no", json!(false)),
            ("~", Value::Null),
            ("[1, 2]", json!([1, 2])),
            ("a/b", json!("a/b")),
            ("%Y-%m", json!("%Y-%m")),
        ] {
            assert_eq!(yaml_scalar(text.to_string()), want, "{text}");
        }
    }
}
