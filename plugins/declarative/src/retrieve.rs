//! SimpleRetriever: one page of a partition. Paginators become page tokens the host keeps
//! (`{"next": <the paginator's value>}`, plus the window being read when a routed partition walks
//! its cursor's windows), so the engine keeps nothing between calls.

use crate::counting::Counter;
use crate::datetime::DateTime;
use crate::engine::{Engine, Scope, kind};
use crate::pagination_reset::{Policy, Tracker};
use crate::records::{self, Shaper};
use crate::requester::{self, Answer, Options};
use crate::slicing::{self, Cursor, Inject};
use serde_json::{Map, Value, json};
use sluice_guest::{Error, Page, Partition, Result, http};

/// Pages one partition may have; a paginator that never stops is cut here.
pub const MAX_PAGES: u64 = 1_000_000;

/// What the paginator said about the page just read.
pub struct Paged {
    /// Each record as JSON text.
    pub records: Vec<String>,
    /// The next page token value, or `None` at the end.
    pub next: Option<Value>,
    /// The API asked for the pagination to be reset (RESET_PAGINATION).
    pub reset: bool,
}

/// Where a partition is being read: the page token, with date-times as Unix microseconds (read
/// and written on every page, so kept cheap).
#[derive(Default)]
struct Position {
    next: Option<Value>,
    window: Option<(DateTime, DateTime)>,
    /// Where an open-ended partition's windows end (the cursor's end when the partition began).
    until: Option<DateTime>,
    page: u64,
    /// What `pagination_reset` tracks.
    tracker: Tracker,
}

impl Position {
    fn parse(token: Option<Value>) -> Result<Position> {
        let Some(token) = token else { return Ok(Position::default()) };
        let bad = || Error::system(format!("the host sent a page token this engine did not make: {token}"));
        let next = token.get("next").filter(|v| !v.is_null()).cloned();
        let window = match token.get("window") {
            Some(Value::Array(w)) if w.len() == 2 => {
                let at = |v: &Value| v.as_i64().and_then(DateTime::from_timestamp_micros).ok_or_else(bad);
                Some((at(&w[0])?, at(&w[1])?))
            }
            None | Some(Value::Null) => None,
            _ => return Err(bad()),
        };
        let until = match token.get("until") {
            Some(v) if !v.is_null() => Some(v.as_i64().and_then(DateTime::from_timestamp_micros).ok_or_else(bad)?),
            _ => None,
        };
        let page = token.get("page").and_then(Value::as_u64).unwrap_or(0);
        let tracker = Tracker::parse(&token).unwrap_or_default();
        Ok(Position { next, window, until, page, tracker })
    }

    fn token(&self) -> Value {
        let mut t = json!({"next": self.next, "page": self.page});
        if let Some((s, e)) = &self.window {
            t["window"] = json!([s.timestamp_micros(), e.timestamp_micros()]);
        }
        if let Some(until) = &self.until {
            t["until"] = json!(until.timestamp_micros());
        }
        self.tracker.write(&mut t);
        t
    }
}

/// The scope of a partition: its router slice and extra fields (from the key).
pub fn scope_of(partition: &Partition) -> Scope {
    let mut scope = Scope::default();
    if let Some(Value::Object(p)) = partition.key.get("partition") {
        scope.partition = p.clone();
    }
    if let Some(Value::Object(e)) = partition.key.get("extra_fields") {
        scope.extra = e.clone();
    }
    scope
}

