//! Custom components: a manifest's `components.py` classes (`class_name: source_x.components.Y`),
//! run by the host in the components runtime (plugins/components-py) through the
//! `sluice:components/custom` import. The engine builds a component once per instance (per
//! partition), the first time it is used, and calls it at the point the CDK would, with a page
//! or a batch of records at a time, never a record at a time.
//!
//! The host says custom code is there by putting its sha256 in the config under
//! [`CHECKSUMS_KEY`] (the key source-declarative-manifest verifies injected code with); without
//! it a stream that names a class is refused, naming the class.

use crate::engine::Engine;
use serde_json::{Map, Value, json};
use sluice_guest::{Error, Result};

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/components",
        world: "engine",
    });
}

/// Where the host puts the sha256 of the custom code it runs.
pub const CHECKSUMS_KEY: &str = "__injected_components_py_checksums";

/// The kinds of custom component the engine calls, with what the CDK calls them for. A custom
/// component of another kind refuses its stream, naming the class.
pub const RUN: &[(&str, &str)] = &[
    ("CustomRecordExtractor", "extract_records, a response at a time"),
    ("CustomDecoder", "decode, a response at a time"),
    ("CustomRecordFilter", "filter_records, a page at a time"),
    ("CustomTransformation", "transform, a page of records at a time"),
    ("CustomSchemaLoader", "get_json_schema, at discover"),
    ("CustomAuthenticator", "get_auth_header and get_request_params, a request at a time"),
    ("CustomSchemaNormalization", "transform, a page of records at a time"),
    ("CustomErrorHandler", "interpret_response, a response at a time"),
    ("CustomStateMigration", "should_migrate and migrate, on the state handed in"),
    ("CustomPaginationStrategy", "initial_token and next_page_token, a page at a time"),
    ("CustomPartitionRouter", "stream_slices when the partitions are listed, request options a request at a time"),
    // Waiting is the host's: it backs off 429s and 5xxs (Retry-After honoured) before the engine
    // sees them, for built-in strategies and custom ones alike; the class is built, not called.
    ("CustomBackoffStrategy", "nothing: the host backs off"),
];

/// The type of a custom component written without one, by the field it is in (the CDK's
/// `CUSTOM_COMPONENTS_MAPPING`).
const DEFAULT_TYPES: &[((&str, &str), &str)] = &[
    (("CompositeErrorHandler", "backoff_strategies"), "CustomBackoffStrategy"),
    (("DeclarativeStream", "retriever"), "CustomRetriever"),
    (("DeclarativeStream", "transformations"), "CustomTransformation"),
    (("DefaultErrorHandler", "backoff_strategies"), "CustomBackoffStrategy"),
    (("DefaultPaginator", "pagination_strategy"), "CustomPaginationStrategy"),
    (("HttpRequester", "authenticator"), "CustomAuthenticator"),
    (("HttpRequester", "error_handler"), "CustomErrorHandler"),
    (("RecordSelector", "extractor"), "CustomRecordExtractor"),
    (("SimpleRetriever", "partition_router"), "CustomPartitionRouter"),
];

/// [`DEFAULT_TYPES`] of the field `field` of a `kind`.
pub fn default_type(at: (&str, &str)) -> Option<&'static str> {
    DEFAULT_TYPES.iter().find(|(place, _)| *place == at).map(|(_, t)| *t)
}

/// Whether `map` is a custom component: a `class_name` on a `Custom*` type or on no type (on a
/// built-in type the CDK ignores it: source-freshdesk's HttpRequester names `SimpleRetriever`).
pub fn is_custom(map: &Map<String, Value>) -> bool {
    map.contains_key("class_name") && map.get("type").and_then(Value::as_str).is_none_or(|t| t.starts_with("Custom"))
}

/// [`is_custom`] of a node.
pub fn is_custom_node(node: &Value) -> bool {
    node.as_object().is_some_and(is_custom)
}

/// Why the engine cannot run the custom component `map` at `path` (`None`: it can). `present`:
/// whether the host runs custom code for this manifest.
pub fn refusal(map: &Map<String, Value>, path: &str, present: bool) -> Option<String> {
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("a custom component");
    let class = map.get("class_name").and_then(Value::as_str).unwrap_or("?");
    if !present {
        return Some(format!(
            "{path}: {kind} {class} is a custom Python component, and no components.py is beside the manifest \
             (Sluice runs one found there, sandboxed)"
        ));
    }
    match RUN.iter().any(|(k, _)| *k == kind) {
        true => None,
        false => {
            let run: Vec<&str> = RUN.iter().map(|(k, _)| *k).collect();
            Some(format!(
                "{path}: {kind} {class} is a custom component of a kind Sluice does not call yet (it calls {})",
                run.join(", ")
            ))
        }
    }
}

