//! Loading a manifest as the CDK does: `$ref` and `#/...` references resolved, `$parameters`
//! propagated down to every component with default component types filled in, and every
//! component type checked against what this engine supports — so an unsupported manifest is refused at load, naming the component and its
//! path, and never half-run.
//!
//! A manifest is untrusted input: references can expand it exponentially, so the resolved tree is
//! bounded in size and depth.

use crate::delegation::Delegating;
use crate::engine::kind;
use crate::interpolation::Interpolator;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Nodes the resolved manifest may have (a few MB of JSON); more is a reference bomb.
const MAX_NODES: usize = 2_000_000;
/// Nesting the resolver follows.
const MAX_DEPTH: usize = 128;

/// The component types this engine runs, with the fields each may have (besides `type` and
/// `$parameters`). A field not listed is refused at load, so no setting is silently ignored.
pub const SUPPORTED: &[(&str, &[&str])] = &[
    (
        "DeclarativeSource",
        &[
            "version",
            "check",
            "streams",
            "spec",
            "definitions",
            "schemas",
            "metadata",
            "description",
            "concurrency_level",
            "api_budget",
            "max_concurrent_async_job_count",
        ],
    ),
    // A non-empty `dynamic_streams_check_configs` is refused by `check` (lib.rs).
    ("CheckStream", &["stream_names", "dynamic_streams_check_configs"]),
    ("CheckDynamicStream", &["stream_count", "use_check_availability"]),
    ("Spec", &["connection_specification", "documentation_url", "advanced_auth", "config_normalization_rules"]),
    (
        "DeclarativeStream",
        &[
            "name",
            "primary_key",
            "retriever",
            "incremental_sync",
            "schema_loader",
            "transformations",
            "state_migrations",
        ],
    ),
    ("StateDelegatingStream", &["name", "full_refresh_stream", "incremental_stream", "api_retention_period"]),
    (
        "SimpleRetriever",
        &[
            "requester",
            "record_selector",
            "paginator",
            "partition_router",
            "ignore_stream_slicer_parameters_on_paginated_requests",
            "decoder",
            "pagination_reset",
            "name",
            "primary_key",
        ],
    ),
    ("PaginationReset", &["action", "limits"]),
    ("PaginationResetLimits", &["number_of_records"]),
    (
        "AsyncRetriever",
        &[
            "record_selector",
            "status_mapping",
            "creation_requester",
            "polling_requester",
            "download_target_requester",
            "download_requester",
            "download_paginator",
            "abort_requester",
            "delete_requester",
            "partition_router",
            "decoder",
            "download_decoder",
            "status_extractor",
            "download_target_extractor",
            "download_extractor",
            "polling_job_timeout",
            "name",
            "primary_key",
        ],
    ),
    ("AsyncJobStatusMap", &["running", "completed", "failed", "timeout", "skipped"]),
    (
        "HttpRequester",
        &[
            "url_base",
            "path",
            "url",
            "authenticator",
            "http_method",
            "request_parameters",
            "request_headers",
            "request_body_json",
            "request_body_data",
            "error_handler",
            "use_cache",
            "name",
            "primary_key",
        ],
    ),
    (
        "RecordSelector",
        &["extractor", "record_filter", "schema_normalization", "transform_before_filtering", "name", "primary_key"],
    ),
    ("DpathExtractor", &["field_path", "decoder", "name", "primary_key"]),
    ("RecordFilter", &["condition", "name", "primary_key"]),
    (
        "DefaultPaginator",
        &["pagination_strategy", "page_token_option", "page_size_option", "decoder", "url_base", "name", "primary_key"],
    ),
    ("NoPagination", &["name", "primary_key"]),
    ("CursorPagination", &["cursor_value", "stop_condition", "page_size", "decoder", "name", "primary_key"]),
    ("OffsetIncrement", &["page_size", "inject_on_first_request", "name", "primary_key"]),
    ("PageIncrement", &["page_size", "start_from_page", "inject_on_first_request", "name", "primary_key"]),
    ("RequestOption", &["inject_into", "field_name", "field_path", "name", "primary_key"]),
    ("RequestPath", &["name", "primary_key"]),
    (
        "DatetimeBasedCursor",
        &[
            "cursor_field",
            "datetime_format",
            "start_datetime",
            "end_datetime",
            "step",
            "cursor_granularity",
            "start_time_option",
            "end_time_option",
            "partition_field_start",
            "partition_field_end",
            "cursor_datetime_formats",
            "lookback_window",
            "is_compare_strictly",
            "is_data_feed",
            "is_client_side_incremental",
            "global_substream_cursor",
            "name",
            "primary_key",
        ],
    ),
    // plugins/declarative/src/counting.rs
    ("IncrementingCountCursor", &["cursor_field", "start_value", "start_value_option", "name", "primary_key"]),
    ("MinMaxDatetime", &["datetime", "datetime_format", "min_datetime", "max_datetime", "name", "primary_key"]),
    ("ListPartitionRouter", &["cursor_field", "values", "request_option", "name", "primary_key"]),
    // Applied to a state handed in (plugins/declarative/src/state.rs).
    ("LegacyToPerPartitionStateMigration", &[]),
    ("SubstreamPartitionRouter", &["parent_stream_configs", "name", "primary_key"]),
    (
        "ParentStreamConfig",
        &[
            "stream",
            "parent_key",
            "partition_field",
            "request_option",
            "incremental_dependency",
            "extra_fields",
            "lazy_read_pointer",
            "name",
            "primary_key",
        ],
    ),
    ("InlineSchemaLoader", &["schema", "name", "primary_key"]),
    // Read from the API (plugins/declarative/src/schema.rs).
    (
        "DynamicSchemaLoader",
        &["retriever", "schema_type_identifier", "schema_transformations", "schema_filter", "name", "primary_key"],
    ),
    (
        "SchemaTypeIdentifier",
        &["schema_pointer", "key_pointer", "type_pointer", "types_mapping", "name", "primary_key"],
    ),
    ("TypesMap", &["target_type", "current_type", "condition", "name", "primary_key"]),
    ("AddFields", &["fields", "condition", "name", "primary_key"]),
    ("AddedFieldDefinition", &["path", "value", "value_type", "name", "primary_key"]),
    ("RemoveFields", &["field_pointers", "condition", "name", "primary_key"]),
    ("KeysToLower", &["name", "primary_key"]),
    ("KeysToSnakeCase", &["name", "primary_key"]),
    ("KeysReplace", &["old", "new", "name", "primary_key"]),
    ("FlattenFields", &["flatten_lists", "name", "primary_key"]),
    (
        "DpathFlattenFields",
        &["field_path", "delete_origin_value", "replace_record", "key_transformation", "name", "primary_key"],
    ),
    ("KeyTransformation", &["prefix", "suffix", "name", "primary_key"]),
    ("NoAuth", &["name", "primary_key"]),
    ("ApiKeyAuthenticator", &["api_token", "header", "inject_into", "name", "primary_key"]),
    ("BearerAuthenticator", &["api_token", "name", "primary_key"]),
    ("BasicHttpAuthenticator", &["username", "password", "name", "primary_key"]),
    (
        "OAuthAuthenticator",
        &[
            "client_id",
            "client_secret",
            "refresh_token",
            "token_refresh_endpoint",
            "access_token_name",
            "expires_in_name",
            "grant_type",
            "refresh_request_body",
            "refresh_request_headers",
            "scopes",
            "access_token_value",
            "token_expiry_date",
            "token_expiry_date_format",
            "refresh_token_updater",
            "client_id_name",
            "client_secret_name",
            "refresh_token_name",
            "grant_type_name",
            "send_refresh_request_as_query_params",
            "refresh_token_error_key",
            "refresh_token_error_status_codes",
            "refresh_token_error_values",
            "name",
            "primary_key",
        ],
    ),
    (
        "LegacySessionTokenAuthenticator",
        &[
            "header",
            "login_url",
            "session_token",
            "session_token_response_key",
            "username",
            "password",
            "validate_session_url",
        ],
    ),
    (
        "SessionTokenAuthenticator",
        &[
            "login_requester",
            "session_token_path",
            "expiration_duration",
            "request_authentication",
            "decoder",
            "name",
            "primary_key",
        ],
    ),
    // The schema spells these two `ApiKey` and `Bearer`; the class names are accepted too.
    ("ApiKey", &["inject_into", "api_token", "name", "primary_key"]),
    ("Bearer", &["name", "primary_key"]),
    ("SessionTokenRequestApiKeyAuthenticator", &["inject_into", "api_token", "name", "primary_key"]),
    ("SessionTokenRequestBearerAuthenticator", &["name", "primary_key"]),
    ("SelectiveAuthenticator", &["authenticator_selection_path", "authenticators", "name", "primary_key"]),
    ("DefaultErrorHandler", &["backoff_strategies", "max_retries", "response_filters", "name", "primary_key"]),
    ("CompositeErrorHandler", &["error_handlers", "name", "primary_key"]),
    (
        "HttpResponseFilter",
        &[
            "action",
            "http_codes",
            "error_message_contains",
            "predicate",
            "error_message",
            "failure_type",
            "name",
            "primary_key",
        ],
    ),
    ("ConstantBackoffStrategy", &["backoff_time_in_seconds", "jitter_range_in_seconds", "name", "primary_key"]),
    ("ExponentialBackoffStrategy", &["factor", "jitter_range_in_seconds", "name", "primary_key"]),
    ("WaitTimeFromHeader", &["header", "regex", "max_waiting_time_in_seconds", "name", "primary_key"]),
    ("WaitUntilTimeFromHeader", &["header", "min_wait", "regex", "name", "primary_key"]),
    ("JsonDecoder", &["name", "primary_key"]),
    ("JsonlDecoder", &["name", "primary_key"]),
    ("IterableDecoder", &["name", "primary_key"]),
    ("XmlDecoder", &["name", "primary_key"]),
    ("CsvDecoder", &["encoding", "delimiter", "set_values_to_none", "name", "primary_key"]),
    ("GzipDecoder", &["decoder", "name", "primary_key"]),
    ("ConcurrencyLevel", &["default_concurrency", "max_concurrency"]),
    (
        "HTTPAPIBudget",
        &["policies", "ratelimit_reset_header", "ratelimit_remaining_header", "status_codes_for_ratelimit_hit"],
    ),
    ("FixedWindowCallRatePolicy", &["period", "call_limit", "matchers"]),
    ("MovingWindowCallRatePolicy", &["rates", "matchers"]),
    ("UnlimitedCallRatePolicy", &["matchers"]),
    ("Rate", &["limit", "interval"]),
    ("HttpRequestRegexMatcher", &["method", "url_base", "url_path_pattern", "params", "headers", "weight"]),
];