/// Reads one page of a partition of a SimpleRetriever stream.
pub fn read_page(engine: &Engine, partition: &Partition, token: Option<Value>) -> Result<Page> {
    let stream = engine.stream_read(partition)?;
    let retriever = &stream["retriever"];
    if kind(retriever) != "SimpleRetriever" {
        return Err(Error::system(format!(
            "stream {} is read through report jobs, not page by page",
            partition.stream
        )));
    }
    let mut position = Position::parse(token)?;
    if position.page >= MAX_PAGES {
        return Err(Error::system(format!(
            "stream {}: more than {MAX_PAGES} pages in one partition",
            partition.stream
        )));
    }
    let mut scope = scope_of(partition);
    // The parent record's first page is the partition's first page only.
    if position.page > 0 {
        scope.extra.remove(slicing::CHILD_RESPONSE);
    }
    let cursor = engine.cursor_read(partition)?;
    if let Some(cursor) = &cursor
        && !enter_window(engine, cursor, partition, &mut position, &mut scope)?
    {
        // Nothing to read: the partition starts after its end.
        return Ok(Page { records: Vec::new(), next_token: None });
    }
    // An IncrementingCountCursor's one slice: from the partition's start, with no end.
    let counter = match &cursor {
        Some(_) => None,
        None => Counter::of(engine, stream)?,
    };
    if let Some(counter) = &counter {
        scope.interval = Counter::interval(counter.start_of(partition)?);
    }
    let inject = injector(cursor.as_deref(), counter.as_ref());
    let mut paged = read_slice(engine, stream, inject, &scope, position.next.take(), &partition.stream)?;
    if let (Some(c), Some(window)) = (&cursor, position.window) {
        keep_in_window(c, window, &mut paged);
    }
    let records = paged.records;
    position.page += 1;
    let tracked = retriever.get("pagination_reset").is_some_and(|r| !r.is_null());
    if tracked || paged.reset {
        let policy = Policy::of(engine, retriever, cursor.as_deref(), &partition.stream)?;
        let newest = cursor.as_ref().and_then(|c| records.iter().filter_map(|r| c.of_record(r)).max());
        position.tracker.observe(records.len(), newest);
        if paged.reset || position.tracker.reached_limit(&policy) {
            let start = position.window.map(|(start, _)| start);
            if let (Some(window), Some(moved)) =
                (position.window.as_mut(), position.tracker.reset(&policy, start, &partition.stream)?)
            {
                window.0 = moved;
            }
            position.next = None;
            sluice_guest::log::info(format!(
                "stream {}: a pagination reset: the slice is read again from its first page{}",
                partition.stream,
                position.window.map(|(start, _)| format!(", from {}", start.to_rfc3339())).unwrap_or_default()
            ));
            return Ok(Page { records, next_token: Some(position.token()) });
        }
    }
    let next_token = match paged.next {
        Some(next) => {
            position.next = Some(next);
            Some(position.token())
        }
        None => {
            // The window is done: the next one, for a routed partition walking its windows.
            let next_window = match (&cursor, position.window, position.until) {
                (Some(c), Some((_, end)), Some(until)) if end < until => {
                    c.window_from(c.granularity.add_to(&end), until).filter(|(s, _)| *s > end)
                }
                _ => None,
            };
            next_window.map(|w| {
                position.window = Some(w);
                position.next = None;
                position.token()
            })
        }
    };
    Ok(Page { records, next_token })
}

/// Sets the window a partition's page reads, the token's or else the partition's first, and
/// the interval its templates see (`stream_interval`); false when there is none to read (the
/// partition starts after its end).
fn enter_window(
    engine: &Engine,
    cursor: &Cursor,
    partition: &Partition,
    position: &mut Position,
    scope: &mut Scope,
) -> Result<bool> {
    let window = match position.window {
        Some(w) => w,
        None => {
            let until = match partition.cursor_end() {
                Some(end) => cursor.from_host(end)?,
                None => cursor.end(engine)?,
            };
            position.until = Some(until);
            match first_window(engine, cursor, partition, until)? {
                Some(first) => first,
                None => return Ok(false),
            }
        }
    };
    position.window = Some(window);
    // The offset the window's start was saved with, kept as the CDK keeps it.
    let (offset, utc_end) = match partition.cursor_end() {
        Some(_) => (
            partition.key.get("offset").and_then(Value::as_i64).and_then(|s| chrono::FixedOffset::east_opt(s as i32)),
            partition.key.get("utc_end").and_then(Value::as_bool) == Some(true),
        ),
        None => (
            partition.cursor_start().and_then(|v| cursor.offset_of(&v.to_query_value())),
            position.until == Some(window.1),
        ),
    };
    scope.interval = cursor.interval_in(&window.0, &window.1, offset, utc_end);
    Ok(true)
}

