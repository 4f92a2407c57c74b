//! A connector with one deliberate bug, chosen by its config's `bug`, for the conformance kit's
//! tests (`host test`): each bug must be caught by the check that names it. With `"bug": "none"`
//! it is a correct connector, so every failure the kit reports comes from the bug alone.
//!
//! It needs no API. Streams:
//! - `things`: 3 partitions (`{"p": 0..3}`) of 3 pages of 5 records, page-number tokens;
//! - `events`: incremental on `seq`, 2 partitions (`{"shard": 0..2}`) of 10 events each, read
//!   in pages of 4 after the partition's cursor start.
//!
//! - `windows`: incremental on `n`, 3 bounded partitions `(10w, 10w + 10]`.
//!
//! The spec allows no other config fields than `bug` and `api_key`. Built with the `bad-spec`
//! feature, the spec is not a valid JSON Schema. Bugs: `accepts-broken-config` (check passes
//! without `api_key`), `crashes-on-broken-config` (check panics without it), `bad-stream-schema`,
//! `no-primary-key`, `missing-key` (a record without its primary key), `schema-violation` (a
//! record with a string id), `duplicate-records` (a page served twice), `repeat-token`
//! (pagination loops), `endless` (pagination never ends, with ever new tokens),
//! `random-partitions` (keys change between listings), `ignore-state` (an incremental read
//! starts from the beginning), `outside-window` (`windows` records beyond a window's end).

use serde::Deserialize;
use sluice_guest::{CursorValue, Error, Page, Partition, Result, Source, Stream, Value, json, paginate};

#[derive(Deserialize)]
struct Config {
    bug: String,
    /// Required by the spec; only `accepts-broken-config` and `crashes-on-broken-config` get it wrong.
    api_key: Option<String>,
}

const PAGES: u64 = 3;
const PER_PAGE: u64 = 5;
const EVENTS: i64 = 10;
const EVENTS_PER_PAGE: i64 = 4;

struct BrokenConnector;

fn things_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "integer"}, "p": {"type": "integer"}, "name": {"type": "string"}},
        "required": ["id", "p"]
    })
}

impl Source for BrokenConnector {
    type Config = Config;

    fn spec() -> Value {
        let mut spec = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "required": ["bug", "api_key"],
            "additionalProperties": false,
            "properties": {
                "bug": {"type": "string"},
                "api_key": {"type": "string", "airbyte_secret": true}
            }
        });
        if cfg!(feature = "bad-spec") {
            spec["properties"]["bug"]["type"] = json!("text");
        }
        spec
    }

    fn check(config: &Config) -> Result<()> {
        match (config.api_key.as_deref(), config.bug.as_str()) {
            (None, "accepts-broken-config") => Ok(()),
            (None, "crashes-on-broken-config") => panic!("api_key is missing and this connector panics"),
            (None, _) => Err(Error::config("api_key is required")),
            (Some(_), _) => Ok(()),
        }
    }

    fn streams(config: &Config) -> Result<Vec<Stream>> {
        let things = match config.bug.as_str() {
            "bad-stream-schema" => Stream::new("things", json!({"type": "objekt"})).primary_key("id"),
            "no-primary-key" => Stream::new("things", things_schema()),
            _ => Stream::new("things", things_schema()).primary_key("id"),
        };
        let events = Stream::new(
            "events",
            json!({
                "type": "object",
                "properties": {"shard": {"type": "integer"}, "seq": {"type": "integer"}},
                "required": ["shard", "seq"]
            }),
        )
        .primary_key("shard")
        .primary_key("seq")
        .cursor_field("seq");
        let windows = Stream::new(
            "windows",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .primary_key("n")
        .cursor_field("n");
        Ok(vec![things, events, windows])
    }

    fn partitions(config: &Config, stream: &str, _state: Option<&Value>) -> Result<Vec<Partition>> {
        match stream {
            "things" => (0..3)
                .map(|p| {
                    if config.bug == "random-partitions" {
                        Partition::keyed(stream, json!({"p": p, "listed_at": nanos()}))
                    } else {
                        Partition::keyed(stream, json!({"p": p}))
                    }
                })
                .collect(),
            "events" => (0..2).map(|shard| Partition::keyed(stream, json!({"shard": shard}))).collect(),
            // Windows (10w, 10w + 10] of the integer cursor `n`.
            "windows" => (0..3)
                .map(|w| {
                    Ok(Partition::keyed(stream, json!({"w": w}))?
                        .starting_at(Some(CursorValue::Integer(w * 10)))
                        .ending_at(Some(CursorValue::Integer(w * 10 + 10))))
                })
                .collect(),
            other => Err(Error::config(format!("unknown stream {other:?}"))),
        }
    }

    fn read_page(config: &Config, partition: &Partition, token: Option<Value>) -> Result<Page> {
        let bug = config.bug.as_str();
        match partition.stream.as_str() {
            "things" => {
                let p = partition.key["p"].as_u64().unwrap_or(0);
                let page = paginate::page_number(token.as_ref(), 0)?;
                // `duplicate-records`: partition 2 serves its page 1 again, as a fourth page.
                let served = if bug == "duplicate-records" && page == PAGES { 1 } else { page };
                // `endless`: partition 0 goes on with empty pages, each with a new token.
                let per_page = if bug == "endless" && page >= PAGES { 0 } else { PER_PAGE };
                let records = (0..per_page).map(|i| {
                    let id = (p * PAGES + served) * PER_PAGE + i;
                    match (bug, p, page, i) {
                        ("missing-key", 1, 1, 3) => json!({"p": p, "name": "no id"}),
                        ("schema-violation", 2, 0, 1) => json!({"id": id.to_string(), "p": p}),
                        _ => json!({"id": id, "p": p, "name": format!("thing-{id}")}),
                    }
                });
                let next = match bug {
                    "repeat-token" if p == 0 && page >= 1 => Some(json!(1)),
                    "endless" if p == 0 => Some(json!(page + 1)),
                    "duplicate-records" if p == 2 && page == PAGES - 1 => Some(json!(PAGES)),
                    _ => (page + 1 < PAGES).then(|| json!(page + 1)),
                };
                Ok(Page::from_values(records)?.next(next))
            }
            "events" => {
                let shard = partition.key["shard"].as_i64().unwrap_or(0);
                let after = match partition.cursor_start() {
                    Some(CursorValue::Integer(n)) if bug != "ignore-state" => *n,
                    _ => 0,
                };
                let from = paginate::offset(token.as_ref())?.max(after as u64) as i64 + 1;
                let to = (from + EVENTS_PER_PAGE - 1).min(EVENTS);
                let records = (from..=to).map(|seq| json!({"shard": shard, "seq": seq}));
                let next = (to < EVENTS).then(|| json!(to));
                Ok(Page::from_values(records)?.next(next))
            }
            "windows" => {
                let bound = |v: Option<&CursorValue>| match v {
                    Some(CursorValue::Integer(i)) => Ok(*i),
                    other => Err(Error::system(format!("expected an integer bound, got {other:?}"))),
                };
                let (start, mut end) = (bound(partition.cursor_start())?, bound(partition.cursor_end())?);
                if bug == "outside-window" {
                    end += 1;
                }
                Page::from_values((start + 1..=end).map(|n| json!({"n": n})))
            }
            other => Err(Error::config(format!("unknown stream {other:?}"))),
        }
    }
}

/// Nanoseconds of the wall clock: different in every listing.
fn nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

sluice_guest::export_source!(BrokenConnector);
