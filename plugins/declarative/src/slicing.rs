//! Partition routers and the DatetimeBasedCursor as Sluice partitions, so the host owns what it
//! already owns: concurrency across partitions, state, windows and checkpoints. (An
//! IncrementingCountCursor is one open-ended partition, see `crate::counting`.)
//!
//! - Routers (ListPartitionRouter, SubstreamPartitionRouter, several as a product) give one
//!   partition each, keyed `{"partition": ...}`; with a cursor, each is open-ended: the host
//!   starts it after its saved cursor, and the engine walks the cursor's windows inside it.
//! - A cursor without a router gives one bounded partition per window (`step`), keyed by its
//!   bounds, with a typed cursor range `(start, end]`: the host reads windows concurrently, skips
//!   finished ones and checkpoints window by window.

use crate::datetime::{self, DateTime, Duration};
use crate::engine::{Engine, Scope, kind, plain};
use crate::requester::Options;
use crate::retrieve;
use chrono::FixedOffset;
use serde_json::{Map, Value, json};
use sluice_guest::{CursorRange, CursorValue, Error, Partition, Result};

/// The extra field of a partition that carries its first page, read from the parent record
/// (`lazy_read_pointer`), as the CDK names it.
pub const CHILD_RESPONSE: &str = "child_response";

/// Parent records a substream router lists partitions from, at most.
const MAX_PARENT_RECORDS: usize = 1_000_000;

pub fn routers(retriever: &Value) -> Vec<&Value> {
    match retriever.get("partition_router") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(one) => vec![one],
    }
}

/// The cursor of a stream, read from its `incremental_sync`.
pub struct Cursor {
    pub node: Value,
    pub field: String,
    /// The format slice values are written in (`datetime_format`).
    pub format: String,
    /// The formats record cursor values are read with.
    pub record_formats: Vec<String>,
    pub step: Option<Duration>,
    pub granularity: Duration,
    pub start_name: String,
    pub end_name: String,
    /// The API answers newest first: a record older than the window ends the window's pages.
    pub data_feed: bool,
    /// The API does not filter by the cursor: records outside the window are dropped here.
    pub client_side: bool,
    /// `global_substream_cursor`: one cursor for every partition of a routed stream.
    pub global: bool,
}

impl Cursor {
    pub fn of(engine: &Engine, stream: &Value) -> Result<Option<Cursor>> {
        let Some(node) = stream.get("incremental_sync").filter(|n| !n.is_null()) else { return Ok(None) };
        match kind(node) {
            "DatetimeBasedCursor" => {}
            // Read by `crate::counting`.
            crate::counting::KIND => return Ok(None),
            other => return Err(Error::config(format!("incremental_sync: {other} is not supported"))),
        }
        let ctx = engine.context(node, &Scope::default(), Vec::new());
        let field = engine.text(node.get("cursor_field"), &ctx)?;
        let format = engine.text(node.get("datetime_format"), &ctx)?;
        if field.is_empty() || format.is_empty() {
            return Err(Error::config(
                "incremental_sync: a DatetimeBasedCursor needs cursor_field and datetime_format",
            ));
        }
        let mut record_formats = Vec::new();
        for f in node.get("cursor_datetime_formats").and_then(Value::as_array).into_iter().flatten() {
            record_formats.push(engine.text(Some(f), &ctx)?);
        }
        if record_formats.is_empty() {
            record_formats.push(format.clone());
        }
        let duration = |name: &str| -> Result<Option<Duration>> {
            match engine.text(node.get(name), &ctx)? {
                t if t.is_empty() => Ok(None),
                t => datetime::parse_duration(&t)
                    .map(Some)
                    .map_err(|e| Error::config(format!("incremental_sync.{name}: {e}"))),
            }
        };
        let step = duration("step")?.filter(|d| !d.is_zero());
        let granularity = duration("cursor_granularity")?;
        // As the CDK: both or neither; `PT0S` is a granularity (windows then share their bounds).
        if step.is_some() != granularity.is_some() {
            return Err(Error::config(
                "incremental_sync: step and cursor_granularity go together (set both or neither)",
            ));
        }
        let granularity = granularity.unwrap_or_else(|| datetime::parse_duration("PT0S").unwrap());
        let name = |field: &str, default: &str| engine.text_or(node.get(field), &ctx, default);
        Ok(Some(Cursor {
            node: node.clone(),
            field,
            format,
            record_formats,
            step,
            granularity,
            start_name: name("partition_field_start", "start_time")?,
            end_name: name("partition_field_end", "end_time")?,
            data_feed: node.get("is_data_feed").and_then(Value::as_bool) == Some(true),
            client_side: node.get("is_client_side_incremental").and_then(Value::as_bool) == Some(true),
            global: node.get("global_substream_cursor").and_then(Value::as_bool) == Some(true),
        }))
    }