/// One call into custom code; its error names the class, the method and the line.
pub fn call(handle: u32, method: &str, args: &Value) -> Result<Value> {
    match bindings::sluice::components::custom::call(handle, method, &args.to_string()) {
        Ok(answer) => serde_json::from_str(&answer)
            .map_err(|e| Error::system(format!("custom code answered {method} with something that is not JSON: {e}"))),
        Err(error) => Err(failure(method, &error)),
    }
}

/// The error of a failed call: a system error (the connector's code failed) naming what failed.
fn failure(method: &str, error: &str) -> Error {
    let Ok(error) = serde_json::from_str::<Value>(error) else {
        return Error::system(format!("custom code failed in {method}: {error}"));
    };
    let text = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default();
    let who = match (text("class"), text("method")) {
        ("", "") => method.to_string(),
        ("", m) => m.to_string(),
        (c, "") => format!("{c}.{method}"),
        (c, m) => format!("{c}.{m}"),
    };
    let at = match text("location") {
        "" => String::new(),
        location => format!(" at {location}"),
    };
    let message = match text("exception") {
        "" => text("message").to_string(),
        exception => format!("{exception}: {}", text("message")),
    };
    match text("kind") {
        "refused" | "unavailable" => Error::config(format!("custom component {who}: {message}")),
        _ => Error::system(format!("custom component {who} failed{at}: {message}")),
    }
}

impl Engine {
    /// The handle of the custom component `definition` (built on first use in this instance,
    /// by its place in the manifest), with `kwargs` for its constructor.
    pub fn custom(&self, definition: &Value, kwargs: Option<Value>) -> Result<u32> {
        let key = definition as *const Value as usize;
        if let Some(handle) = self.customs.borrow().get(&key) {
            return Ok(*handle);
        }
        let mut args = json!({"definition": definition, "config": self.config.value()});
        if let Some(kwargs) = kwargs {
            args["kwargs"] = kwargs;
        }
        let made = call(0, "create", &args)?;
        let handle = made.get("handle").and_then(Value::as_u64).and_then(|h| u32::try_from(h).ok());
        let handle = handle.ok_or_else(|| Error::system(format!("custom code created no handle: {made}")))?;
        self.customs.borrow_mut().insert(key, handle);
        Ok(handle)
    }
}

/// A response as custom code sees it (a `requests.Response`): the body as text when it is
/// UTF-8, else in base64.
pub fn response(url: &str, status: u16, headers: &[(String, String)], body: &[u8]) -> Value {
    let mut value = json!({"status": status, "headers": headers, "url": url});
    match std::str::from_utf8(body) {
        Ok(text) => value["body"] = Value::from(text),
        Err(_) => {
            use base64::Engine as _;
            value["body_base64"] = Value::from(base64::engine::general_purpose::STANDARD.encode(body));
        }
    }
    value
}

/// The `records` list of an answer.
pub fn records(answer: Value, method: &str) -> Result<Vec<Value>> {
    match answer {
        Value::Object(mut map) => match map.remove("records").or_else(|| map.remove("items")) {
            Some(Value::Array(records)) => Ok(records),
            _ => Err(Error::system(format!("custom code answered {method} without a list of records"))),
        },
        _ => Err(Error::system(format!("custom code answered {method} without a list of records"))),
    }
}

/// `RecordExtractor.extract_records(response)` of a custom extractor.
pub fn extract_records(
    engine: &Engine,
    extractor: &Value,
    answer: &sluice_guest::http::Response,
) -> Result<Vec<Value>> {
    let handle = engine.custom(extractor, None)?;
    let args = json!({"response": response(&answer.url, answer.status, &answer.headers, &answer.body)});
    records(call(handle, "extract_records", &args)?, "extract_records")
}