/// What adds a stream's cursor to its requests: its DatetimeBasedCursor or its counter.
fn injector<'c>(cursor: Option<&'c Cursor>, counter: Option<&'c Counter>) -> Option<&'c dyn Inject> {
    match (cursor, counter) {
        (Some(cursor), _) => Some(cursor),
        (None, Some(counter)) => Some(counter),
        (None, None) => None,
    }
}

/// The first window of a partition: a bounded partition is one window (its start raised by the
/// host when part of it is finished); an open-ended one runs from its start (the saved cursor,
/// less the lookback window) to the cursor's end, cut by `step`, and its later windows follow
/// from the page token.
fn first_window(
    engine: &Engine,
    cursor: &Cursor,
    partition: &Partition,
    until: DateTime,
) -> Result<Option<(DateTime, DateTime)>> {
    // A window `(start, end]` starts one granularity after its start; the lookback was applied
    // when the windows were listed. A routed partition reads from its start again (its saved
    // cursor, as the CDK reads a partition's), less the lookback window.
    let bounded = partition.cursor_end().is_some();
    let from = match partition.cursor_start() {
        Some(v) if bounded => cursor.granularity.add_to(&cursor.from_host(v)?),
        Some(v) => {
            let at = cursor.from_host(v)?;
            match cursor.lookback(engine)? {
                Some(back) => back.sub_from(&at).max(cursor.start(engine)?),
                None => at,
            }
        }
        None => cursor.start(engine)?,
    };
    Ok(match partition.cursor_end() {
        Some(_) => (from <= until).then_some((from, until)),
        None => cursor.window_from(from, until),
    })
}

/// One request of a slice (router partition and cursor interval) and its records.
pub fn read_slice(
    engine: &Engine,
    stream: &Value,
    cursor: Option<&dyn Inject>,
    scope: &Scope,
    next: Option<Value>,
    name: &str,
) -> Result<Paged> {
    let retriever = &stream["retriever"];
    let paginator = retriever.get("paginator").filter(|p| !p.is_null() && kind(p) != "NoPagination");
    let mut scope = scope.clone();
    // A first page the parent record carried (`lazy_read_pointer`) is not requested.
    let given = match next {
        None => scope.extra.get(slicing::CHILD_RESPONSE).cloned(),
        Some(_) => None,
    };
    let next = match (next, paginator) {
        (Some(next), _) => Some(next),
        (None, Some(p)) => initial_token(engine, p)?,
        (None, None) => None,
    };
    scope.next_page_token = next.as_ref().map(|v| json!({"next_page_token": v}));
    let shaper = Shaper::of(engine, stream, name)?;
    // By the stream's place in the manifest (a parent stream may share a name with another).
    let plan = engine.plan(&format!("{name}@{:p}", stream), || Plan::of(retriever, paginator));
    let (response, taken) = match given {
        Some(children) => {
            let body = serde_json::to_vec(&children).map_err(|e| Error::system(e.to_string()))?;
            (http::Response { url: String::new(), status: 200, headers: Vec::new(), body }, None)
        }
        None => {
            let options = request_options(engine, retriever, paginator, cursor, &scope, next.as_ref())?;
            let requester = &retriever["requester"];
            let path = format!("streams.{name}.retriever.requester");
            let records_at = plan.records_at.as_deref().filter(|_| shaper.is_noop());
            match requester::send_taking(engine, requester, &scope, &options, &path, records_at)? {
                Answer::Ok((response, taken)) => (response, taken),
                Answer::Ignored => return Ok(Paged { records: Vec::new(), next: None, reset: false }),
                Answer::ResetPagination(_) => return Ok(Paged { records: Vec::new(), next: None, reset: true }),
            }
        }
    };
    let extracted = match taken {
        Some(records) => Extracted::taken(records, &response.body, plan.wants_last),
        None => Extracted::read(engine, retriever, paginator, &shaper, &scope, &response, name)?,
    };
    let next = match paginator {
        None => None,
        Some(p) if crate::custom::is_custom_node(strategy(p)) => {
            let (token, n) = (next.as_ref(), extracted.page_size);
            crate::custom::next_page_token(engine, strategy(p), &response, n, &extracted.last_record, token)?
        }
        Some(p) => {
            let headers = match plan.wants_headers {
                true => requester::headers_value(&response),
                false => Value::Object(Map::new()),
            };
            let Extracted { records: _, response_doc, page_size, last_record } = &extracted;
            next_token(
                engine,
                p,
                &scope,
                next.as_ref(),
                response_doc.clone(),
                headers,
                last_record.clone(),
                *page_size,
            )?
        }
    };
    Ok(Paged { records: extracted.records, next, reset: false })
}