    /// `start_datetime` / `end_datetime` (a template or a MinMaxDatetime), evaluated.
    fn bound(&self, engine: &Engine, field: &str) -> Result<Option<DateTime>> {
        let Some(spec) = self.node.get(field).filter(|v| !v.is_null()) else { return Ok(None) };
        let (template, format, min, max) = match spec {
            Value::Object(_) => {
                (spec.get("datetime"), spec.get("datetime_format"), spec.get("min_datetime"), spec.get("max_datetime"))
            }
            other => (Some(other), None, None, None),
        };
        let ctx = engine.context(spec, &Scope::default(), Vec::new());
        let format = engine.text_or(format, &ctx, &self.format)?;
        let read = |v: Option<&Value>| -> Result<Option<DateTime>> {
            match engine.text(v, &ctx)? {
                t if t.is_empty() => Ok(None),
                t => datetime::parse(&t, &format)
                    .or_else(|_| datetime::parse_any(&t))
                    .map(Some)
                    .map_err(|e| Error::config(format!("incremental_sync.{field}: {e}"))),
            }
        };
        let Some(mut at) = read(template)? else { return Ok(None) };
        if let Some(min) = read(min)? {
            at = at.max(min);
        }
        if let Some(max) = read(max)? {
            at = at.min(max);
        }
        Ok(Some(at))
    }

    pub fn start(&self, engine: &Engine) -> Result<DateTime> {
        self.bound(engine, "start_datetime")?
            .ok_or_else(|| Error::config("incremental_sync: start_datetime is required"))
    }

    pub fn end(&self, engine: &Engine) -> Result<DateTime> {
        Ok(self.bound(engine, "end_datetime")?.unwrap_or_else(chrono::Utc::now))
    }

    pub fn lookback(&self, engine: &Engine) -> Result<Option<Duration>> {
        let ctx = engine.context(&self.node, &Scope::default(), Vec::new());
        match engine.text(self.node.get("lookback_window"), &ctx)? {
            t if t.is_empty() => Ok(None),
            t => datetime::parse_duration(&t)
                .map(Some)
                .map_err(|e| Error::config(format!("incremental_sync.lookback_window: {e}"))),
        }
    }

    /// The windows `[start, end]` covering `from..=to`, as the CDK cuts them.
    pub fn windows(&self, from: DateTime, to: DateTime) -> Vec<(DateTime, DateTime)> {
        let mut windows = Vec::new();
        let mut start = from;
        while let Some((s, end)) = self.window_from(start, to)
            && windows.len() < 1_000_000
        {
            windows.push((s, end));
            let next = self.granularity.add_to(&end);
            if next <= start || self.step.is_none() {
                break;
            }
            start = next;
        }
        windows
    }

