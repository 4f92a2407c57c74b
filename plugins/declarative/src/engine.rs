//! One loaded manifest with its config: what every call of the connector works from. It is
//! built once per instance (the host runs a partition in one instance) and kept while the config
//! text stays the same, so a manifest is parsed once, not once per page.

use crate::config::Config;
use crate::interpolation::Interpolator;
use crate::manifest::Manifest;
use crate::slicing::Cursor;
use serde_json::{Map, Value, json};
use sluice_guest::{Error, Partition, Result, ResultExt};
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// Set (to `true`) by `host manifests check` (the host's `cli::manifests::REACH_KEY`), which
/// discovers a manifest's streams with no config: the config is not checked against the spec.
pub const REACH_CHECK_KEY: &str = "__sluice_reach_check";

/// Where `source-declarative-manifest` takes the manifest from.
pub const MANIFEST_KEY: &str = "__injected_declarative_manifest";

/// A stream's name, and whether it is a `StateDelegatingStream`'s full-refresh stream.
type CursorKey = (String, bool);

pub struct Engine {
    /// The manifest as loaded: its own streams and those made from the config.
    base: Manifest,
    /// With the streams an API lists too, once its resolvers were read ([`Engine::manifest`]).
    full: OnceCell<Manifest>,
    /// Set while the resolvers are read: what they read sees the manifest as loaded.
    resolving: Cell<bool>,
    /// The manifest as given, loaded again with what the resolvers read.
    source: Value,
    /// The operator's config, without the manifest (it is the `config` of every template).
    pub config: Config,
    pub interp: Interpolator,
    /// Tokens authenticators obtained (OAuth, session logins), by the authenticator's place in
    /// the manifest, with when they expire (Unix seconds).
    pub tokens: RefCell<HashMap<String, (String, Option<i64>)>>,
    /// Each stream's cursor, read from the manifest once (its templates evaluated once).
    cursors: RefCell<HashMap<CursorKey, Option<Rc<Cursor>>>>,
    /// Each stream's reading plan (see `retrieve::Plan`), by stream name.
    plans: RefCell<HashMap<String, Rc<crate::retrieve::Plan>>>,
    /// The schemas records are normalized by, by the stream's place in the manifest.
    schemas: RefCell<HashMap<String, Option<Rc<Value>>>>,
    /// The custom components built in this instance, by their definition's place in the
    /// manifest (see [`crate::custom`]).
    pub customs: RefCell<HashMap<usize, u32>>,
    /// Templates that depend on the config alone (`{{ config['base_url'] }}`), by how they were
    /// evaluated: the same for every page.
    constant: RefCell<HashMap<(u8, String), Value>>,
}

thread_local! {
    /// The engine of the last config text seen, with that text.
    static CURRENT: RefCell<Option<(String, Rc<Engine>)>> = const { RefCell::new(None) };
}

/// The engine for this config text: the cached one when the text is unchanged.
pub fn for_config(text: &str) -> Result<Rc<Engine>> {
    load(text, true)
}

/// The engine for a call inside a read (a page, a job, a state to shape): the config is not
/// checked against the spec again. The host checked it before the run's first call, and the
/// listing's instance did too; checking it in every partition's instance cost more than reading
/// a one-record partition when the config holds long lists.
pub fn for_read(text: &str) -> Result<Rc<Engine>> {
    load(text, false)
}