/// What a request of a slice sends besides the requester's own: the routers' and the cursor's
/// fields (unless a paginated request leaves them out) and the paginator's.
fn request_options(
    engine: &Engine,
    retriever: &Value,
    paginator: Option<&Value>,
    cursor: Option<&dyn Inject>,
    scope: &Scope,
    next: Option<&Value>,
) -> Result<Options> {
    let mut options = Options::default();
    let ignore_slicers =
        retriever.get("ignore_stream_slicer_parameters_on_paginated_requests").and_then(Value::as_bool) == Some(true)
            && next.is_some();
    if !ignore_slicers {
        slicing::inject_routers(engine, retriever, scope, &mut options)?;
        if let Some(cursor) = cursor {
            cursor.inject(engine, scope, &mut options)?;
        }
    }
    if let Some(p) = paginator {
        inject_paginator(engine, p, scope, next, &mut options)?;
    }
    Ok(options)
}

/// A page's records, and what its paginator reads of the answer.
struct Extracted {
    /// Each record as JSON text, shaped.
    records: Vec<String>,
    /// The answer as the paginator's templates see it (`response`).
    response_doc: Value,
    /// Records on the page before filtering, and the last of them.
    page_size: usize,
    last_record: Value,
}

impl Extracted {
    /// Records the host took out of the answer (`send-records`): `rest` is the answer without
    /// them.
    fn taken(records: Vec<String>, rest: &[u8], wants_last: bool) -> Extracted {
        let last_record = match wants_last {
            true => records.last().and_then(|r| serde_json::from_str(r).ok()).unwrap_or(Value::Null),
            false => Value::Null,
        };
        let response_doc = serde_json::from_slice(rest).unwrap_or(Value::Null);
        Extracted { page_size: records.len(), records, response_doc, last_record }
    }

    /// Records read by the engine: the body decoded, the extractor applied, the records shaped.
    fn read(
        engine: &Engine,
        retriever: &Value,
        paginator: Option<&Value>,
        shaper: &Shaper,
        scope: &Scope,
        response: &http::Response,
        name: &str,
    ) -> Result<Extracted> {
        let decoder = retriever.get("decoder");
        let selector = &retriever["record_selector"];
        let extractor = selector.get("extractor");
        let custom_extractor = extractor.filter(|e| crate::custom::is_custom_node(e));
        let docs = match custom_extractor {
            // The paginator's `response` only: what the custom extractor reads is its own.
            Some(_) if paginator.is_none() => Vec::new(),
            Some(_) => records::decode(decoder, &response.body, &response.url).unwrap_or_default(),
            None => crate::custom::decode(engine, decoder, response)?,
        };
        let ctx = engine.context(selector, scope, Vec::new());
        // The paginator's templates see the first document as `response`.
        let response_doc = match paginator {
            Some(_) => docs.first().cloned().unwrap_or(Value::Null),
            None => Value::Null,
        };
        let mut extracted = Vec::new();
        match custom_extractor {
            Some(e) => extracted = crate::custom::extract_records(engine, e, response)?,
            None => {
                for doc in docs {
                    records::extract(engine, extractor, doc, &ctx, &mut extracted)?;
                }
            }
        }
        let page_size = extracted.len();
        let last_record = extracted.last().cloned().unwrap_or(Value::Null);
        let records = shaper.texts(extracted, scope, name)?;
        Ok(Extracted { records, response_doc, page_size, last_record })
    }
}