    /// The window starting at `start`, when it is not past `to`: `step` long (less one
    /// granularity), or up to `to` without a step.
    pub fn window_from(&self, start: DateTime, to: DateTime) -> Option<(DateTime, DateTime)> {
        if start > to {
            return None;
        }
        let end = match &self.step {
            Some(step) => self.granularity.sub_from(&step.add_to(&start)).min(to),
            None => to,
        };
        Some((start, end))
    }

    /// A cursor value for the host, of the kind the records' values are: a number for epoch
    /// formats, an RFC 3339 date-time when the format writes one, text otherwise.
    pub fn host_value(&self, at: &DateTime) -> CursorValue {
        let format = &self.record_formats[0];
        let text = datetime::format(at, format);
        if let Ok(n) = text.parse::<i64>() {
            return CursorValue::Integer(n);
        }
        if sluice_guest::slice::parse_rfc3339(&text).is_ok() {
            return CursorValue::Datetime(sluice_guest::slice::format_rfc3339(at.timestamp()));
        }
        CursorValue::Text(text)
    }

    /// A host cursor value read back as a date-time.
    pub fn from_host(&self, value: &CursorValue) -> Result<DateTime> {
        let text = value.to_query_value();
        for format in &self.record_formats {
            if let Ok(at) = datetime::parse(&text, format) {
                return Ok(at);
            }
        }
        datetime::parse_any(&text).map_err(|e| Error::system(format!("the cursor value {text:?}: {e}")))
    }

    /// A record's cursor value as a date-time, when it has one the formats read.
    pub fn of_record(&self, record: &str) -> Option<DateTime> {
        let record: Value = serde_json::from_str(record).ok()?;
        let value = match record.get(&self.field)? {
            Value::String(s) => CursorValue::Text(s.clone()),
            Value::Number(n) => CursorValue::Integer(n.as_i64()?),
            _ => return None,
        };
        self.from_host(&value).ok()
    }

    /// The slice's interval as templates see it (`stream_interval`).
    pub fn interval(&self, start: &DateTime, end: &DateTime) -> Map<String, Value> {
        self.interval_in(start, end, None, false)
    }

    /// The interval with its bounds written in `offset`, the offset of the saved value its
    /// window comes from (the CDK's datetimes keep it, in templates and requests alike); with
    /// `utc_end`, the end (the sync's end, `now`) in UTC.
    pub fn interval_in(
        &self,
        start: &DateTime,
        end: &DateTime,
        offset: Option<FixedOffset>,
        utc_end: bool,
    ) -> Map<String, Value> {
        let text = |at: &DateTime, offset: Option<FixedOffset>| match offset {
            Some(o) => datetime::format_with_offset(&at.with_timezone(&o), &self.format),
            None => datetime::format(at, &self.format),
        };
        let mut m = Map::new();
        m.insert(self.start_name.clone(), Value::from(text(start, offset)));
        m.insert(self.end_name.clone(), Value::from(text(end, if utc_end { None } else { offset })));
        m
    }

    /// The offset a cursor value was written with, when one of the formats reads it.
    pub fn offset_of(&self, text: &str) -> Option<FixedOffset> {
        std::iter::once(&self.format)
            .chain(self.record_formats.iter())
            .find_map(|f| datetime::parse_with_offset(text, f).ok())
            .map(|at| *at.offset())
            .filter(|o| o.local_minus_utc() != 0)
    }
}

/// What a stream's cursor adds to a slice's requests.
pub trait Inject {
    fn inject(&self, engine: &Engine, scope: &Scope, options: &mut Options) -> Result<()>;
}

impl Inject for Cursor {
    /// `start_time_option` / `end_time_option` for this interval.
    fn inject(&self, engine: &Engine, scope: &Scope, options: &mut Options) -> Result<()> {
        let ctx = engine.context(&self.node, scope, Vec::new());
        for (option, name) in [("start_time_option", &self.start_name), ("end_time_option", &self.end_name)] {
            if let (Some(option), Some(value)) =
                (self.node.get(option).filter(|o| !o.is_null()), scope.interval.get(name))
            {
                options.inject(engine, option, value, &ctx)?;
            }
        }
        Ok(())
    }
}