/// The documents of a response: `Decoder.decode(response)` of a custom decoder, else as the
/// built-in decoders read them.
pub fn decode(engine: &Engine, decoder: Option<&Value>, answer: &sluice_guest::http::Response) -> Result<Vec<Value>> {
    match decoder.filter(|d| is_custom_node(d)) {
        Some(decoder) => {
            let handle = engine.custom(decoder, None)?;
            let args = json!({"response": response(&answer.url, answer.status, &answer.headers, &answer.body)});
            records(call(handle, "decode", &args)?, "decode")
        }
        None => crate::records::decode(decoder, &answer.body, &answer.url),
    }
}

/// `SchemaLoader.get_json_schema()` of a custom schema loader.
pub fn schema(engine: &Engine, loader: &Value) -> Result<Value> {
    let handle = engine.custom(loader, None)?;
    let answer = call(handle, "get_json_schema", &json!({}))?;
    match answer.get("schema") {
        Some(schema @ Value::Object(_)) => Ok(schema.clone()),
        _ => Err(Error::system(format!("custom schema loader answered without a schema object: {answer}"))),
    }
}

/// A stream slice as custom code takes it (`StreamSlice`).
fn slice(scope: &crate::engine::Scope) -> Value {
    json!({"partition": scope.partition, "cursor_slice": scope.interval, "extra_fields": scope.extra})
}

/// `RecordFilter.filter_records` of a custom filter, over a page.
pub fn filter_records(
    engine: &Engine,
    filter: &Value,
    records: Vec<Value>,
    scope: &crate::engine::Scope,
) -> Result<Vec<Value>> {
    let handle = engine.custom(filter, None)?;
    let args = json!({"records": records, "stream_slice": slice(scope), "next_page_token": scope.next_page_token});
    crate::custom::records(call(handle, "filter_records", &args)?, "filter_records")
}

/// `RecordTransformation.transform` of a custom transformation, over a page.
pub fn transform(
    engine: &Engine,
    transformation: &Value,
    records: Vec<Value>,
    scope: &crate::engine::Scope,
) -> Result<Vec<Value>> {
    let handle = engine.custom(transformation, None)?;
    let args = json!({"records": records, "stream_slice": slice(scope)});
    crate::custom::records(call(handle, "transform", &args)?, "transform")
}

/// What a custom authenticator adds to a request: `get_auth_header()` and
/// `get_request_params()`, as the CDK's HttpRequester asks them of its authenticator.
pub fn credentials(engine: &Engine, auth: &Value) -> Result<crate::auth::Credentials> {
    let handle = engine.custom(auth, None)?;
    let pairs = |value: Option<&Value>, what: &str| -> Result<Vec<(String, String)>> {
        match value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(map)) => Ok(map.iter().map(|(k, v)| (k.clone(), crate::engine::plain(v))).collect()),
            Some(other) => Err(Error::system(format!("the custom authenticator's {what} is not a mapping: {other}"))),
        }
    };
    let headers = call(handle, "get_auth_header", &json!({}))?;
    let params = call(handle, "get_request_params", &json!({}))?;
    Ok(crate::auth::Credentials {
        headers: pairs(headers.get("headers"), "get_auth_header")?,
        params: pairs(params.get("value"), "get_request_params")?,
    })
}

/// `TypeTransformer.transform(record, schema)` of a custom schema normalization, over a page.
pub fn normalize(engine: &Engine, normalizer: &Value, records: Vec<Value>, schema: &Value) -> Result<Vec<Value>> {
    let handle = engine.custom(normalizer, None)?;
    crate::custom::records(call(handle, "normalize", &json!({"records": records, "schema": schema}))?, "normalize")
}

/// `ErrorHandler.interpret_response(response)` of a custom error handler: its resolution
/// (`response_action`, `failure_type`, `error_message`).
pub fn interpret_response(engine: &Engine, handler: &Value, answer: &sluice_guest::http::Response) -> Result<Value> {
    let handle = engine.custom(handler, None)?;
    let args = json!({"response": response(&answer.url, answer.status, &answer.headers, &answer.body)});
    call(handle, "interpret_response", &args)
}

/// `StateMigration.should_migrate(state)` and `migrate(state)` of a custom migration, built with
/// the stream it migrates (`declarative_stream`, as the CDK builds it); `None` when it leaves
/// the state as it is.
pub fn migrate(engine: &Engine, migration: &Value, stream: &Value, state: &Value) -> Result<Option<Value>> {
    let handle = engine.custom(migration, Some(json!({"declarative_stream": stream})))?;
    let answer = call(handle, "migrate", &json!({"state": state, "check": true}))?;
    match (answer.get("migrated").and_then(Value::as_bool), answer.get("state")) {
        (Some(false), _) => Ok(None),
        (Some(true), Some(state)) => Ok(Some(state.clone())),
        _ => Err(Error::system(format!("custom state migration answered without a state: {answer}"))),
    }
}