/// What the engine works out once per stream about reading its pages.
pub struct Plan {
    /// Where the host can take the records out of the answer (`send-records`), when the
    /// extractor's path allows it.
    pub records_at: Option<Vec<String>>,
    /// Whether the paginator's templates look at `last_record` or `headers`.
    pub wants_last: bool,
    pub wants_headers: bool,
}

impl Plan {
    fn of(retriever: &Value, paginator: Option<&Value>) -> Plan {
        let handler = retriever["requester"].get("error_handler");
        let extractor = retriever["record_selector"].get("extractor");
        Plan {
            records_at: records_at(retriever.get("decoder"), extractor, paginator, handler),
            // A custom strategy is handed the last record, as the CDK hands it.
            wants_last: paginator
                .is_some_and(|p| p.to_string().contains("last_record") || crate::custom::is_custom_node(strategy(p))),
            wants_headers: paginator.is_some_and(|p| p.to_string().contains("headers")),
        }
    }
}

/// The extractor's field path when the host can take the records out of the answer as they are
/// (`send-records`, the one records splitter): a JSON body, a path of fixed keys (no templates,
/// no wildcard, at most the host's 16), whose first key neither the paginator's templates nor
/// the error handler's name (they see the rest of the answer as `response`), and no custom error
/// handler (it is handed the whole answer).
fn records_at(
    decoder: Option<&Value>,
    extractor: Option<&Value>,
    paginator: Option<&Value>,
    handler: Option<&Value>,
) -> Option<Vec<String>> {
    if !decoder.is_none_or(|d| matches!(kind(d), "" | "JsonDecoder")) {
        return None;
    }
    let extractor = extractor?;
    if kind(extractor) != "DpathExtractor" {
        return None;
    }
    let path: Vec<String> = extractor
        .get("field_path")?
        .as_array()?
        .iter()
        .map(|p| p.as_str().filter(|p| *p != "*" && !p.contains("{{") && !p.contains("{%")).map(str::to_string))
        .collect::<Option<_>>()?;
    let first = path.first()?;
    let names_first = |v: Option<&Value>| v.is_some_and(|v| v.to_string().contains(first.as_str()));
    let custom_handler = handler.is_some_and(|h| h.to_string().contains("\"class_name\""));
    if path.len() > MAX_RECORDS_PATH || names_first(paginator) || names_first(handler) || custom_handler {
        return None;
    }
    Some(path)
}

/// Keys in a `send-records` path, at most (the host's limit).
const MAX_RECORDS_PATH: usize = 16;

fn strategy(paginator: &Value) -> &Value {
    paginator.get("pagination_strategy").unwrap_or(&Value::Null)
}

fn initial_token(engine: &Engine, paginator: &Value) -> Result<Option<Value>> {
    let s = strategy(paginator);
    if crate::custom::is_custom_node(s) {
        return crate::custom::initial_token(engine, s);
    }
    let first = s.get("inject_on_first_request").and_then(Value::as_bool) == Some(true);
    Ok(match kind(s) {
        "OffsetIncrement" if first => Some(json!(0)),
        "PageIncrement" if first => Some(start_page(engine, s)),
        _ => None,
    })
}

fn start_page(engine: &Engine, s: &Value) -> Value {
    let ctx = engine.context(s, &Scope::default(), Vec::new());
    match engine.value(s.get("start_from_page"), &ctx) {
        Ok(Value::Null) | Err(_) => json!(1),
        Ok(v) => v,
    }
}

fn page_size(engine: &Engine, s: &Value, scope: &Scope) -> Result<Option<u64>> {
    let ctx = engine.context(s, scope, Vec::new());
    match engine.value(s.get("page_size"), &ctx)? {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_u64()),
        Value::String(t) if t.is_empty() => Ok(None),
        Value::String(t) => t.parse().map(Some).map_err(|_| Error::config(format!("page_size {t:?} is not a number"))),
        other => Err(Error::config(format!("page_size {other} is not a number"))),
    }
}