/// The partitions of a stream, given the state the host was handed for it.
pub fn partitions(engine: &Engine, stream_name: &str, state: Option<&Value>) -> Result<Vec<Partition>> {
    // A StateDelegatingStream without a state (or with one past the API's retention) reads its
    // full-refresh stream, from nothing.
    if let Some(delegating) = engine.delegating(stream_name)?
        && crate::delegation::reads_in_full(engine, delegating, state)?
    {
        let mut partitions = partitions_of(engine, &delegating.full_refresh, stream_name, None)?;
        partitions.iter_mut().for_each(crate::delegation::mark_full_refresh);
        return Ok(partitions);
    }
    partitions_of(engine, engine.stream(stream_name)?, stream_name, state)
}

/// The partitions of a stream given by its manifest node (a parent stream is one too). Windows
/// start where the CDK's would from the saved state ([`crate::state::windows_from`]).
pub fn partitions_of(
    engine: &Engine,
    stream: &Value,
    stream_name: &str,
    state: Option<&Value>,
) -> Result<Vec<Partition>> {
    let retriever = &stream["retriever"];
    // One open-ended partition (a router beside it is refused when the manifest loads).
    if let Some(counter) = crate::counting::Counter::of(engine, stream)? {
        return Ok(vec![counter.partition(stream_name, state)?]);
    }
    let cursor = Cursor::of(engine, stream)?;
    if let Some(cursor) = &cursor
        && crate::dependency::follows(engine, stream)?
    {
        return dependent_partitions(engine, stream, stream_name, cursor, state);
    }
    let routed = route(engine, retriever, stream_name)?;
    match (routed, cursor) {
        (None, None) => Ok(vec![Partition::whole(stream_name)]),
        (None, Some(cursor)) => {
            let mut out = Vec::new();
            let ((from, offset), to) =
                (crate::state::windows_from(engine, &cursor, state, stream_name)?, cursor.end(engine)?);
            let windows = cursor.windows(from, to);
            let last = windows.len().saturating_sub(1);
            for (i, (start, end)) in windows.into_iter().enumerate() {
                let mut key = json!({"start": datetime::format(&start, "%Y-%m-%dT%H:%M:%S%z"), "end": datetime::format(&end, "%Y-%m-%dT%H:%M:%S%z")});
                // The saved value's offset, which the windows keep (the last one ends at `now`, UTC).
                if let Some(offset) = offset {
                    key["offset"] = json!(offset.local_minus_utc());
                    if i == last {
                        key["utc_end"] = json!(true);
                    }
                }
                let mut p = Partition::keyed(stream_name, key)?;
                // `(start, end]` for the host: the window starts one granularity after it.
                p.cursor_range = Some(CursorRange {
                    start: Some(cursor.host_value(&cursor.granularity.sub_from(&start))),
                    end: Some(cursor.host_value(&end)),
                });
                out.push(p);
            }
            Ok(out)
        }
        (Some(mut slices), cursor) => {
            // The CDK reads a first page from the parent record only in a sync without state
            // (its LazySimpleRetriever); with one, every page is requested.
            if !crate::state::is_empty(state) {
                slices.iter_mut().for_each(|(_, extra)| drop(extra.remove(CHILD_RESPONSE)));
            }
            // A routed partition's start is the first value it reads (as the CDK reads a
            // partition's saved cursor again): `start_datetime` when nothing is saved.
            let start = match &cursor {
                Some(c) => Some(c.host_value(&c.start(engine)?)),
                None => None,
            };
            slices
                .into_iter()
                .map(|(partition, extra)| {
                    let mut key = json!({"partition": partition});
                    if !extra.is_empty() {
                        key["extra_fields"] = Value::Object(extra);
                    }
                    let p = Partition::keyed(stream_name, key)?;
                    Ok(if cursor.is_some() { p.starting_at(start.clone()) } else { p })
                })
                .collect()
        }
    }
}

