//! The values a connector hands to the host, in plain Rust.

use crate::__private::bindings::sluice::connector::types as wit;
use crate::{Error, Result, Value};
use serde::Serialize;
use serde_json::value::RawValue;

/// A stream the connector can read.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    pub name: String,
    pub json_schema: Value,
    pub primary_key: Vec<Vec<String>>,
    pub cursor_field: Option<Vec<String>>,
}

impl Stream {
    pub fn new(name: impl Into<String>, json_schema: Value) -> Self {
        Stream { name: name.into(), json_schema, primary_key: Vec::new(), cursor_field: None }
    }
    /// Adds a top-level field to the primary key.
    pub fn primary_key(mut self, field: &str) -> Self {
        self.primary_key.push(vec![field.to_string()]);
        self
    }
    /// Makes the stream incremental on a top-level field that grows as records change.
    pub fn cursor_field(mut self, field: &str) -> Self {
        self.cursor_field = Some(vec![field.to_string()]);
        self
    }
}

impl From<Stream> for wit::Stream {
    fn from(s: Stream) -> Self {
        wit::Stream {
            name: s.name,
            json_schema: s.json_schema.to_string(),
            primary_key: s.primary_key,
            cursor_field: s.cursor_field,
        }
    }
}

/// A cursor value the host can order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CursorValue {
    Integer(i64),
    /// An RFC 3339 date-time.
    Datetime(String),
    Text(String),
}

impl CursorValue {
    /// The value as text, as an API query parameter wants it.
    pub fn to_query_value(&self) -> String {
        match self {
            CursorValue::Integer(i) => i.to_string(),
            CursorValue::Datetime(s) | CursorValue::Text(s) => s.clone(),
        }
    }
}

/// The part of a stream's cursor a partition covers: records after `start`, up to `end`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CursorRange {
    pub start: Option<CursorValue>,
    pub end: Option<CursorValue>,
}

/// An independent slice of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    pub stream: String,
    /// Identifies the partition; must be the same in every run.
    pub key: Value,
    pub cursor_range: Option<CursorRange>,
}

impl Partition {
    /// The one partition of an unpartitioned stream.
    pub fn whole(stream: &str) -> Self {
        Partition { stream: stream.to_string(), key: Value::Null, cursor_range: None }
    }
    /// A partition identified by `key`, e.g. `json!({"account_id": 7})`.
    pub fn keyed(stream: &str, key: impl Serialize) -> Result<Self> {
        Ok(Partition { stream: stream.to_string(), key: serde_json::to_value(key)?, cursor_range: None })
    }
    /// Sets where the partition starts; the host raises it to the saved cursor on incremental runs.
    pub fn starting_at(mut self, start: Option<CursorValue>) -> Self {
        self.cursor_range.get_or_insert_with(CursorRange::default).start = start;
        self
    }
    /// Sets where the partition ends (inclusive), making it a bounded partition the host can
    /// checkpoint as a finished range.
    pub fn ending_at(mut self, end: Option<CursorValue>) -> Self {
        self.cursor_range.get_or_insert_with(CursorRange::default).end = end;
        self
    }
    /// The cursor value to read after, if any: the saved state or the partition's own start.
    pub fn cursor_start(&self) -> Option<&CursorValue> {
        self.cursor_range.as_ref().and_then(|r| r.start.as_ref())
    }
    /// Where the partition ends, for bounded partitions such as date windows.
    pub fn cursor_end(&self) -> Option<&CursorValue> {
        self.cursor_range.as_ref().and_then(|r| r.end.as_ref())
    }
    /// The key parsed into a type.
    pub fn key_as<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.key.clone())
            .map_err(|e| Error::System(format!("unexpected partition key {}: {e}", self.key)))
    }
}

fn cursor_to_wit(v: CursorValue) -> wit::CursorValue {
    match v {
        CursorValue::Integer(i) => wit::CursorValue::Integer(i),
        CursorValue::Datetime(s) => wit::CursorValue::Datetime(s),
        CursorValue::Text(s) => wit::CursorValue::Text(s),
    }
}

fn cursor_from_wit(v: wit::CursorValue) -> CursorValue {
    match v {
        wit::CursorValue::Integer(i) => CursorValue::Integer(i),
        wit::CursorValue::Datetime(s) => CursorValue::Datetime(s),
        wit::CursorValue::Text(s) => CursorValue::Text(s),
    }
}

impl From<Partition> for wit::Partition {
    fn from(p: Partition) -> Self {
        wit::Partition {
            stream: p.stream,
            key: p.key.to_string(),
            cursor_range: p
                .cursor_range
                .map(|r| wit::CursorRange { start: r.start.map(cursor_to_wit), end: r.end.map(cursor_to_wit) }),
        }
    }
}

impl TryFrom<wit::Partition> for Partition {
    type Error = Error;
    fn try_from(p: wit::Partition) -> Result<Self> {
        Ok(Partition {
            key: serde_json::from_str(&p.key)
                .map_err(|e| Error::System(format!("the host sent an invalid partition key: {e}")))?,
            stream: p.stream,
            cursor_range: p
                .cursor_range
                .map(|r| CursorRange { start: r.start.map(cursor_from_wit), end: r.end.map(cursor_from_wit) }),
        })
    }
}

/// One page of records and where the next one is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    /// Each record as JSON text.
    pub records: Vec<String>,
    pub next_token: Option<Value>,
}

impl Page {
    /// A page of records taken verbatim from the API's JSON, with no re-encoding: parse the
    /// answer's record list as `Vec<Box<RawValue>>`.
    pub fn from_raw(records: Vec<Box<RawValue>>) -> Self {
        Page { records: records.into_iter().map(|r| String::from(Box::<str>::from(r))).collect(), next_token: None }
    }
    /// A page of records built as values.
    pub fn from_values<T: Serialize>(records: impl IntoIterator<Item = T>) -> Result<Self> {
        let records = records.into_iter().map(|r| serde_json::to_string(&r)).collect::<Result<_, _>>()?;
        Ok(Page { records, next_token: None })
    }
    /// Where the next page is; `None` ends the partition.
    pub fn next(mut self, token: Option<Value>) -> Self {
        self.next_token = token;
        self
    }
    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl From<Page> for wit::Page {
    fn from(p: Page) -> Self {
        wit::Page { records: p.records, next_token: p.next_token.map(|t| t.to_string()) }
    }
}

/// Some partitions of a stream, where the rest are, and how many records the stream holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionBatch {
    pub partitions: Vec<Partition>,
    /// Token for the next batch; `None` ends the listing.
    pub next: Option<Value>,
    /// Records in the whole stream, when the API tells; shown as progress.
    pub record_estimate: Option<u64>,
}

impl PartitionBatch {
    pub fn new(partitions: Vec<Partition>) -> Self {
        PartitionBatch { partitions, next: None, record_estimate: None }
    }
    pub fn next(mut self, token: Option<Value>) -> Self {
        self.next = token;
        self
    }
    pub fn record_estimate(mut self, records: Option<u64>) -> Self {
        self.record_estimate = records;
        self
    }
}

impl From<PartitionBatch> for wit::PartitionBatch {
    fn from(b: PartitionBatch) -> Self {
        wit::PartitionBatch {
            partitions: b.partitions.into_iter().map(Into::into).collect(),
            next_token: b.next.map(|t| t.to_string()),
            record_estimate: b.record_estimate,
        }
    }
}