/// Fields of the CDK's schema that this engine does not run: a manifest using one is refused.
/// Any other field a component has that is neither supported nor listed here is not part of the
/// declarative schema at all (builder exports carry some); the CDK ignores those, and so does the
/// engine, with a warning at discover.
const UNSUPPORTED_FIELDS: &[(&str, &[&str])] = &[
    ("CheckStream", &["config_overrides"]),
    ("DeclarativeStream", &["file_uploader"]),
    ("AsyncRetriever", &["failed_retry_wait_time_in_seconds"]),
    ("HttpRequester", &["fetch_properties_from_endpoint", "query_properties"]),
    ("DpathExtractor", &["record_expander"]),
    ("DatetimeBasedCursor", &["allow_catalog_defined_cursor_field", "clamping"]),
    ("IncrementingCountCursor", &["allow_catalog_defined_cursor_field"]),
    ("OAuthAuthenticator", &["profile_assertion", "use_profile_assertion"]),
];

/// Default component types by `Parent.field`, as the CDK fills them in.
const DEFAULT_TYPES: &[(&str, &str)] = &[
    ("CompositeErrorHandler.error_handlers", "DefaultErrorHandler"),
    ("CursorPagination.decoder", "JsonDecoder"),
    ("DatetimeBasedCursor.end_datetime", "MinMaxDatetime"),
    ("DatetimeBasedCursor.end_time_option", "RequestOption"),
    ("DatetimeBasedCursor.start_datetime", "MinMaxDatetime"),
    ("DatetimeBasedCursor.start_time_option", "RequestOption"),
    ("DeclarativeSource.check", "CheckStream"),
    ("DeclarativeSource.spec", "Spec"),
    ("DeclarativeSource.streams", "DeclarativeStream"),
    ("DeclarativeStream.retriever", "SimpleRetriever"),
    ("DeclarativeStream.schema_loader", "JsonFileSchemaLoader"),
    ("IncrementingCountCursor.start_value_option", "RequestOption"),
    ("DynamicSchemaLoader.retriever", "SimpleRetriever"),
    ("StateDelegatingStream.full_refresh_stream", "DeclarativeStream"),
    ("StateDelegatingStream.incremental_stream", "DeclarativeStream"),
    ("DefaultErrorHandler.response_filters", "HttpResponseFilter"),
    ("DefaultPaginator.decoder", "JsonDecoder"),
    ("DefaultPaginator.page_size_option", "RequestOption"),
    ("DpathExtractor.decoder", "JsonDecoder"),
    ("HttpRequester.error_handler", "DefaultErrorHandler"),
    ("ListPartitionRouter.request_option", "RequestOption"),
    ("ParentStreamConfig.request_option", "RequestOption"),
    ("ParentStreamConfig.stream", "DeclarativeStream"),
    ("RecordSelector.extractor", "DpathExtractor"),
    ("RecordSelector.record_filter", "RecordFilter"),
    ("SimpleRetriever.paginator", "NoPagination"),
    ("SimpleRetriever.pagination_reset", "PaginationReset"),
    ("PaginationReset.limits", "PaginationResetLimits"),
    ("SimpleRetriever.record_selector", "RecordSelector"),
    ("SimpleRetriever.requester", "HttpRequester"),
    ("SubstreamPartitionRouter.parent_stream_configs", "ParentStreamConfig"),
    ("AddFields.fields", "AddedFieldDefinition"),
    ("AsyncRetriever.status_mapping", "AsyncJobStatusMap"),
    ("AsyncRetriever.record_selector", "RecordSelector"),
];