/// The partitions of a substream that follows `incremental_dependency`
/// ([`crate::dependency`]): its dependent parents read from the parent states the saved state
/// holds, each partition started where the CDK starts it (its own saved cursor, else the global
/// cursor less the lookback window, else `start_datetime`) and tagged with the listing: its id,
/// how many partitions it has and the parent states it reached.
fn dependent_partitions(
    engine: &Engine,
    stream: &Value,
    stream_name: &str,
    cursor: &Cursor,
    state: Option<&Value>,
) -> Result<Vec<Partition>> {
    use crate::dependency::{self, LISTING};
    // The listing is handed the state as saved: in the CDK's shape, read as `to_host` reads it
    // (the host's resume data beside it left out), or in the host's own form.
    let host = match state.and_then(Value::as_object) {
        Some(object) => {
            let shaped: Map<String, Value> = object
                .iter()
                .filter(|(k, _)| !k.starts_with("__sluice"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let shaped = Value::Object(shaped);
            crate::state::to_host(engine, stream_name, &shaped)?.or(Some(shaped))
        }
        None => None,
    };
    let saved = host.as_ref().map(|s| dependency::read_host(cursor, s)).unwrap_or_default();
    let mut parents = Parents { saved: saved.parent_states.clone().unwrap_or_default(), reached: Map::new() };
    let mut slices = route_in(engine, &stream["retriever"], stream_name, Some(&mut parents))?.unwrap_or_default();
    if !crate::state::is_empty(state) {
        slices.iter_mut().for_each(|(_, extra)| drop(extra.remove(CHILD_RESPONSE)));
    }
    let start = cursor.host_value(&cursor.start(engine)?);
    let new_from = saved.new_from.as_ref().and_then(dependency::cursor_value).unwrap_or(start);
    // Each partition once (the host keeps one cursor per key), as the CDK reads a partition once.
    let mut seen = std::collections::HashSet::new();
    let mut listed: Vec<(Value, CursorValue)> = Vec::new();
    for (partition, extra) in slices {
        let text = dependency::canonical(&Value::Object(partition.clone()));
        let own = saved.own.get(&text).and_then(|(_, v)| dependency::cursor_value(v));
        let mut key = json!({"partition": partition});
        if !extra.is_empty() {
            key["extra_fields"] = Value::Object(extra);
        }
        if seen.insert(key.to_string()) {
            listed.push((key, own.unwrap_or_else(|| new_from.clone())));
        }
    }
    let keys: Vec<Value> = listed.iter().map(|(k, _)| k.clone()).collect();
    let tag = json!({"id": dependency::listing_id(&parents.reached, &keys), "of": listed.len(), "parent_state": parents.reached});
    listed
        .into_iter()
        .map(|(mut key, start)| {
            key[LISTING] = tag.clone();
            Ok(Partition::keyed(stream_name, key)?.starting_at(Some(start)))
        })
        .collect()
}

pub type Slice = (Map<String, Value>, Map<String, Value>);

/// The parent states of a listing that follows `incremental_dependency`: those it starts from
/// (by parent stream name) and those it reaches.
pub struct Parents {
    pub saved: Map<String, Value>,
    pub reached: Map<String, Value>,
}

/// The router's slices (partition and extra fields), the product of several routers; `None`
/// without a router.
pub fn route(engine: &Engine, retriever: &Value, stream: &str) -> Result<Option<Vec<Slice>>> {
    route_in(engine, retriever, stream, None)
}

/// [`route`], its dependent parents (with `parents`) read from their saved states.
fn route_in(
    engine: &Engine,
    retriever: &Value,
    stream: &str,
    mut parents: Option<&mut Parents>,
) -> Result<Option<Vec<Slice>>> {
    let routers = routers(retriever);
    if routers.is_empty() {
        return Ok(None);
    }
    let mut product: Vec<Slice> = vec![(Map::new(), Map::new())];
    for (i, router) in routers.iter().enumerate() {
        let own = router_slices(engine, router, stream, i, parents.as_deref_mut())?;
        let mut next = Vec::with_capacity(product.len() * own.len());
        // As the CDK's CartesianProductStreamSlicer joins them, with `dict(ChainMap(...))`: the
        // last router's keys first, and on a key two routers share, the first router's value.
        let chain = |later: &Map<String, Value>, earlier: &Map<String, Value>| {
            let mut joined = later.clone();
            joined.extend(earlier.iter().map(|(k, v)| (k.clone(), v.clone())));
            joined
        };
        for (p, e) in &product {
            for (op, oe) in &own {
                next.push((chain(op, p), chain(oe, e)));
            }
        }
        product = next;
    }
    Ok(Some(product))
}

pub(crate) fn router_slices(
    engine: &Engine,
    router: &Value,
    stream: &str,
    index: usize,
    mut parents: Option<&mut Parents>,
) -> Result<Vec<Slice>> {
    if crate::custom::is_custom_node(router) {
        return crate::custom::router_slices(engine, router, stream, index, parents);
    }
    let ctx = engine.context(router, &Scope::default(), Vec::new());
    match kind(router) {
        "ListPartitionRouter" => {
            let field = engine.text(router.get("cursor_field"), &ctx)?;
            let values = match engine.value(router.get("values"), &ctx)? {
                Value::Array(v) => v,
                Value::String(s) => s.split(',').map(|v| Value::from(v.trim())).collect(),
                other => {
                    return Err(Error::config(format!(
                        "stream {stream}: ListPartitionRouter values must be a list, got {other}"
                    )));
                }
            };
            Ok(values.into_iter().map(|v| (Map::from_iter([(field.clone(), v)]), Map::new())).collect())
        }
        "SubstreamPartitionRouter" => {
            let mut slices = Vec::new();
            for parent in router.get("parent_stream_configs").and_then(Value::as_array).into_iter().flatten() {
                let ctx = engine.context(parent, &Scope::default(), Vec::new());
                let key = engine.text(parent.get("parent_key"), &ctx)?;
                let field = engine.text(parent.get("partition_field"), &ctx)?;
                let extra_paths: Vec<Vec<String>> = parent
                    .get("extra_fields")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|p| p.as_array().map(|p| p.iter().map(plain).collect()).unwrap_or_default())
                            .collect()
                    })
                    .unwrap_or_default();
                // `lazy_read_pointer`: where in a parent record its first page of children is.
                let lazy: Option<Vec<String>> = match parent.get("lazy_read_pointer") {
                    Some(Value::Array(path)) if !path.is_empty() => {
                        let path: Vec<String> =
                            path.iter().map(|p| engine.text(Some(p), &ctx)).collect::<Result<_>>()?;
                        if path.iter().any(|p| p.contains('*')) {
                            // The CDK's own words.
                            return Err(Error::config(format!(
                                "stream {stream}: The '*' wildcard in 'lazy_read_pointer' is not supported — only \
                                 direct paths are allowed."
                            )));
                        }
                        Some(path)
                    }
                    _ => None,
                };
                let parent_stream = &parent["stream"];
                let records = match parents.as_deref_mut().filter(|_| crate::dependency::depends(parent)) {
                    Some(parents) => read_dependent(engine, parent, parents)?,
                    None => retrieve::read_all(engine, parent_stream, MAX_PARENT_RECORDS)?,
                };
                for (parent_slice, record) in records {
                    let Some(value) = dpath(&record, &key) else { continue };
                    let mut partition = Map::new();
                    partition.insert(field.clone(), value.clone());
                    partition.insert("parent_slice".into(), Value::Object(parent_slice));
                    let mut extra = Map::new();
                    for path in &extra_paths {
                        if let Some(v) = path.iter().try_fold(&record, |node, k| node.get(k)) {
                            extra.insert(path.join("."), v.clone());
                        }
                    }
                    if let Some(path) = &lazy {
                        // dpath's default: no children there is an empty list.
                        let children = path.iter().try_fold(&record, |node, k| node.get(k)).cloned();
                        extra.insert(CHILD_RESPONSE.into(), children.unwrap_or_else(|| json!([])));
                    }
                    slices.push((partition, extra));
                }
            }
            Ok(slices)
        }
        other => Err(Error::config(format!(
            "stream {stream}: retriever.partition_router[{index}]: {other} is not supported"
        ))),
    }
}