fn inject_paginator(
    engine: &Engine,
    p: &Value,
    scope: &Scope,
    next: Option<&Value>,
    options: &mut Options,
) -> Result<()> {
    let ctx = engine.context(p, scope, Vec::new());
    if let Some(option) = p.get("page_size_option").filter(|o| !o.is_null())
        && let Some(size) = page_size(engine, strategy(p), scope)?
    {
        options.inject(engine, option, &json!(size), &ctx)?;
    }
    if let (Some(option), Some(next)) = (p.get("page_token_option").filter(|o| !o.is_null()), next) {
        options.inject(engine, option, next, &ctx)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn next_token(
    engine: &Engine,
    p: &Value,
    scope: &Scope,
    last: Option<&Value>,
    response: Value,
    headers: Value,
    last_record: Value,
    last_page_size: usize,
) -> Result<Option<Value>> {
    let s = strategy(p);
    let size = page_size(engine, s, scope)?;
    let short = |n: usize| size.is_some_and(|size| (n as u64) < size) || n == 0;
    match kind(s) {
        "CursorPagination" => {
            let ctx = engine.context(
                s,
                scope,
                vec![
                    ("response", response),
                    ("headers", headers),
                    ("last_record", last_record),
                    ("last_page_size", json!(last_page_size)),
                ],
            );
            if let Some(stop) = s.get("stop_condition").filter(|c| !c.is_null())
                && engine.condition(Some(stop), &ctx)?
            {
                return Ok(None);
            }
            let value = engine.value(s.get("cursor_value"), &ctx)?;
            Ok(match value {
                Value::Null | Value::Bool(false) => None,
                Value::String(s) if s.is_empty() || s == "None" => None,
                Value::Array(a) if a.is_empty() => None,
                Value::Object(o) if o.is_empty() => None,
                v => Some(v),
            })
        }
        "OffsetIncrement" => {
            if short(last_page_size) {
                return Ok(None);
            }
            let at = match last {
                None => 0,
                Some(v) => v.as_u64().ok_or_else(|| Error::system(format!("an offset token {v} is not a number")))?,
            };
            Ok(Some(json!(at + last_page_size as u64)))
        }
        "PageIncrement" => {
            if short(last_page_size) {
                return Ok(None);
            }
            Ok(Some(match last {
                None => json!(start_page(engine, s).as_u64().unwrap_or(1) + 1),
                Some(v) => {
                    json!(v.as_u64().ok_or_else(|| Error::system(format!("a page token {v} is not a number")))? + 1)
                }
            }))
        }
        other => Err(Error::config(format!("the pagination strategy {other} is not supported"))),
    }
}

/// A cursor's window: its start and end.
type Window = (DateTime, DateTime);

/// A client-side cursor's filter (or a data feed's): records outside the window were delivered
/// before, or belong to another window; on a data feed (newest first) an older one means the
/// rest of the window is older still, so its pages stop.
fn keep_in_window(c: &Cursor, (start, end): Window, paged: &mut Paged) {
    if !(c.data_feed || c.client_side) {
        return;
    }
    let mut older = false;
    paged.records.retain(|r| match c.of_record(r) {
        Some(at) if at < start => {
            older = true;
            false
        }
        Some(at) => at <= end,
        None => true,
    });
    if c.data_feed && older {
        paged.next = None;
    }
}

/// Every record of a stream (all partitions, all pages), with the partition each came from: for
/// a substream router's parent.
pub fn read_all(engine: &Engine, stream: &Value, max: usize) -> Result<Vec<(Map<String, Value>, Value)>> {
    read_all_from(engine, stream, max, None)
}

/// [`read_all`] from a saved state of the stream: its cursor's windows start where the CDK's
/// would from that state ([`crate::state::windows_from`]), as a parent with
/// `incremental_dependency` is read.
pub fn read_all_from(
    engine: &Engine,
    stream: &Value,
    max: usize,
    state: Option<&Value>,
) -> Result<Vec<(Map<String, Value>, Value)>> {
    let mut out = Vec::new();
    read_each(engine, stream, max, state, |scope, record| out.push((scope.partition.clone(), record)))?;
    Ok(out)
}

/// Every record of a stream with the whole slice it was read in (`stream_slice`, extra fields
/// and all): what an `HttpComponentsResolver` makes streams from.
pub fn read_all_slices(engine: &Engine, stream: &Value, max: usize) -> Result<Vec<(Value, Value)>> {
    let mut out = Vec::new();
    read_each(engine, stream, max, None, |scope, record| out.push((scope.slice(), record)))?;
    Ok(out)
}

/// Hands every record of a stream to `each` with its slice; at most `max` of them.
fn read_each(
    engine: &Engine,
    stream: &Value,
    max: usize,
    state: Option<&Value>,
    mut each: impl FnMut(&Scope, Value),
) -> Result<()> {
    let name = stream.get("name").and_then(Value::as_str).unwrap_or("parent");
    let retriever = &stream["retriever"];
    if kind(retriever) != "SimpleRetriever" {
        return Err(Error::config(format!("the parent stream {name} must use a SimpleRetriever")));
    }
    let cursor = Cursor::of(engine, stream)?;
    let counter = Counter::of(engine, stream)?;
    let mut count = 0;
    for (scope, window) in parent_scopes(engine, stream, cursor.as_ref(), counter.as_ref(), state, name)? {
        let mut next = None;
        for _ in 0..MAX_PAGES {
            let mut paged =
                read_slice(engine, stream, injector(cursor.as_ref(), counter.as_ref()), &scope, next, name)?;
            // A parent is read as the stream it is (the CDK builds it whole): its own filter too.
            if let (Some(c), Some(window)) = (cursor.as_ref(), window) {
                keep_in_window(c, window, &mut paged);
            }
            if paged.reset {
                return Err(Error::system(format!(
                    "the parent stream {name}: the API asked for a pagination reset, which a parent stream does not follow"
                )));
            }
            for r in paged.records {
                if count >= max {
                    return Err(Error::system(format!("the stream {name} has more than {max} records")));
                }
                count += 1;
                each(&scope, serde_json::from_str(&r)?);
            }
            match paged.next {
                Some(n) => next = Some(n),
                None => break,
            }
        }
    }
    Ok(())
}

/// The first record a retriever reads from an empty slice (as the CDK's `read_records({})`
/// reads: no partition router, no cursor), pages followed until one passes the filter; what a
/// `DynamicSchemaLoader` builds a schema from.
pub fn first_record(engine: &Engine, stream: &Value, name: &str) -> Result<Option<Value>> {
    let scope = Scope::default();
    let mut next = None;
    for _ in 0..MAX_PAGES {
        let paged = read_slice(engine, stream, None, &scope, next, name)?;
        if let Some(first) = paged.records.first() {
            return Ok(Some(serde_json::from_str(first)?));
        }
        match paged.next {
            Some(n) if !paged.reset => next = Some(n),
            _ => return Ok(None),
        }
    }
    Err(Error::system(format!("{name}: more than {MAX_PAGES} pages without a record")))
}

/// A parent stream's slices, routers and cursor windows alike (a counter's one slice from its
/// `start_value`, as the CDK reads a parent without state); the windows from `state` when given.
/// Each with its cursor window, if it has one.
fn parent_scopes(
    engine: &Engine,
    stream: &Value,
    cursor: Option<&Cursor>,
    counter: Option<&Counter>,
    state: Option<&Value>,
    name: &str,
) -> Result<Vec<(Scope, Option<Window>)>> {
    // The routers' slices; one empty slice for a stream without a router.
    let slices = slicing::route(engine, &stream["retriever"], name)?.unwrap_or_else(|| vec![Default::default()]);
    let mut scopes = Vec::new();
    for (partition, extra) in slices {
        let mut scope = Scope { partition, extra, ..Default::default() };
        if let Some(counter) = counter {
            scope.interval = Counter::interval(counter.start);
        }
        match cursor {
            None => scopes.push((scope, None)),
            Some(c) => {
                let ((from, offset), to) = (crate::state::windows_from(engine, c, state, name)?, c.end(engine)?);
                let windows = c.windows(from, to);
                let last = windows.len().saturating_sub(1);
                for (i, (s, e)) in windows.into_iter().enumerate() {
                    let mut scope = scope.clone();
                    scope.interval = c.interval_in(&s, &e, offset, i == last);
                    scopes.push((scope, Some((s, e))));
                }
            }
        }
    }
    Ok(scopes)
}