/// Fields that hold data rather than components (JSON schemas, config values, free metadata):
/// not walked for `type`s, nor given parameters.
const DATA_FIELDS: &[&str] = &[
    "schema",
    "connection_specification",
    "advanced_auth",
    "metadata",
    "config_normalization_rules",
    "schemas",
    // Request inputs are the API's data (a search query may well have a `type`).
    "request_parameters",
    "request_headers",
    "request_body_json",
    "request_body_data",
    "refresh_request_body",
    "refresh_request_headers",
];

/// Whether a field holds data rather than components.
pub fn is_data_field(field: &str) -> bool {
    DATA_FIELDS.contains(&field)
}

/// A loaded manifest: the resolved `DeclarativeSource`.
pub struct Manifest {
    pub root: Value,
    /// What the engine does not follow and says at discover: fields outside the declarative
    /// schema (ignored, as the CDK ignores them), `incremental_dependency`.
    pub ignored: Vec<String>,
    /// Streams that need a component or field this engine does not run, each with why: they
    /// are discovered, and reading one fails that stream alone (the others read).
    pub refused: Vec<(String, Value, String)>,
    /// The full-refresh sides of the `StateDelegatingStream`s, whose incremental streams are
    /// among the streams (see [`crate::delegation`]).
    pub delegating: Vec<Delegating>,
    /// The `dynamic_streams` whose streams are made from what an API answers
    /// (`HttpComponentsResolver`): not made yet, see [`crate::dynamic::Deferred`].
    pub deferred: Vec<crate::dynamic::Deferred>,
}

/// Takes a manifest's `dynamic_streams` out and adds the streams they make (from the config, or
/// from what an API listed, `fetched`) after its own; a definition whose API was not read yet
/// becomes a stream of its own that reads it. Answers the templates of those an API lists.
fn add_dynamic_streams(
    resolved: &mut Value,
    dynamic: Option<(&Interpolator, &crate::config::Config)>,
    fetched: Option<&crate::dynamic::Fetched>,
    budget: &mut usize,
) -> Result<std::collections::HashMap<usize, Value>, String> {
    let definitions = resolved.as_object_mut().and_then(|r| r.remove("dynamic_streams"));
    let mut templates = std::collections::HashMap::new();
    match definitions {
        None | Some(Value::Null) => {}
        Some(Value::Array(definitions)) => {
            let mut made = Vec::new();
            for (i, definition) in definitions.iter().enumerate() {
                if crate::dynamic::lists_from_api(definition) {
                    templates.insert(i, definition.get("stream_template").cloned().unwrap_or(Value::Null));
                }
                let listed = fetched.and_then(|f| f.get(&i)).map(Vec::as_slice);
                if crate::dynamic::lists_from_api(definition) && listed.is_none() {
                    // Read as a stream of its own (its retriever checked and given its
                    // parameters as any is), taken out of the streams below.
                    made.push(crate::dynamic::resolver_stream(definition, i));
                    continue;
                }
                let streams = match dynamic {
                    Some((interp, config)) => {
                        crate::dynamic::expand(definition, i, interp, config.value(), listed, budget)?
                    }
                    None => {
                        return Err("dynamic_streams: the streams are made from the config, which is not here".into());
                    }
                };
                let mut seen = HashSet::new();
                for stream in streams {
                    let name = stream.get("name").and_then(Value::as_str).map(str::to_string).ok_or_else(|| {
                        format!("dynamic_streams[{i}]: Expected stream name {} to be a string", stream["name"])
                    })?;
                    if !seen.insert(name.clone()) {
                        return Err(format!(
                            "Dynamic streams list contains a duplicate name: {name}. Please check your configuration."
                        ));
                    }
                    made.push(stream);
                }
            }
            match resolved.get_mut("streams") {
                Some(Value::Array(streams)) => streams.extend(made),
                _ => resolved["streams"] = Value::Array(made),
            }
        }
        Some(_) => return Err("dynamic_streams: must be a list of DynamicDeclarativeStream".into()),
    }
    Ok(templates)
}

impl Manifest {
    /// Resolves and checks a manifest (the JSON form of its YAML) that has no dynamic streams.
    pub fn load(manifest: &Value) -> Result<Manifest, String> {
        Manifest::load_with(manifest, None, None)
    }