/// A token as the CDK's DefaultPaginator takes it: `None` (no more pages) for a null or empty one.
fn token(answer: Value) -> Option<Value> {
    match answer.get("token") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::Object(o)) if o.is_empty() => None,
        Some(token) => Some(token.clone()),
    }
}

/// `PaginationStrategy.initial_token` of a custom strategy: the first page's token.
pub fn initial_token(engine: &Engine, strategy: &Value) -> Result<Option<Value>> {
    let handle = engine.custom(strategy, None)?;
    Ok(token(call(handle, "initial_token", &json!({}))?))
}

/// `PaginationStrategy.next_page_token(response, last_page_size, last_record,
/// last_page_token_value)` of a custom strategy: the next page's token, `None` after the last.
pub fn next_page_token(
    engine: &Engine,
    strategy: &Value,
    answer: &sluice_guest::http::Response,
    last_page_size: usize,
    last_record: &Value,
    last_token: Option<&Value>,
) -> Result<Option<Value>> {
    let handle = engine.custom(strategy, None)?;
    let args = json!({
        "response": response(&answer.url, answer.status, &answer.headers, &answer.body),
        "last_page_size": last_page_size,
        "last_record": if last_record.is_null() { Value::Null } else { last_record.clone() },
        "last_page_token_value": last_token,
    });
    Ok(token(call(handle, "next_page_token", &args)?))
}

/// The slices of a custom partition router, `PartitionRouter.stream_slices()`. One that reads
/// parent streams (a SubstreamPartitionRouter's subclass, with `parent_stream_configs`) is handed
/// the slices its base class makes, the parents read by the engine as for the built-in router,
/// for its `super().stream_slices()`.
pub fn router_slices(
    engine: &Engine,
    router: &Value,
    stream: &str,
    index: usize,
    parents: Option<&mut crate::slicing::Parents>,
) -> Result<Vec<crate::slicing::Slice>> {
    let handle = engine.custom(router, None)?;
    let mut args = json!({});
    if router.get("parent_stream_configs").is_some() {
        let mut base = router.clone();
        base["type"] = Value::from("SubstreamPartitionRouter");
        let slices = crate::slicing::router_slices(engine, &base, stream, index, parents)?;
        let slices: Vec<Value> = slices
            .into_iter()
            .map(|(partition, extra)| json!({"partition": partition, "cursor_slice": {}, "extra_fields": extra}))
            .collect();
        args["parent_slices"] = Value::Array(slices);
    }
    let answer = call(handle, "stream_slices", &args)?;
    let Some(Value::Array(slices)) = answer.get("slices") else {
        return Err(Error::system(format!("custom partition router answered without slices: {answer}")));
    };
    let map = |v: Option<&Value>| v.and_then(Value::as_object).cloned().unwrap_or_default();
    Ok(slices
        .iter()
        .map(|slice| match slice.get("partition") {
            Some(partition) => (map(Some(partition)), map(slice.get("extra_fields"))),
            None => (map(Some(slice)), Map::new()),
        })
        .collect())
}

/// The request options a custom router adds for a partition: its `get_request_params`,
/// `get_request_headers` and `get_request_body_json` for the slice.
pub fn inject_router(
    engine: &Engine,
    router: &Value,
    scope: &crate::engine::Scope,
    options: &mut crate::requester::Options,
) -> Result<()> {
    let handle = engine.custom(router, None)?;
    let args = json!({"stream_slice": slice(scope), "next_page_token": scope.next_page_token});
    let pairs = |value: Value| -> Vec<(String, String)> {
        match value.get("value") {
            Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.clone(), crate::engine::plain(v))).collect(),
            _ => Vec::new(),
        }
    };
    options.params.extend(pairs(call(handle, "get_request_params", &args)?));
    options.headers.extend(pairs(call(handle, "get_request_headers", &args)?));
    if let Some(Value::Object(body)) = call(handle, "get_request_body_json", &args)?.get("value") {
        options.body_json.extend(body.clone());
    }
    Ok(())
}