/// A dependent parent's records, read from its saved state, and the state it reached: a parent
/// with a DatetimeBasedCursor (and no router of its own) is read from the saved state as it
/// would read itself, and reaches the newest cursor value read (never before where it started);
/// any other parent is read in full and its saved state handed on as it was.
fn read_dependent(engine: &Engine, parent: &Value, parents: &mut Parents) -> Result<Vec<(Map<String, Value>, Value)>> {
    let stream = &parent["stream"];
    let name = crate::dependency::parent_name(parent);
    let saved = parents.saved.get(&name);
    let cursor = Cursor::of(engine, stream)?.filter(|_| routers(&stream["retriever"]).is_empty());
    let Some(cursor) = cursor else {
        if let Some(saved) = saved {
            parents.reached.insert(name, saved.clone());
        }
        return retrieve::read_all(engine, stream, MAX_PARENT_RECORDS);
    };
    let mut read = crate::dependency::ParentRead::new(engine, &cursor, saved, &name)?;
    let records = retrieve::read_all_from(engine, stream, MAX_PARENT_RECORDS, saved)?;
    records.iter().for_each(|(_, record)| read.observe(record));
    parents.reached.insert(name, read.state());
    Ok(records)
}

/// `a/b/c` (or `a.b` is not split: dpath uses `/`) in a record.
fn dpath<'v>(record: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('/').try_fold(record, |node, k| node.get(k)).filter(|v| !v.is_null())
}