    /// Resolves and checks a manifest, its `dynamic_streams` made with the config
    /// (`crate::dynamic`): they join the streams after the manifest's own, as in the CDK. Those
    /// an API lists are made from `fetched` (by definition), or left [`Manifest::deferred`].
    pub fn load_with(
        manifest: &Value,
        dynamic: Option<(&Interpolator, &crate::config::Config)>,
        fetched: Option<&crate::dynamic::Fetched>,
    ) -> Result<Manifest, String> {
        if !manifest.is_object() {
            return Err("the manifest must be an object (a DeclarativeSource)".into());
        }
        let mut budget = MAX_NODES;
        let mut resolved =
            Resolver { root: manifest, budget: &mut budget, visiting: HashSet::new() }.node(manifest, 0)?;
        let mut templates = add_dynamic_streams(&mut resolved, dynamic, fetched, &mut budget)?;
        if resolved.get("type").is_none() {
            resolved["type"] = Value::from("DeclarativeSource");
        }
        let mut root = propagate(("", ""), resolved, &Map::new());
        resolve_request_bodies(&mut root);
        parents_read_in_full(&mut root);
        let mut ignored = Vec::new();
        // What is not a stream must all be supported; a stream that is not is refused alone.
        let streams = match root.as_object_mut().and_then(|r| r.remove("streams")) {
            Some(Value::Array(streams)) => streams,
            Some(_) => return Err("streams: must be a list of streams".into()),
            None => Vec::new(),
        };
        // Custom components run when the host runs the manifest's components.py.
        let custom = dynamic.is_some_and(|(_, config)| config.get(crate::custom::CHECKSUMS_KEY).is_some());
        check_supported(&root, "", &mut ignored, custom)?;
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        let mut delegating = Vec::new();
        for (i, stream) in streams.into_iter().enumerate() {
            let at = format!("streams[{i}]");
            let checked = check_supported(&stream, &at, &mut ignored, custom)
                .and_then(|()| crate::counting::check(&stream, &at))
                .and_then(|()| crate::delegation::split(&stream, &at));
            match checked {
                Ok(None) => kept.push(stream),
                Ok(Some((incremental, side))) => {
                    kept.push(incremental);
                    delegating.push(side);
                }
                Err(why) => {
                    let name = stream.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                    refused.push((name, stream, why));
                }
            }
        }
        // The resolvers' streams, refused or not, leave the streams here.
        let mut deferred = Vec::new();
        let mut resolver_refused = None;
        refused.retain(|(name, _, why)| match crate::dynamic::resolver_index(name) {
            Some(i) => {
                resolver_refused.get_or_insert_with(|| format!("dynamic_streams[{i}].components_resolver: {why}"));
                false
            }
            None => true,
        });
        if let Some(why) = resolver_refused {
            return Err(why);
        }
        kept.retain(|stream| {
            let name = stream.get("name").and_then(Value::as_str).unwrap_or_default();
            match crate::dynamic::resolver_index(name) {
                Some(index) => {
                    let template = templates.remove(&index).unwrap_or(Value::Null);
                    deferred.push(crate::dynamic::Deferred { index, resolver: stream.clone(), template });
                    false
                }
                None => true,
            }
        });
        if kept.is_empty()
            && deferred.is_empty()
            && let Some((_, _, why)) = refused.first()
        {
            return Err(why.clone());
        }
        root["streams"] = Value::Array(kept);
        check_streams(&root, &mut ignored)?;
        for side in &delegating {
            check_stream(&side.full_refresh, &format!("stream {}: full_refresh_stream", side.name), &mut ignored)?;
        }
        for d in &deferred {
            check_stream(&d.resolver, &format!("dynamic_streams[{}].components_resolver", d.index), &mut ignored)?;
        }
        let streams = root.get("streams").and_then(Value::as_array).map_or(0, Vec::len);
        if streams == 0 && deferred.is_empty() {
            return Err("streams: a manifest needs at least one stream".into());
        }
        Ok(Manifest { root, ignored, refused, delegating, deferred })
    }

    /// The streams the engine reads (not the refused ones).
    pub fn streams(&self) -> &[Value] {
        self.root["streams"].as_array().map_or(&[], Vec::as_slice)
    }

    /// The full-refresh side of a `StateDelegatingStream`.
    pub fn delegating(&self, name: &str) -> Option<&Delegating> {
        self.delegating.iter().find(|d| d.name == name)
    }

    /// Why a stream is refused, when it is.
    pub fn refusal(&self, name: &str) -> Option<&str> {
        self.refused.iter().find(|(n, _, _)| n == name).map(|(_, _, why)| why.as_str())
    }
}

/// `HttpRequester.request_body` as the CDK resolves it (`_resolve_request_body`): a form or
/// plain text is `request_body_data`, a JSON object `request_body_json`, a GraphQL query
/// `request_body_json` without its null fields. The tree is bounded already (nodes and depth).
fn resolve_request_bodies(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let body = map
                .get("request_body")
                .and_then(|b| Some((b.get("type")?.as_str()?.to_string(), b.get("value")?.clone())));
            if let Some((kind, value)) = body {
                let resolved = match kind.as_str() {
                    "RequestBodyUrlEncodedForm" | "RequestBodyPlainText" => Some(("request_body_data", value)),
                    "RequestBodyJsonObject" => Some(("request_body_json", value)),
                    "RequestBodyGraphQL" => Some((
                        "request_body_json",
                        match value {
                            Value::Object(m) => Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
                            other => other,
                        },
                    )),
                    _ => None,
                };
                if let Some((field, value)) = resolved {
                    map.remove("request_body");
                    map.insert(field.to_string(), value);
                }
            }
            // Data (schemas, bodies, config values) holds no components.
            map.iter_mut()
                .filter(|(k, _)| !DATA_FIELDS.contains(&k.as_str()))
                .for_each(|(_, v)| resolve_request_bodies(v));
        }
        Value::Array(items) => items.iter_mut().for_each(resolve_request_bodies),
        _ => {}
    }
}

struct Resolver<'a> {
    root: &'a Value,
    budget: &'a mut usize,
    visiting: HashSet<String>,
}

impl Resolver<'_> {
    fn node(&mut self, node: &Value, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("the manifest nests deeper than {MAX_DEPTH} levels (a reference cycle?)"));
        }
        *self.budget = self.budget.checked_sub(1).ok_or_else(|| {
            format!("the manifest expands to more than {MAX_NODES} values once its references are resolved")
        })?;
        match node {
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    // Definitions are looked up in the manifest as written; the resolved tree
                    // needs only what the streams use.
                    if k == "$ref" || (depth == 0 && matches!(k.as_str(), "definitions" | "schemas")) {
                        continue;
                    }
                    let v = if k == "config_overrides" { v.clone() } else { self.node(v, depth + 1)? };
                    out.insert(k.clone(), v);
                }
                match map.get("$ref") {
                    None => Ok(Value::Object(out)),
                    Some(reference) => match self.node(reference, depth + 1)? {
                        // The component's own fields win over the referenced ones.
                        Value::Object(mut base) => {
                            base.extend(out);
                            Ok(Value::Object(base))
                        }
                        other => Ok(other),
                    },
                }
            }
            Value::Array(items) => {
                items.iter().map(|v| self.node(v, depth + 1)).collect::<Result<_, _>>().map(Value::Array)
            }
            Value::String(s) if s.starts_with("#/") => {
                if !self.visiting.insert(s.clone()) {
                    return Err(format!("the reference {s:?} refers to itself"));
                }
                let target =
                    lookup(self.root, &s[2..]).ok_or_else(|| format!("the reference {s:?} points at nothing"))?;
                let resolved = self.node(target, depth + 1);
                self.visiting.remove(s);
                resolved
            }
            other => Ok(other.clone()),
        }
    }
}