fn load(text: &str, check_config: bool) -> Result<Rc<Engine>> {
    // Compared, not hashed: a few kilobytes compare faster than they hash.
    if let Some(engine) =
        CURRENT.with(|c| c.borrow().as_ref().filter(|(seen, _)| same_text(seen, text)).map(|(_, e)| e.clone()))
    {
        return Ok(engine);
    }
    let (config, manifest) =
        Config::parse(text, MANIFEST_KEY).map_err(|e| Error::config(format!("invalid config: {e}")))?;
    let manifest = match manifest {
        Some(Value::Object(m)) => Value::Object(m),
        Some(_) => return Err(Error::config(format!("{MANIFEST_KEY} must be an object (the manifest)"))),
        None => {
            return Err(Error::config(format!(
                "the config has no {MANIFEST_KEY}: run a manifest with `host run manifest.yaml`, or put the \
                 manifest in the config under {MANIFEST_KEY}"
            )));
        }
    };
    let interp = Interpolator::with_config(&config);
    let source = manifest;
    let manifest = Manifest::load_with(&source, Some((&interp, &config)), None)
        .map_err(|e| Error::config(format!("the manifest: {e}")))?;
    // As source-declarative-manifest does before any command: the config against the spec.
    // `host manifests check` discovers without a config: nothing to check against the spec.
    let reach_check = config.get(REACH_CHECK_KEY) == Some(&Value::Bool(true));
    if check_config
        && !reach_check
        && let Some(spec) = manifest.root.get("spec").and_then(|s| s.get("connection_specification"))
    {
        crate::config_check::check(spec, config.value()).map_err(|e| Error::config(format!("the config: {e}")))?;
    }
    let engine = Rc::new(Engine {
        base: manifest,
        full: OnceCell::new(),
        resolving: Cell::new(false),
        source,
        config,
        interp,
        tokens: RefCell::default(),
        cursors: RefCell::default(),
        constant: RefCell::default(),
        plans: RefCell::default(),
        schemas: RefCell::default(),
        customs: RefCell::default(),
    });
    CURRENT.with(|c| *c.borrow_mut() = Some((text.to_string(), engine.clone())));
    Ok(engine)
}

/// `a == b`, eight bytes at a time: the config text (manifest and all, kilobytes) is compared on
/// every call, and in wasm the byte loop of `memcmp` pays an interruption check per byte.
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (wa.remainder(), wb.remainder());
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("chunks of 8"));
    wa.zip(wb).all(|(x, y)| word(x) == word(y)) && ra == rb
}

/// What a template sees besides `config`: the slice being read and the page token.
#[derive(Default, Clone)]
pub struct Scope {
    /// The partition router's part of the slice (`stream_partition`).
    pub partition: Map<String, Value>,
    /// The cursor's part (`stream_interval`): `start_time`, `end_time` or their configured names.
    pub interval: Map<String, Value>,
    /// Fields a parent stream passed on (`extra_fields`).
    pub extra: Map<String, Value>,
    pub next_page_token: Option<Value>,
}

impl Scope {
    /// `stream_slice`: the partition and the interval in one mapping, as the CDK's StreamSlice.
    pub fn slice(&self) -> Value {
        let mut slice = self.partition.clone();
        slice.extend(self.interval.clone());
        if !self.extra.is_empty() {
            slice.insert("extra_fields".into(), Value::Object(self.extra.clone()));
        }
        Value::Object(slice)
    }
}

impl Engine {
    /// The manifest as loaded, without the streams an API lists: what needs no request (the
    /// hosts, the check's streams, the root's settings).
    pub fn loaded(&self) -> &Manifest {
        &self.base
    }

    /// The manifest as given.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// Whether this is `host manifests check` discovering without a config.
    pub fn is_reach_check(&self) -> bool {
        self.config.get(REACH_CHECK_KEY) == Some(&Value::Bool(true))
    }

    /// The manifest with every stream. The streams an API lists are made the first time they
    /// are needed, once per instance: the resolvers' requests are made then.
    pub fn manifest(&self) -> Result<&Manifest> {
        if self.base.deferred.is_empty() || self.resolving.get() {
            return Ok(&self.base);
        }
        if let Some(full) = self.full.get() {
            return Ok(full);
        }
        self.resolving.set(true);
        let fetched = self.read_resolvers();
        self.resolving.set(false);
        let full = Manifest::load_with(&self.source, Some((&self.interp, &self.config)), Some(&fetched?))
            .map_err(|e| Error::config(format!("the manifest: {e}")))?;
        // What was kept while the resolvers were read was for their streams.
        self.cursors.borrow_mut().clear();
        self.plans.borrow_mut().clear();
        self.schemas.borrow_mut().clear();
        Ok(self.full.get_or_init(|| full))
    }