/// The request options the routers add for a partition.
pub fn inject_routers(engine: &Engine, retriever: &Value, scope: &Scope, options: &mut Options) -> Result<()> {
    for router in routers(retriever) {
        let ctx = engine.context(router, scope, Vec::new());
        // A custom router that reads parents (a SubstreamPartitionRouter's subclass) injects as
        // its base class does; another one says its own request options.
        let substream = router.get("parent_stream_configs").is_some();
        if crate::custom::is_custom_node(router) && !substream {
            crate::custom::inject_router(engine, router, scope, options)?;
            continue;
        }
        let kind = match crate::custom::is_custom_node(router) {
            true => "SubstreamPartitionRouter",
            false => kind(router),
        };
        match kind {
            "ListPartitionRouter" => {
                if let Some(option) = router.get("request_option").filter(|o| !o.is_null()) {
                    let field = engine.text(router.get("cursor_field"), &ctx)?;
                    // As the CDK's routers: a value Python takes as false (0, "") is not injected.
                    if let Some(v) = scope.partition.get(&field).filter(|v| !crate::engine::is_py_false(v)) {
                        options.inject(engine, option, v, &ctx)?;
                    }
                }
            }
            "SubstreamPartitionRouter" => {
                for parent in router.get("parent_stream_configs").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(option) = parent.get("request_option").filter(|o| !o.is_null()) {
                        let field = engine.text(parent.get("partition_field"), &ctx)?;
                        // As the CDK's routers: a value Python takes as false (0, "") is not injected.
                        if let Some(v) = scope.partition.get(&field).filter(|v| !crate::engine::is_py_false(v)) {
                            options.inject(engine, option, v, &ctx)?;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
