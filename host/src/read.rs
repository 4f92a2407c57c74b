//! Reading streams: listing partitions, the pagination loop of each partition, record checks,
//! and STATE after every completed partition of an incremental stream.
//!
//! Partitions run one after another here; every page's records reach the single writer before
//! the STATE that covers them, because both go through the same ordered channel.

use crate::bindings::{CursorRange, CursorValue, Partition, Stream};
use crate::connector::{CallError, Connector, Instance};
use crate::protocol::{self, FailureType, Output, OutputClosed, StreamStatus};
use crate::sandbox::GuestLog;
use crate::state::{self, StreamCursor};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// Caps on what a guest may hand back.
#[derive(Debug, Clone)]
pub struct OutputLimits {
    pub max_record_bytes: usize,
    pub max_records_per_page: usize,
    pub max_log_bytes: usize,
    /// Pages per partition; a guard against a connector that never ends a partition.
    pub max_pages_per_partition: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_record_bytes: 16 << 20,
            max_records_per_page: 100_000,
            max_log_bytes: 64 << 10,
            max_pages_per_partition: 10_000_000,
        }
    }
}

/// A stream chosen for reading.
#[derive(Debug, Clone)]
pub struct SelectedStream {
    pub stream: Stream,
    /// `Some(path)` reads incrementally on that cursor field.
    pub cursor_field: Option<Vec<String>>,
    pub saved_state: Option<Value>,
}

#[derive(Debug, Clone, Default)]
pub struct StreamSummary {
    pub name: String,
    pub records: u64,
    pub partitions: u64,
    pub failed_partitions: u64,
    /// The stream could not even start (bad state, partition listing failed).
    pub failed: bool,
}

impl StreamSummary {
    pub fn complete(&self) -> bool {
        !self.failed && self.failed_partitions == 0
    }
}

/// Emits guest logs as LOG messages, capped in size.
pub async fn emit_logs(out: &Output, logs: Vec<GuestLog>, limits: &OutputLimits) -> Result<(), OutputClosed> {
    for log in logs {
        let level = match log.level {
            crate::bindings::Level::Debug => "DEBUG",
            crate::bindings::Level::Info => "INFO",
            crate::bindings::Level::Warn => "WARN",
            crate::bindings::Level::Error => "ERROR",
        };
        let mut message = log.message;
        if message.len() > limits.max_log_bytes {
            let mut end = limits.max_log_bytes;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("… (truncated)");
        }
        out.message(&protocol::log(level, &message)).await?;
    }
    Ok(())
}

pub struct Reader<'a> {
    pub connector: &'a Connector,
    pub out: &'a Output,
    pub limits: &'a OutputLimits,
}