/// The CDK's lookup: the whole rest of the path as a key first, then one segment at a time.
fn lookup<'a>(node: &'a Value, path: &str) -> Option<&'a Value> {
    if path.is_empty() {
        return Some(node);
    }
    let child = |key: &str| match node {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    };
    if let Some(found) = child(path) {
        return Some(found);
    }
    path.match_indices('/').find_map(|(i, _)| child(&path[..i]).and_then(|next| lookup(next, &path[i + 1..])))
}

fn is_json_schema(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(t)) => t.len() == 2 && t[0] == "null" && t[1] == "object",
        _ => false,
    }
}

/// `$parameters` down the tree and default types in, as the CDK's ManifestComponentTransformer:
/// a component's own `$parameters` win over its parents', and a parameter becomes a field of every
/// component below that lacks one (e.g. `name`, `path`, `primary_key`).
fn propagate(parent: (&str, &str), node: Value, parent_params: &Map<String, Value>) -> Value {
    let Value::Object(mut map) = node else { return node };
    if !map.contains_key("type") {
        // A class_name makes it custom, of the kind the field takes (as the CDK's
        // CUSTOM_COMPONENTS_MAPPING says).
        let t = match map.contains_key("class_name") {
            true => crate::custom::default_type(parent),
            false => default_type(parent),
        };
        if let Some(t) = t {
            map.insert("type".into(), Value::from(t));
        }
    }
    let mut params = parent_params.clone();
    if let Some(Value::Object(own)) = map.remove("$parameters") {
        params.extend(own);
    }
    if is_json_schema(&map) {
        return Value::Object(map);
    }
    let Some(kind) = map.get("type").and_then(Value::as_str).map(str::to_string) else {
        // A plain object: only components nested in it get parameters.
        for (_, v) in map.iter_mut() {
            if v.get("type").is_some_and(Value::is_string) {
                *v = propagate(parent, v.take(), &params);
            }
        }
        return Value::Object(map);
    };
    for (k, v) in &params {
        if map.get(k).is_none_or(crate::engine::is_py_false) {
            map.insert(k.clone(), v.clone());
        }
    }
    let fields = std::mem::take(&mut map);
    for (field, value) in fields {
        if DATA_FIELDS.contains(&field.as_str()) || field == "definitions" || !(value.is_object() || value.is_array()) {
            map.insert(field, value);
            continue;
        }
        // A parameter named like the field is not passed into it (the CDK avoids the cycle).
        let excluded = params.remove(&field);
        let id = (kind.as_str(), field.as_str());
        let value = match value {
            Value::Object(_) => propagate(id, value, &params),
            Value::Array(items) => Value::Array(
                items.into_iter().map(|v| if v.is_object() { propagate(id, v, &params) } else { v }).collect(),
            ),
            other => other,
        };
        if let Some(v) = excluded {
            params.insert(field.clone(), v);
        }
        map.insert(field, value);
    }
    if !params.is_empty() {
        map.insert("$parameters".into(), Value::Object(params));
    }
    Value::Object(map)
}

/// The type the CDK gives a component without one, from where it is (`Parent.field`).
fn default_type((kind, field): (&str, &str)) -> Option<&'static str> {
    DEFAULT_TYPES.iter().find_map(|(at, t)| {
        let (k, f) = at.split_once('.')?;
        (k == kind && f == field).then_some(*t)
    })
}

/// What the engine needs of each stream, checked before anything runs: a unique name, a
/// retriever with a requester, a complete cursor, and nothing it would refuse half-way.
fn check_streams(root: &Value, warnings: &mut Vec<String>) -> Result<(), String> {
    let mut names = HashSet::new();
    for (i, stream) in root["streams"].as_array().into_iter().flatten().enumerate() {
        let at = format!("streams[{i}]");
        let name = stream.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| format!("{at}: a stream needs a name"))?;
        if !names.insert(name.to_string()) {
            return Err(format!("{at}: the stream name {name:?} is used twice"));
        }
        check_stream(stream, &at, warnings)?;
    }
    Ok(())
}

fn check_stream(stream: &Value, at: &str, warnings: &mut Vec<String>) -> Result<(), String> {
    let name = stream.get("name").and_then(Value::as_str).unwrap_or_default();
    let retriever = stream
        .get("retriever")
        .filter(|r| r.is_object())
        .ok_or_else(|| format!("{at}: the stream {name} has no retriever"))?;
    let requesters: &[&str] = match retriever.get("type").and_then(Value::as_str) {
        Some("AsyncRetriever") => &["creation_requester", "polling_requester", "download_requester"],
        _ => &["requester"],
    };
    for field in requesters {
        if !retriever.get(*field).is_some_and(Value::is_object) {
            return Err(format!("{at}.retriever: the stream {name} has no {field}"));
        }
    }
    if let Some(cursor) = stream.get("incremental_sync").filter(|c| c.is_object()) {
        let (name, fields): (&str, &[&str]) = match kind(cursor) {
            crate::counting::KIND => (crate::counting::KIND, &["cursor_field"]),
            _ => ("DatetimeBasedCursor", &["cursor_field", "datetime_format", "start_datetime"]),
        };
        for field in fields {
            if cursor.get(*field).is_none_or(Value::is_null) {
                return Err(format!("{at}.incremental_sync: a {name} needs {field}"));
            }
        }
    }
    check_parents(retriever, &format!("{at}.retriever"), warnings, Some(stream));
    Ok(())
}

/// A parent that is a `StateDelegatingStream` is read as its full-refresh stream: the CDK reads
/// the incremental one only with a parent state, which the engine does not follow for such a
/// parent (it is read in full, its saved state handed on), and reading all parents lists every
/// child partition.
fn parents_read_in_full(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("ParentStreamConfig")
                && let Some(stream) = map.get_mut("stream")
                && kind(stream) == "StateDelegatingStream"
                && let Some(full) = stream.get_mut("full_refresh_stream").map(Value::take)
            {
                *stream = full;
            }
            map.iter_mut()
                .filter(|(k, _)| !DATA_FIELDS.contains(&k.as_str()))
                .for_each(|(_, v)| parents_read_in_full(v));
        }
        Value::Array(items) => items.iter_mut().for_each(parents_read_in_full),
        _ => {}
    }
}