    /// Every record each resolver's retriever reads, with the slice it was read in.
    fn read_resolvers(&self) -> Result<crate::dynamic::Fetched> {
        let mut fetched = crate::dynamic::Fetched::new();
        for deferred in &self.base.deferred {
            let what = format!("dynamic_streams[{}].components_resolver", deferred.index);
            let listed =
                crate::retrieve::read_all_slices(self, &deferred.resolver, crate::dynamic::MAX_DYNAMIC_STREAMS)
                    .context(what)?;
            fetched.insert(deferred.index, listed);
        }
        Ok(fetched)
    }

    /// The manifest that holds a stream: the loaded one for one of its own (no request made),
    /// else the whole.
    fn holding(&self, name: &str) -> Result<&Manifest> {
        let base = &self.base;
        let own = base.refusal(name).is_some()
            || base.streams().iter().any(|s| s.get("name").and_then(Value::as_str) == Some(name));
        if own { Ok(base) } else { self.manifest() }
    }

    /// A `StateDelegatingStream`'s full-refresh side, for a stream that is one.
    pub fn delegating(&self, name: &str) -> Result<Option<&crate::delegation::Delegating>> {
        Ok(self.holding(name)?.delegating(name))
    }

    /// A stream of the manifest; a `StateDelegatingStream`'s incremental stream (the one its
    /// state belongs to).
    pub fn stream(&self, name: &str) -> Result<&Value> {
        let manifest = self.holding(name)?;
        if let Some(why) = manifest.refusal(name) {
            return Err(Error::config(format!("stream {name} cannot be read: {why}")));
        }
        manifest
            .streams()
            .iter()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(name))
            .ok_or_else(|| Error::config(format!("the manifest has no stream {name:?}")))
    }

    /// A stream, or with `full_refresh` its `StateDelegatingStream`'s full-refresh stream.
    pub fn stream_for(&self, name: &str, full_refresh: bool) -> Result<&Value> {
        match self.delegating(name)?.filter(|_| full_refresh) {
            Some(delegating) => Ok(&delegating.full_refresh),
            None => self.stream(name),
        }
    }

    /// The stream a partition reads (see [`crate::delegation`]).
    pub fn stream_read(&self, partition: &Partition) -> Result<&Value> {
        self.stream_for(&partition.stream, crate::delegation::is_full_refresh(partition))
    }

    /// The cursor of a stream of the manifest, read once.
    pub fn cursor(&self, name: &str) -> Result<Option<Rc<Cursor>>> {
        self.cursor_for(name, false)
    }

    /// The cursor of the stream a partition reads.
    pub fn cursor_read(&self, partition: &Partition) -> Result<Option<Rc<Cursor>>> {
        self.cursor_for(&partition.stream, crate::delegation::is_full_refresh(partition))
    }

    /// The cursor of [`Engine::stream_for`], read once.
    pub fn cursor_for(&self, name: &str, full_refresh: bool) -> Result<Option<Rc<Cursor>>> {
        let full_refresh = full_refresh && self.delegating(name)?.is_some();
        let key = (name.to_string(), full_refresh);
        if let Some(cursor) = self.cursors.borrow().get(&key) {
            return Ok(cursor.clone());
        }
        let cursor = Cursor::of(self, self.stream_for(name, full_refresh)?)?.map(Rc::new);
        self.cursors.borrow_mut().insert(key, cursor.clone());
        Ok(cursor)
    }

    /// The reading plan of a stream, made once.
    pub fn plan(&self, stream: &str, make: impl FnOnce() -> crate::retrieve::Plan) -> Rc<crate::retrieve::Plan> {
        if let Some(plan) = self.plans.borrow().get(stream) {
            return plan.clone();
        }
        let plan = Rc::new(make());
        self.plans.borrow_mut().insert(stream.to_string(), plan.clone());
        plan
    }

    /// The schema a stream's records are cast by (`schema_normalization: Default`, or a custom
    /// TypeTransformer), made once
    /// per stream (a dynamic schema is read from the API); `None` for no normalization.
    pub fn normalization(&self, stream: &Value, name: &str) -> Result<Option<Rc<Value>>> {
        let selector = &stream["retriever"]["record_selector"];
        let custom = selector.get("schema_normalization").is_some_and(crate::custom::is_custom_node);
        if !custom && selector.get("schema_normalization").and_then(Value::as_str) != Some("Default") {
            return Ok(None);
        }
        let key = format!("{name}@{:p}", stream);
        if let Some(schema) = self.schemas.borrow().get(&key) {
            return Ok(schema.clone());
        }
        // The CDK normalizes only by a schema that is not empty.
        let schema = crate::schema::of(self, stream, name)?.filter(|s| !crate::engine::is_py_false(s)).map(Rc::new);
        self.schemas.borrow_mut().insert(key, schema.clone());
        Ok(schema)
    }

    /// The template context for a component: its `$parameters`, the config, the slice, and
    /// whatever else the caller adds (`response`, `record`...).
    pub fn context(&self, component: &Value, scope: &Scope, more: Vec<(&str, Value)>) -> Value {
        // `config` is the interpolator's own, converted once.
        let mut ctx = Map::new();
        ctx.insert("parameters".into(), component.get("$parameters").cloned().unwrap_or_else(|| json!({})));
        // `stream_partition` and `stream_interval` are the whole slice, as in the CDK (the
        // interpolator aliases them).
        let mut slice = scope.slice();
        if !scope.partition.is_empty() {
            // `stream_slice._partition`: the router's slice a per-partition cursor's slice wraps,
            // which the CDK's templates may read (a patch of its Jinja environment for
            // source-jira): the partition's values, `partition` and `extra_fields`.
            let mut partition = scope.partition.clone();
            partition.insert("partition".into(), Value::Object(scope.partition.clone()));
            partition.insert("cursor_slice".into(), json!({}));
            partition.insert("extra_fields".into(), Value::Object(scope.extra.clone()));
            slice["_partition"] = Value::Object(partition);
        }
        ctx.insert("stream_slice".into(), slice);
        ctx.insert("next_page_token".into(), scope.next_page_token.clone().unwrap_or(Value::Null));
        for (k, v) in more {
            ctx.insert(k.to_string(), v);
        }
        Value::Object(ctx)
    }

    /// A field as text, as the CDK builds URLs and names: `str()` of the evaluated template;
    /// numbers and booleans written out, nothing as "".
    pub fn text(&self, field: Option<&Value>, ctx: &Value) -> Result<String> {
        match field {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(t)) => {
                let text = self.once(0, t, || self.interp.eval_str(t, ctx).map(Value::from))?;
                Ok(text.as_str().unwrap_or_default().to_string())
            }
            Some(other) => Ok(other.to_string()),
        }
    }

    /// A field as text, or `default` when it is missing or renders empty.
    pub fn text_or(&self, field: Option<&Value>, ctx: &Value, default: &str) -> Result<String> {
        let text = self.text(field, ctx)?;
        Ok(if text.is_empty() { default.to_string() } else { text })
    }

    /// `evaluate`, or its value from the first time for a template that depends on the config
    /// alone.
    fn once(
        &self,
        how: u8,
        template: &str,
        evaluate: impl FnOnce() -> std::result::Result<Value, String>,
    ) -> Result<Value> {
        let key = (how, template.to_string());
        if let Some(v) = self.constant.borrow().get(&key) {
            return Ok(v.clone());
        }
        let value = evaluate().map_err(Error::config)?;
        if self.interp.depends_on_config_only(template) {
            self.constant.borrow_mut().insert(key, value.clone());
        }
        Ok(value)
    }

    /// A field as a value: templates evaluated as the CDK does (rendered text read back as a
    /// Python literal), anything else as written.
    pub fn value(&self, field: Option<&Value>, ctx: &Value) -> Result<Value> {
        match field {
            None => Ok(Value::Null),
            Some(Value::String(t)) => self.once(1, t, || self.interp.eval(t, ctx)),
            Some(other) => Ok(other.clone()),
        }
    }

    pub fn condition(&self, field: Option<&Value>, ctx: &Value) -> Result<bool> {
        match field {
            None | Some(Value::Null) => Ok(true),
            Some(Value::String(t)) if t.is_empty() => Ok(true),
            Some(Value::String(t)) => self.interp.eval_bool(t, ctx).map_err(Error::config),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(Error::config(format!("a condition must be a template, got {other}"))),
        }
    }

    /// Request inputs (parameters, headers, bodies) as the CDK's request option providers
    /// evaluate them: a mapping of templates, or one template that evaluates to a mapping; `None`
    /// values dropped.
    pub fn inputs(&self, field: Option<&Value>, ctx: &Value, kind: Inputs) -> Result<Map<String, Value>> {
        let Some(inputs) = field.filter(|f| !f.is_null()) else { return Ok(Map::new()) };
        if !self.config_only(inputs) {
            return self.evaluate_inputs(inputs, ctx, kind);
        }
        let key = (2 + kind as u8, inputs.to_string());
        if let Some(Value::Object(map)) = self.constant.borrow().get(&key) {
            return Ok(map.clone());
        }
        let map = self.evaluate_inputs(inputs, ctx, kind)?;
        self.constant.borrow_mut().insert(key, Value::Object(map.clone()));
        Ok(map)
    }

    /// Whether every template in `value` (keys too) depends on the config alone.
    fn config_only(&self, value: &Value) -> bool {
        match value {
            Value::String(t) => self.interp.depends_on_config_only(t),
            Value::Object(map) => map.iter().all(|(k, v)| self.interp.depends_on_config_only(k) && self.config_only(v)),
            Value::Array(items) => items.iter().all(|v| self.config_only(v)),
            _ => true,
        }
    }

    fn evaluate_inputs(&self, inputs: &Value, ctx: &Value, kind: Inputs) -> Result<Map<String, Value>> {
        use crate::interpolation::REQUEST_VALUE_TYPES;
        let field = Some(inputs);
        let evaluated = match field {
            None | Some(Value::Null) => return Ok(Map::new()),
            Some(Value::Object(map)) => match kind {
                Inputs::Params => self.interp.eval_mapping(map, ctx, None, REQUEST_VALUE_TYPES),
                // Headers take any literal, then go out as Python prints them.
                Inputs::Headers => self.interp.eval_mapping(map, ctx, Some(&[]), &[]).map(|m| {
                    m.into_iter()
                        .map(|(k, v)| {
                            let text = if v.is_null() { v } else { Value::from(crate::interpolation::py_str_json(&v)) };
                            (k, text)
                        })
                        .collect()
                }),
                Inputs::Json => self.interp.eval_nested(&Value::Object(map.clone()), ctx).map(|v| match v {
                    Value::Object(m) => m,
                    _ => Map::new(),
                }),
            }
            .map(Value::Object)
            .map_err(Error::config)?,
            Some(Value::String(t)) => self.interp.eval_with(t, ctx, Some(""), &[]).map_err(Error::config)?,
            Some(other) => return Err(Error::config(format!("expected a mapping, got {other}"))),
        };
        match evaluated {
            Value::Object(map) => Ok(map.into_iter().filter(|(_, v)| !v.is_null()).collect()),
            Value::String(s) if s.is_empty() => Ok(Map::new()),
            other => Err(Error::config(format!("expected a mapping, the template gave {other}"))),
        }
    }
}