impl Reader<'_> {
    /// Reads one stream to the end, or as far as it can: a failed partition is reported and the
    /// others go on. Only a closed output stops the stream early.
    pub async fn read_stream(&self, selected: &SelectedStream) -> Result<StreamSummary, OutputClosed> {
        let name = &selected.stream.name;
        let mut summary = StreamSummary {
            name: name.clone(),
            ..Default::default()
        };
        self.out
            .message(&protocol::stream_status(name, StreamStatus::Started))
            .await?;

        let mut cursor = match &selected.cursor_field {
            Some(field) => match StreamCursor::new(name, field.clone(), selected.saved_state.as_ref()) {
                Ok(c) => Some(c),
                Err(e) => {
                    let msg = format!("{e:#}");
                    self.fail_stream(&mut summary, &msg, FailureType::Config).await?;
                    return Ok(summary);
                }
            },
            None => None,
        };

        let partitions = match self.list_partitions(selected).await? {
            Ok(p) => p,
            Err(e) => {
                let msg = format!("cannot list the partitions of stream {name}: {}", e.message());
                self.fail_stream(&mut summary, &msg, e.failure_type()).await?;
                return Ok(summary);
            }
        };

        let mut running = false;
        for mut partition in partitions {
            if let Some(cursor) = &cursor {
                raise_start(&mut partition, cursor);
            }
            summary.partitions += 1;
            let field = cursor.as_ref().map(|c| c.field().to_vec());
            match self
                .read_partition(&partition, field.as_deref(), &mut running, &mut summary)
                .await?
            {
                Ok(max_seen) => {
                    if let Some(cursor) = cursor.as_mut() {
                        let key: Value = serde_json::from_str(&partition.key).unwrap_or(Value::Null);
                        cursor.complete(&key, max_seen);
                        self.out
                            .message(&protocol::stream_state(name, &cursor.to_state()))
                            .await?;
                    }
                }
                Err(e) => {
                    summary.failed_partitions += 1;
                    let msg = format!("stream {name}, partition {}: {}", partition.key, e.message());
                    self.out
                        .message(&protocol::trace_error(&msg, None, e.failure_type(), Some(name)))
                        .await?;
                }
            }
        }
        let status = if summary.complete() {
            StreamStatus::Complete
        } else {
            StreamStatus::Incomplete
        };
        self.out.message(&protocol::stream_status(name, status)).await?;
        Ok(summary)
    }

    async fn fail_stream(
        &self,
        summary: &mut StreamSummary,
        message: &str,
        failure: FailureType,
    ) -> Result<(), OutputClosed> {
        summary.failed = true;
        self.out
            .message(&protocol::trace_error(message, None, failure, Some(&summary.name)))
            .await?;
        self.out
            .message(&protocol::stream_status(&summary.name, StreamStatus::Incomplete))
            .await
    }

    async fn call<T>(
        &self,
        instance: &mut Instance,
        result: Result<T, CallError>,
    ) -> Result<Result<T, CallError>, OutputClosed> {
        emit_logs(self.out, instance.take_logs(), self.limits).await?;
        Ok(result)
    }

    /// All partitions of a stream, batch by batch, checked.
    async fn list_partitions(
        &self,
        selected: &SelectedStream,
    ) -> Result<Result<Vec<Partition>, CallError>, OutputClosed> {
        let name = &selected.stream.name;
        let mut instance = match self.connector.instance().await {
            Ok(i) => i,
            Err(e) => return Ok(Err(e)),
        };
        let state = selected.saved_state.as_ref().map(Value::to_string);
        let mut partitions = Vec::new();
        let mut token: Option<String> = None;
        let mut seen = TokenGuard::default();
        loop {
            let result = instance
                .partitions(&self.connector.config, name, state.as_ref(), token.as_ref())
                .await;
            let batch = match self.call(&mut instance, result).await? {
                Ok(b) => b,
                Err(e) => return Ok(Err(e)),
            };
            for p in batch.partitions {
                if &p.stream != name {
                    return Ok(Err(contract(format!(
                        "a partition of stream {name} names stream {:?}",
                        p.stream
                    ))));
                }
                if let Err(e) = serde_json::from_str::<Value>(&p.key) {
                    return Ok(Err(contract(format!(
                        "partition key is not valid JSON ({e}): {}",
                        protocol::preview(&p.key)
                    ))));
                }
                partitions.push(p);
            }
            match batch.next_token {
                None => return Ok(Ok(partitions)),
                Some(next) => {
                    if let Err(e) = seen.check(&next) {
                        return Ok(Err(e));
                    }
                    token = Some(next);
                }
            }
        }
    }

    /// The pagination loop of one partition in a fresh instance. Returns the largest cursor
    /// value written, for incremental streams.
    async fn read_partition(
        &self,
        partition: &Partition,
        cursor_field: Option<&[String]>,
        running: &mut bool,
        summary: &mut StreamSummary,
    ) -> Result<Result<Option<Value>, CallError>, OutputClosed> {
        let mut instance = match self.connector.instance().await {
            Ok(i) => i,
            Err(e) => return Ok(Err(e)),
        };
        let stream_json = serde_json::to_string(&partition.stream).expect("a string serializes");
        let mut token: Option<String> = None;
        let mut seen = TokenGuard::default();
        let mut max_seen: Option<Value> = None;
        for _ in 0..self.limits.max_pages_per_partition {
            let result = instance
                .read_page(&self.connector.config, partition, token.as_ref())
                .await;
            let page = match self.call(&mut instance, result).await? {
                Ok(p) => p,
                Err(e) => return Ok(Err(e)),
            };
            if page.records.len() > self.limits.max_records_per_page {
                return Ok(Err(contract(format!(
                    "a page of {} records exceeds the limit of {} records per page",
                    page.records.len(),
                    self.limits.max_records_per_page
                ))));
            }
            let emitted_at = protocol::now_ms();
            let mut lines = Vec::with_capacity(page.records.iter().map(|r| r.len() + 80).sum());
            for record in &page.records {
                let checked = match protocol::checked_record(record, self.limits.max_record_bytes) {
                    Ok(c) => c,
                    Err(e) => return Ok(Err(contract(e))),
                };
                if let Some(field) = cursor_field {
                    let value: Value = serde_json::from_str(&checked).expect("checked JSON parses");
                    if let Some(v) = state::cursor_of(&value, field)
                        && max_seen
                            .as_ref()
                            .is_none_or(|m| state::compare(&v, m) == Ordering::Greater)
                    {
                        max_seen = Some(v);
                    }
                }
                protocol::push_record(&mut lines, &stream_json, &checked, emitted_at);
            }
            if !page.records.is_empty() {
                if !*running {
                    *running = true;
                    self.out
                        .message(&protocol::stream_status(&partition.stream, StreamStatus::Running))
                        .await?;
                }
                summary.records += page.records.len() as u64;
                self.out.lines(lines).await?;
            }
            match page.next_token {
                None => return Ok(Ok(max_seen)),
                Some(next) => {
                    if let Err(e) = seen.check(&next) {
                        return Ok(Err(e));
                    }
                    token = Some(next);
                }
            }
        }
        Ok(Err(contract(format!(
            "the partition did not end after {} pages",
            self.limits.max_pages_per_partition
        ))))
    }
}