/// `incremental_dependency` is followed (`crate::dependency`) for a SimpleRetriever stream with a
/// DatetimeBasedCursor whose parent has a DatetimeBasedCursor and no router of its own. Elsewhere
/// the parent is read in full, which reads every child partition (the host's state of each still
/// holds), so it is allowed, and said: on a stream without `incremental_sync` it has no effect,
/// as the CDK warns; a parent of another kind, or a parent's parent, is read in full (its saved
/// state handed on as it was).
fn check_parents(node: &Value, path: &str, warnings: &mut Vec<String>, child: Option<&Value>) {
    let datetime = |s: &Value| s.get("incremental_sync").is_some_and(|c| kind(c) == "DatetimeBasedCursor");
    match node {
        Value::Object(map) => {
            let parent_config = map.get("type").and_then(Value::as_str) == Some("ParentStreamConfig");
            if parent_config && map.get("incremental_dependency").and_then(Value::as_bool) == Some(true) {
                let parent = map.get("stream").unwrap_or(&Value::Null);
                let routed = parent["retriever"].get("partition_router").is_some_and(|r| !r.is_null());
                let why = match child {
                    Some(c) if c.get("incremental_sync").is_none_or(Value::is_null) => {
                        Some("has no effect: the stream has no incremental_sync, and every parent record is read")
                    }
                    Some(c) if !datetime(c) || kind(&c["retriever"]) != "SimpleRetriever" => Some(
                        "is not followed (only for a SimpleRetriever stream with a DatetimeBasedCursor): the parent is \
                         read in full, and every child partition with it",
                    ),
                    Some(_) if !datetime(parent) || routed => Some(
                        "is not followed for a parent without a DatetimeBasedCursor of its own or with a router: the \
                         parent is read in full, and its saved state handed on as it was",
                    ),
                    Some(_) => None,
                    None => Some(
                        "is not followed for a parent's parent: the parent is read in full, and every child partition with it",
                    ),
                };
                if let Some(why) = why {
                    warnings.push(format!("{path}: incremental_dependency {why}"));
                }
            }
            let child = child.filter(|_| !parent_config);
            for (k, v) in map {
                if (v.is_object() || v.is_array()) && !DATA_FIELDS.contains(&k.as_str()) {
                    check_parents(v, &format!("{path}.{k}"), warnings, child);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate().filter(|(_, v)| v.is_object() || v.is_array()) {
                check_parents(v, &format!("{path}[{i}]"), warnings, child);
            }
        }
        _ => {}
    }
}

/// Every component in the tree (outside data fields and definitions) must be one this engine
/// runs, with only fields it knows.
fn check_supported(node: &Value, path: &str, ignored: &mut Vec<String>, custom: bool) -> Result<(), String> {
    match node {
        Value::Object(map) => {
            // A custom component's fields are its class's: the components runtime builds what
            // is nested in them.
            if crate::custom::is_custom(map) {
                return crate::custom::refusal(map, display_path(path), custom).map_or(Ok(()), Err);
            }
            if let Some(kind) = map.get("type").and_then(Value::as_str).filter(|_| !is_json_schema(map)) {
                let Some((_, fields)) = SUPPORTED.iter().find(|(t, _)| *t == kind) else {
                    return Err(if kind.starts_with("Custom") {
                        format!("{}: {kind} has no class_name (the Python class that makes it)", display_path(path))
                    } else {
                        format!("{}: {kind} is not supported", display_path(path))
                    });
                };
                // Parameters become fields of every component below: only the component's own count.
                let params = map.get("$parameters").and_then(Value::as_object);
                let mut outside = Vec::new();
                for field in map.keys() {
                    let from_params = params.is_some_and(|p| p.contains_key(field));
                    if field == "type" || field == "$parameters" || from_params || fields.contains(&field.as_str()) {
                        continue;
                    }
                    let unsupported = UNSUPPORTED_FIELDS.iter().any(|(t, f)| *t == kind && f.contains(&field.as_str()));
                    // Set to false or null, such a field asks for nothing (`use_profile_assertion: false`).
                    if unsupported && matches!(map[field], Value::Null | Value::Bool(false)) {
                        continue;
                    }
                    if unsupported {
                        return Err(format!("{}: the field {field:?} of {kind} is not supported", display_path(path)));
                    }
                    ignored.push(format!("{}: {field:?} is not a field of {kind}", display_path(path)));
                    outside.push(field.as_str());
                }
                // What the CDK ignores it does not build either: a component under a field
                // outside the schema (a paginator misplaced in a record selector) is never run.
                return check_fields(map, path, ignored, &outside, custom);
            }
            check_fields(map, path, ignored, &[], custom)
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate().filter(|(_, v)| v.is_object() || v.is_array()) {
                check_supported(v, &format!("{path}[{i}]"), ignored, custom)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The components nested in an object's fields, but for data and the `skipped` fields.
fn check_fields(
    map: &Map<String, Value>,
    path: &str,
    ignored: &mut Vec<String>,
    skipped: &[&str],
    custom: bool,
) -> Result<(), String> {
    let here = |field: &str| if path.is_empty() { field.to_string() } else { format!("{path}.{field}") };
    for (k, v) in map {
        let nested = v.is_object() || v.is_array();
        if !nested
            || DATA_FIELDS.contains(&k.as_str())
            || k == "definitions"
            || k == "$parameters"
            || skipped.contains(&k.as_str())
        {
            continue;
        }
        check_supported(v, &here(k), ignored, custom)?;
    }
    Ok(())
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "the manifest" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn side(name: &str, retriever: &str) -> Value {
        json!({"type": "DeclarativeStream", "name": name, "retriever": {"type": retriever,
            "requester": {"type": "HttpRequester", "url_base": "http://x", "path": "/p"}}})
    }

    /// A StateDelegatingStream keeps its incremental stream among the streams and its
    /// full-refresh one beside; a parent that is one is read as its full-refresh stream; names
    /// that differ, and report jobs on either side, are refused with the stream alone.
    #[test]
    fn a_state_delegating_stream_splits_into_its_two_streams() {
        let delegating = |full: Value, incremental: Value| {
            json!({"type": "StateDelegatingStream", "$parameters": {"name": "d"}, "api_retention_period": "P30D",
                "full_refresh_stream": full, "incremental_stream": incremental})
        };
        let mut child = side("child", "SimpleRetriever");
        child["retriever"]["partition_router"] = json!({"type": "SubstreamPartitionRouter", "parent_stream_configs": [
            {"type": "ParentStreamConfig", "parent_key": "id", "partition_field": "p",
             "stream": delegating(side("", "SimpleRetriever"), side("", "SimpleRetriever"))}]});
        let mut full = side("", "SimpleRetriever");
        full["retriever"]["requester"]["path"] = json!("/full");
        let manifest = json!({"streams": [delegating(full, side("", "SimpleRetriever")), child,
            delegating(side("d", "SimpleRetriever"), side("other", "SimpleRetriever")),
            delegating(side("", "SimpleRetriever"), side("", "AsyncRetriever"))]});
        let loaded = Manifest::load(&manifest).expect("loads");
        assert_eq!(loaded.streams().len(), 2);
        assert_eq!(loaded.streams()[0]["type"], "DeclarativeStream");
        assert_eq!(loaded.streams()[0]["retriever"]["requester"]["path"], "/p");
        let side = loaded.delegating("d").expect("the full-refresh side is kept");
        assert_eq!(side.full_refresh["retriever"]["requester"]["path"], "/full");
        assert_eq!(side.retention.as_deref(), Some("P30D"));
        let parent = &loaded.streams()[1]["retriever"]["partition_router"]["parent_stream_configs"][0]["stream"];
        assert_eq!(parent["type"], "DeclarativeStream", "the parent is its full-refresh stream");
        let why: Vec<&str> = loaded.refused.iter().map(|(_, _, why)| why.as_str()).collect();
        assert!(why[0].contains("must have equal names. Instead has d, d and other"), "{why:?}");
        assert!(why[1].contains("incremental_stream: a StateDelegatingStream read through report jobs"), "{why:?}");
    }

    /// `class_name` makes a custom component only of a Custom type (or one without a type); on a
    /// built-in one the CDK ignores it (source-freshdesk).
    #[test]
    fn a_class_name_on_a_built_in_type_is_ignored() {
        let mut stream = side("s", "SimpleRetriever");
        stream["retriever"]["requester"]["class_name"] = json!("SimpleRetriever");
        let loaded = Manifest::load(&json!({"streams": [stream]})).expect("loads");
        assert!(loaded.refused.is_empty());
        assert!(
            loaded.ignored.iter().any(|w| w.contains("\"class_name\" is not a field of HttpRequester")),
            "{:?}",
            loaded.ignored
        );
        let mut custom = side("s", "SimpleRetriever");
        custom["retriever"]["requester"] = json!({"type": "CustomRequester", "class_name": "source.components.R"});
        let loaded = Manifest::load(&json!({"streams": [custom, side("t", "SimpleRetriever")]})).expect("loads");
        assert!(loaded.refused[0].2.contains("source.components.R"), "{:?}", loaded.refused);
    }

    /// A component under a field outside the schema is ignored with the field, as the CDK ignores
    /// it (source-fullstory puts a paginator of an unknown type in its record selector).
    #[test]
    fn a_component_under_a_field_outside_the_schema_is_ignored() {
        let manifest = json!({"streams": [{"type": "DeclarativeStream", "name": "s", "retriever": {"type": "SimpleRetriever",
            "requester": {"type": "HttpRequester", "url_base": "http://x"},
            "record_selector": {"type": "RecordSelector", "extractor": {"type": "DpathExtractor", "field_path": []},
                "paginator": {"type": "DefaultPaginator", "pagination_strategy": {"type": "TokenBased"}}}}}]});
        let loaded = Manifest::load(&manifest).expect("the misplaced paginator is ignored");
        assert!(loaded.refused.is_empty());
        assert!(
            loaded.ignored.iter().any(|w| w.contains("\"paginator\" is not a field of RecordSelector")),
            "{:?}",
            loaded.ignored
        );
    }

    /// An unsupported field set to false or null asks for nothing: accepted; set, refused.
    #[test]
    fn an_unsupported_field_switched_off_is_accepted() {
        let manifest = |value: Value| {
            json!({"streams": [{"type": "DeclarativeStream", "name": "s", "retriever": {"type": "SimpleRetriever",
                "requester": {"type": "HttpRequester", "url_base": "http://x", "authenticator": {
                    "type": "OAuthAuthenticator", "client_id": "a", "client_secret": "b", "refresh_token": "c",
                    "token_refresh_endpoint": "http://x/t", "use_profile_assertion": value}},
                "record_selector": {"type": "RecordSelector", "extractor": {"type": "DpathExtractor", "field_path": []}}}}]})
        };
        assert!(Manifest::load(&manifest(json!(false))).is_ok());
        assert!(Manifest::load(&manifest(Value::Null)).is_ok());
        let Err(refused) = Manifest::load(&manifest(json!(true))) else { panic!("use_profile_assertion: true loads") };
        assert!(refused.contains("use_profile_assertion"), "{refused}");
    }

    fn minimal(stream: Value) -> Value {
        json!({"version": "6.0.0", "type": "DeclarativeSource", "check": {"stream_names": ["s"]}, "streams": [stream]})
    }

    #[test]
    fn a_stream_with_an_unsupported_component_is_refused_alone() {
        let good = json!({"name": "good", "retriever": {"requester": {"url_base": "http://x"}}});
        let bad = json!({"name": "bad", "retriever": {"requester": {"url_base": "http://x", "authenticator": {"type": "JwtAuthenticator"}}}});
        let mut m = minimal(good);
        m["streams"].as_array_mut().unwrap().push(bad);
        let loaded = Manifest::load(&m).unwrap();
        assert_eq!(loaded.streams().len(), 1);
        assert_eq!(loaded.streams()[0]["name"], "good");
        assert_eq!(
            loaded.refusal("bad"),
            Some("streams[1].retriever.requester.authenticator: JwtAuthenticator is not supported")
        );
        assert_eq!(loaded.refusal("good"), None);
    }

    #[test]
    fn references_resolve_and_own_fields_win() {
        let m = json!({
            "definitions": {"requester": {"type": "HttpRequester", "url_base": "http://x", "http_method": "GET"}, "limit": 50},
            "streams": [{"type": "DeclarativeStream", "name": "s", "retriever": {
                "type": "SimpleRetriever",
                "requester": {"$ref": "#/definitions/requester", "http_method": "POST", "path": "/p"},
                "record_selector": {"extractor": {"field_path": []}},
                "paginator": {"type": "DefaultPaginator", "pagination_strategy": {"type": "OffsetIncrement", "page_size": "#/definitions/limit"}}
            }}]
        });
        let m = Manifest::load(&m).unwrap();
        let requester = &m.streams()[0]["retriever"]["requester"];
        assert_eq!(requester["http_method"], "POST");
        assert_eq!(requester["url_base"], "http://x");
        assert_eq!(m.streams()[0]["retriever"]["paginator"]["pagination_strategy"]["page_size"], 50);
        assert_eq!(m.streams()[0]["retriever"]["record_selector"]["extractor"]["type"], "DpathExtractor");
    }

    #[test]
    fn parameters_propagate_to_components_below() {
        let m = minimal(json!({
            "$parameters": {"name": "items", "path": "/items", "primary_key": "id"},
            "retriever": {"requester": {"url_base": "http://x"}, "record_selector": {"extractor": {"field_path": ["data"]}}}
        }));
        let m = Manifest::load(&m).unwrap();
        let s = &m.streams()[0];
        assert_eq!(s["name"], "items");
        assert_eq!(s["type"], "DeclarativeStream");
        assert_eq!(s["retriever"]["requester"]["path"], "/items");
        assert_eq!(s["retriever"]["requester"]["$parameters"]["name"], "items");
    }

    #[test]
    fn unsupported_components_are_named_with_their_path() {
        let m = minimal(json!({"name": "s", "retriever": {"requester": {"url_base": "http://x"},
            "record_selector": {"extractor": {"type": "CustomRecordExtractor", "class_name": "source.components.X"}}}}));
        let e = Manifest::load(&m).err().unwrap();
        assert!(e.starts_with("streams[0].retriever.record_selector.extractor: CustomRecordExtractor"), "{e}");
        assert!(e.contains("components.py"), "{e}");
        let m = minimal(
            json!({"name": "s", "retriever": {"requester": {"url_base": "http://x", "authenticator": {"type": "JwtAuthenticator"}}}}),
        );
        assert_eq!(
            Manifest::load(&m).err().unwrap(),
            "streams[0].retriever.requester.authenticator: JwtAuthenticator is not supported"
        );
        let m =
            minimal(json!({"name": "s", "retriever": {"requester": {"url_base": "http://x", "query_properties": {}}}}));
        assert!(
            Manifest::load(&m)
                .err()
                .unwrap()
                .contains("the field \"query_properties\" of HttpRequester is not supported")
        );
        // A field outside the schema is ignored, as the CDK ignores it, and said.
        let m = minimal(json!({"name": "s", "retriever": {"requester": {"url_base": "http://x", "description": "x"}}}));
        assert_eq!(
            Manifest::load(&m).unwrap().ignored,
            ["streams[0].retriever.requester: \"description\" is not a field of HttpRequester"]
        );
        // A request body is data, whatever its keys.
        let m = minimal(
            json!({"name": "s", "retriever": {"requester": {"url_base": "http://x", "request_body_json": {"query": {"type": "and"}}}}}),
        );
        assert!(Manifest::load(&m).is_ok());
    }

    #[test]
    fn reference_bombs_and_cycles_are_refused() {
        let mut defs = Map::new();
        defs.insert("l0".into(), json!("x"));
        for i in 1..40 {
            let prev = format!("#/definitions/l{}", i - 1);
            defs.insert(format!("l{i}"), json!([prev, prev, prev, prev]));
        }
        let m = json!({"definitions": defs, "streams": [{"name": "s", "retriever": {"requester": {"url_base": "#/definitions/l39"}}}]});
        assert!(Manifest::load(&m).err().unwrap().contains("expands to more than"));
        let m =
            json!({"definitions": {"a": "#/definitions/b", "b": "#/definitions/a"}, "streams": ["#/definitions/a"]});
        assert!(Manifest::load(&m).err().unwrap().contains("refers to itself"));
        let m = json!({"streams": ["#/definitions/none"]});
        assert!(Manifest::load(&m).err().unwrap().contains("points at nothing"));
    }

    #[test]
    fn streams_are_checked_before_anything_runs() {
        let stream = |name: &str| json!({"name": name, "retriever": {"requester": {"url_base": "http://x"}}});
        let m = json!({"streams": [stream("a"), stream("a")]});
        assert_eq!(Manifest::load(&m).err().unwrap(), "streams[1]: the stream name \"a\" is used twice");
        let m =
            json!({"streams": [{"name": "a", "retriever": {"record_selector": {"extractor": {"field_path": []}}}}]});
        assert_eq!(Manifest::load(&m).err().unwrap(), "streams[0].retriever: the stream a has no requester");
        let mut s = stream("a");
        s["incremental_sync"] = json!({"type": "DatetimeBasedCursor", "cursor_field": "u", "datetime_format": "%s"});
        assert!(Manifest::load(&json!({"streams": [s]})).err().unwrap().contains("needs start_datetime"));
        let mut s = stream("child");
        s["retriever"]["partition_router"] = json!({"type": "SubstreamPartitionRouter", "parent_stream_configs": [
            {"stream": stream("parent"), "parent_key": "id", "partition_field": "p", "incremental_dependency": true}
        ]});
        let m = Manifest::load(&json!({"streams": [s.clone()]})).unwrap();
        let said =
            "streams[0].retriever.partition_router.parent_stream_configs[0]: incremental_dependency has no effect";
        assert!(m.ignored[0].starts_with(said), "{:?}", m.ignored);
        // Followed for a parent with a DatetimeBasedCursor, under a child with one.
        let cursor =
            json!({"type": "DatetimeBasedCursor", "cursor_field": "u", "datetime_format": "%s", "start_datetime": "0"});
        s["retriever"]["type"] = json!("SimpleRetriever");
        s["incremental_sync"] = cursor.clone();
        let m = Manifest::load(&json!({"streams": [s.clone()]})).unwrap();
        assert!(m.ignored[0].contains("without a DatetimeBasedCursor of its own"), "{:?}", m.ignored);
        s["retriever"]["partition_router"]["parent_stream_configs"][0]["stream"]["incremental_sync"] = cursor;
        assert!(Manifest::load(&json!({"streams": [s]})).unwrap().ignored.is_empty());
    }

    #[test]
    fn lookup_prefers_whole_keys() {
        let m = json!({"nested": {"path": "first"}, "nested/path": "whole"});
        assert_eq!(lookup(&m, "nested/path"), Some(&json!("whole")));
        let m = json!({"a": {"b": [1, {"c": 2}]}});
        assert_eq!(lookup(&m, "a/b/1/c"), Some(&json!(2)));
    }
}