/// Which request inputs a mapping is, for how its values are typed.
#[derive(Clone, Copy)]
#[repr(u8)]
pub enum Inputs {
    /// Query parameters and form bodies: text or lists.
    Params,
    Headers,
    /// `request_body_json`: any JSON, nested.
    Json,
}

/// A value as a query parameter or header writes it (strings without quotes).
pub fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Whether Python takes the value as false (`None`, `False`, `0`, `""`, `[]`, `{}`): what the
/// CDK's `if value:` tests.
pub fn is_py_false(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

/// The component's type name.
pub fn kind(component: &Value) -> &str {
    component.get("type").and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::same_text;

    /// A manifest of one stream `s` reading `url_base`/x.
    fn one_stream(url_base: &str) -> serde_json::Value {
        serde_json::json!({
            "version": "6.44.0", "type": "DeclarativeSource",
            "check": {"type": "CheckStream", "stream_names": ["s"]},
            "streams": [{"type": "DeclarativeStream", "name": "s", "schema_loader": {"type": "InlineSchemaLoader", "schema": {}},
                "retriever": {"type": "SimpleRetriever",
                    "requester": {"type": "HttpRequester", "url_base": url_base, "path": "/x"},
                    "record_selector": {"type": "RecordSelector", "extractor": {"type": "DpathExtractor", "field_path": []}}}}]
        })
    }

    #[test]
    fn a_read_leaves_the_config_fields_no_template_named_unparsed() {
        // A ListPartitionRouter's keys in the config: every partition's instance loads the engine,
        // and parsing the whole list there made a run's cost grow with the square of its
        // partitions (the dynamic streams' expansion did, for a manifest that has none).
        let manifest = one_stream("{{ config['base_url'] }}");
        let config =
            serde_json::json!({"base_url": "http://127.0.0.1:1", "accounts": [1, 2, 3], super::MANIFEST_KEY: manifest});
        let engine = super::for_read(&config.to_string()).unwrap();
        assert!(!engine.config.was_parsed("accounts"), "no template names the accounts");
    }

    /// `stream_slice._partition`, which the CDK's Jinja environment lets templates read
    /// (source-jira sends a router's extra fields through it).
    #[test]
    fn a_template_reads_the_partition_a_slice_wraps() {
        let manifest = one_stream("http://127.0.0.1:1");
        let config = serde_json::json!({super::MANIFEST_KEY: manifest});
        let engine = super::for_read(&config.to_string()).unwrap();
        let mut scope = super::Scope::default();
        scope.partition.insert("sprint_id".into(), serde_json::json!(11));
        scope.extra.insert("fields".into(), serde_json::json!(["key", "status"]));
        scope.interval.insert("start_time".into(), serde_json::json!("2024-01-01"));
        let ctx = engine.context(&serde_json::json!({}), &scope, Vec::new());
        let read = |t: &str| engine.value(Some(&serde_json::json!(t)), &ctx).unwrap();
        assert_eq!(read("{{ stream_slice._partition.extra_fields['fields'] }}"), serde_json::json!(["key", "status"]));
        assert_eq!(read("{{ stream_slice._partition.partition.sprint_id }}"), serde_json::json!(11));
        assert_eq!(read("{{ stream_slice.sprint_id }}"), serde_json::json!(11));
        assert_eq!(read("{{ stream_slice.start_time }}"), serde_json::json!("2024-01-01"));
    }

    #[test]
    fn texts_compare_as_equal_strings_do() {
        let long = "x".repeat(8 * 5 + 3);
        for (a, b) in [("", ""), ("a", "a"), ("a", "b"), ("abcdefgh", "abcdefgh"), ("abcdefgh", "abcdefgi")] {
            assert_eq!(same_text(a, b), a == b, "{a:?} {b:?}");
        }
        let mut changed = long.clone().into_bytes();
        for at in [0, 7, 8, 39, 40, 42] {
            changed[at] = b'y';
            let c = String::from_utf8(changed.clone()).unwrap();
            assert!(!same_text(&long, &c), "a difference at {at}");
            changed[at] = b'x';
        }
        assert!(same_text(&long, &long.clone()));
        assert!(!same_text(&long, &long[1..]));
    }
}