/// A guest answer the host refuses, reported as the connector's system error.
fn contract(message: String) -> CallError {
    CallError::Guest(crate::bindings::GuestError::System(message))
}

/// Catches a pagination loop: a token must be valid JSON and never repeat within a partition.
#[derive(Default)]
struct TokenGuard(HashSet<u64>);

impl TokenGuard {
    fn check(&mut self, token: &str) -> Result<(), CallError> {
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(token) {
            return Err(contract(format!(
                "next token is not valid JSON ({e}): {}",
                protocol::preview(token)
            )));
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        token.hash(&mut h);
        if !self.0.insert(h.finish()) {
            return Err(contract(format!(
                "pagination repeated the token {}: the connector would loop forever",
                protocol::preview(token)
            )));
        }
        Ok(())
    }
}

/// Raises a partition's cursor start to the saved cursor for its key.
fn raise_start(partition: &mut Partition, cursor: &StreamCursor) {
    let key: Value = serde_json::from_str(&partition.key).unwrap_or(Value::Null);
    let Some(saved) = cursor.start_for(&key) else { return };
    let range = partition
        .cursor_range
        .get_or_insert(CursorRange { start: None, end: None });
    let keep_guest = range
        .start
        .as_ref()
        .is_some_and(|s| state::compare(&cursor_to_json(s), saved) == Ordering::Greater);
    if !keep_guest {
        range.start = json_to_cursor(saved);
    }
}

fn cursor_to_json(v: &CursorValue) -> Value {
    match v {
        CursorValue::Integer(i) => Value::from(*i),
        CursorValue::Datetime(s) | CursorValue::Text(s) => Value::from(s.as_str()),
    }
}

fn json_to_cursor(v: &Value) -> Option<CursorValue> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(CursorValue::Integer)
            .or_else(|| Some(CursorValue::Text(n.to_string()))),
        Value::String(s) if state::parse_datetime(s).is_some() => Some(CursorValue::Datetime(s.clone())),
        Value::String(s) => Some(CursorValue::Text(s.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_guard_catches_repeats_and_bad_json() {
        let mut g = TokenGuard::default();
        assert!(g.check("\"a\"").is_ok());
        assert!(g.check("2").is_ok());
        assert!(g.check("\"a\"").unwrap_err().message().contains("repeated"));
        assert!(g.check("{").unwrap_err().message().contains("not valid JSON"));
    }

    #[test]
    fn saved_cursor_raises_start() {
        let field = vec!["updated_at".to_string()];
        let mut cursor = StreamCursor::new("s", field, None).unwrap();
        cursor.complete(&serde_json::json!({"a": 1}), Some(Value::from("2024-01-05T00:00:00Z")));
        let mut p = Partition {
            stream: "s".into(),
            key: r#"{"a":1}"#.into(),
            cursor_range: None,
        };
        raise_start(&mut p, &cursor);
        assert_eq!(
            p.cursor_range.unwrap().start,
            Some(CursorValue::Datetime("2024-01-05T00:00:00Z".into()))
        );
        // A guest start later than the saved cursor wins.
        let mut p = Partition {
            stream: "s".into(),
            key: r#"{"a":1}"#.into(),
            cursor_range: Some(CursorRange {
                start: Some(CursorValue::Datetime("2025-01-01T00:00:00Z".into())),
                end: None,
            }),
        };
        raise_start(&mut p, &cursor);
        assert_eq!(
            p.cursor_range.unwrap().start,
            Some(CursorValue::Datetime("2025-01-01T00:00:00Z".into()))
        );
    }
}
