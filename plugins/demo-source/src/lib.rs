//! The demo connector: reads the bundled demo API (`demo-api`).
//!
//! Streams:
//! - `items`: every item, cursor pagination (`next_cursor`);
//! - `accounts`: page-number pagination, ends on a short page;
//! - `account_items`: one partition per account, next-URL pagination, incremental on `updated_at`;
//! - `windowed_items`: every item, sliced into windows of `updated_at` (`window_minutes`) that the
//!   host reads concurrently and checkpoints window by window.

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_guest::{
    AsyncJobs, CursorValue, JobStatus, Page, Partition, PartitionBatch, Result, ResultExt, Source, Stream, Value, http,
    json, paginate, slice,
};

#[derive(Deserialize)]
struct Config {
    base_url: String,
    #[serde(default = "default_page_size")]
    page_size: u32,
    /// Read items updated after this RFC 3339 date-time only (incremental streams).
    start_date: Option<String>,
    #[serde(default = "default_window_minutes")]
    window_minutes: u32,
    /// Sent as `Authorization: Bearer ...` when set.
    api_key: Option<String>,
    /// Offer `report_items`, read through the API's report jobs (one per account).
    #[serde(default)]
    report_jobs: bool,
    /// Report jobs the API allows at once.
    #[serde(default = "default_max_jobs")]
    max_jobs: u32,
    /// Records per page of a report's result.
    #[serde(default = "default_report_page_size")]
    report_page_size: u32,
}

fn default_max_jobs() -> u32 {
    2
}

fn default_report_page_size() -> u32 {
    5000
}

/// A report job as the demo API describes it.
#[derive(Deserialize)]
struct JobView {
    id: String,
    status: String,
    download_url: Option<String>,
    error: Option<String>,
}

fn default_window_minutes() -> u32 {
    60
}

fn default_page_size() -> u32 {
    100
}

impl Config {
    fn url(&self, path: &str) -> String {
        http::join(&self.base_url, path)
    }

    /// A GET of `url`, authenticated when the config has a key.
    fn get(&self, url: String) -> http::Request {
        match &self.api_key {
            Some(key) => http::get(url).bearer_auth(key),
            None => http::get(url),
        }
    }
}

#[derive(Deserialize)]
struct CursorPage {
    data: Vec<Box<RawValue>>,
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct NextUrlPage {
    data: Vec<Box<RawValue>>,
    next: Option<String>,
}

#[derive(Deserialize)]
struct NumberedPage<T> {
    data: Vec<T>,
}

#[derive(Deserialize)]
struct Account {
    id: u64,
}

#[derive(Deserialize)]
struct Bounds {
    count: u64,
    first_updated_at: Option<String>,
    last_updated_at: Option<String>,
}

struct DemoSource;

impl DemoSource {
    fn accounts_page(config: &Config, page: u64) -> Result<Vec<Box<RawValue>>> {
        let answer: NumberedPage<Box<RawValue>> = config
            .get(config.url("/accounts"))
            .query("page", page)
            .query("per_page", config.page_size)
            .send()?
            .error_for_status()?
            .json()?;
        Ok(answer.data)
    }
}

fn item_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "account_id": {"type": "integer"},
            "amount": {"type": "integer"},
            "updated_at": {"type": "string", "format": "date-time"}
        },
        "required": ["id", "updated_at"]
    })
}

impl Source for DemoSource {
    type Config = Config;

    fn spec() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Demo API source",
            "documentationUrl": "https://example.com/sluice/demo-source",
            "type": "object",
            "required": ["base_url"],
            "additionalProperties": true,
            "properties": {
                "base_url": {"type": "string", "format": "uri", "description": "Where the demo API listens, e.g. http://127.0.0.1:8080"},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
                "start_date": {"type": "string", "format": "date-time", "description": "Read items updated after this time (incremental streams)"},
                "window_minutes": {"type": "integer", "minimum": 1, "default": 60, "description": "Width of the windows of windowed_items"},
                "api_key": {"type": "string", "airbyte_secret": true, "description": "Sent as a bearer token, when the API requires one"},
                "report_jobs": {"type": "boolean", "default": false, "description": "Offer report_items, read through report jobs (one per account)"},
                "max_jobs": {"type": "integer", "minimum": 1, "default": 2, "description": "Report jobs the API allows at once"},
                "report_page_size": {"type": "integer", "minimum": 1, "default": 5000, "description": "Records per page of a report's result"}
            }
        })
    }

    fn hosts(config: &Config) -> Result<Vec<String>> {
        Ok(vec![http::host_port(&config.base_url)?])
    }

    fn check(config: &Config) -> Result<()> {
        if config.page_size == 0 || config.page_size > 10_000 {
            return Err(sluice_guest::Error::config("page_size must be between 1 and 10000"));
        }
        if config.window_minutes == 0 {
            return Err(sluice_guest::Error::config("window_minutes must be at least 1"));
        }
        if let Some(start) = &config.start_date {
            slice::parse_rfc3339(start).context("start_date")?;
        }
        Self::accounts_page(config, 1).context("cannot list accounts")?;
        Ok(())
    }

    fn streams(config: &Config) -> Result<Vec<Stream>> {
        let mut streams = vec![
            Stream::new("items", item_schema()).primary_key("id"),
            Stream::new(
                "accounts",
                json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "name": {"type": "string"},
                        "created_at": {"type": "string", "format": "date-time"}
                    },
                    "required": ["id"]
                }),
            )
            .primary_key("id"),
            Stream::new("account_items", item_schema()).primary_key("id").cursor_field("updated_at"),
            Stream::new("windowed_items", item_schema()).primary_key("id").cursor_field("updated_at"),
        ];
        if config.report_jobs {
            streams.push(Stream::new("report_items", item_schema()).primary_key("id").cursor_field("updated_at"));
        }
        Ok(streams)
    }

    fn partitions(config: &Config, stream: &str, _state: Option<&Value>) -> Result<Vec<Partition>> {
        if stream != "account_items" && stream != "report_items" {
            return Ok(vec![Partition::whole(stream)]);
        }
        // One partition per account; every page of accounts is listed (bounded by a short page).
        let start = config.start_date.clone().map(CursorValue::Datetime);
        let mut partitions = Vec::new();
        let mut page = 1;
        loop {
            let accounts = Self::accounts_page(config, page).context("listing accounts")?;
            for raw in &accounts {
                let account: Account = serde_json::from_str(raw.get())?;
                partitions
                    .push(Partition::keyed(stream, json!({"account_id": account.id}))?.starting_at(start.clone()));
            }
            match paginate::next_page_number(page, accounts.len(), config.page_size as usize) {
                Some(_) => page += 1,
                None => return Ok(partitions),
            }
        }
    }

    fn partition_batch(
        config: &Config,
        stream: &str,
        state: Option<&Value>,
        _: Option<Value>,
    ) -> Result<PartitionBatch> {
        if stream != "windowed_items" {
            return Ok(PartitionBatch::new(Self::partitions(config, stream, state)?));
        }
        // Windows from the first item (or start_date) to the last; the host skips finished ones.
        let bounds: Bounds = config
            .get(config.url("/items/bounds"))
            .send()
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.json())
            .context("reading item bounds")?;
        let (Some(first), Some(last)) = (bounds.first_updated_at, bounds.last_updated_at) else {
            return Ok(PartitionBatch::new(Vec::new()).record_estimate(Some(0)));
        };
        let mut from = slice::parse_rfc3339(&first)? - 1;
        if let Some(start) = &config.start_date {
            from = from.max(slice::parse_rfc3339(start)?);
        }
        let step = i64::from(config.window_minutes) * 60;
        let windows = slice::datetime_windows(stream, from, slice::parse_rfc3339(&last)?, step)?;
        let estimate = config.start_date.is_none().then_some(bounds.count);
        Ok(PartitionBatch::new(windows).record_estimate(estimate))
    }

    fn read_page(config: &Config, partition: &Partition, token: Option<Value>) -> Result<Page> {
        match partition.stream.as_str() {
            "items" => {
                let mut request = config.get(config.url("/items")).query("limit", config.page_size);
                if let Some(cursor) = paginate::cursor(token.as_ref())? {
                    request = request.query("cursor", cursor);
                }
                let answer: CursorPage = request.send()?.error_for_status()?.json()?;
                Ok(Page::from_raw(answer.data).next(paginate::next_cursor(answer.next_cursor.as_deref())))
            }
            "accounts" => {
                let page = paginate::page_number(token.as_ref(), 1)?;
                let records = Self::accounts_page(config, page)?;
                let next = paginate::next_page_number(page, records.len(), config.page_size as usize);
                Ok(Page::from_raw(records).next(next))
            }
            "account_items" => {
                let request = match paginate::cursor(token.as_ref())? {
                    Some(next_url) => config.get(config.url(next_url)),
                    None => {
                        let account: Account = serde_json::from_value(json!({"id": partition.key["account_id"]}))?;
                        let mut request = config
                            .get(config.url(&format!("/accounts/{}/items", account.id)))
                            .query("limit", config.page_size);
                        if let Some(start) = partition.cursor_start() {
                            request = request.query("updated_after", start.to_query_value());
                        }
                        request
                    }
                };
                let answer: NextUrlPage = request.send()?.error_for_status()?.json()?;
                Ok(Page::from_raw(answer.data).next(paginate::next_cursor(answer.next.as_deref())))
            }
            "windowed_items" => {
                let mut request = config.get(config.url("/items")).query("limit", config.page_size);
                if let Some(start) = partition.cursor_start() {
                    request = request.query("updated_after", start.to_query_value());
                }
                if let Some(end) = partition.cursor_end() {
                    request = request.query("updated_until", end.to_query_value());
                }
                if let Some(cursor) = paginate::cursor(token.as_ref())? {
                    request = request.query("cursor", cursor);
                }
                let answer: CursorPage = request.send()?.error_for_status()?.json()?;
                Ok(Page::from_raw(answer.data).next(paginate::next_cursor(answer.next_cursor.as_deref())))
            }
            "report_items" => Err(sluice_guest::Error::system("report_items is read through report jobs")),
            other => Err(sluice_guest::Error::config(format!("unknown stream {other:?}"))),
        }
    }

    /// The demo API's tokens are stable: cursors encode a position, next links are plain URLs,
    /// pages are numbers. (A report's result pages are the orchestrator's business.)
    fn resumable_streams(_: &Config) -> Result<Vec<String>> {
        Ok(["items", "accounts", "account_items", "windowed_items"].map(String::from).to_vec())
    }
}

/// Where a report download is being read: the open body and the lines read from it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Reading {
    body: u32,
    offset: u64,
}

/// `report_items`: one report job per account on the demo API's `/reports` endpoints.
impl AsyncJobs for DemoSource {
    fn job_streams(config: &Config) -> Result<Vec<String>> {
        Ok(if config.report_jobs { vec!["report_items".to_string()] } else { Vec::new() })
    }

    fn max_jobs(config: &Config) -> u32 {
        config.max_jobs
    }

    fn create_job(config: &Config, partition: &Partition) -> Result<Value> {
        let mut body = json!({"account_id": partition.key["account_id"]});
        if let Some(start) = partition.cursor_start() {
            body["updated_after"] = json!(start.to_query_value());
        }
        let request = http::post(config.url("/reports")).json_body(&body)?;
        let request = match &config.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let job: JobView = request.send()?.error_for_status()?.json()?;
        Ok(json!({"id": job.id}))
    }

    fn poll_job(config: &Config, job: &Value) -> Result<JobStatus> {
        let id = job["id"].as_str().unwrap_or_default();
        let answer = config.get(config.url(&format!("/reports/{id}"))).send()?;
        if answer.status == 404 {
            return Ok(JobStatus::Unknown);
        }
        let view: JobView = answer.error_for_status()?.json()?;
        Ok(match view.status.as_str() {
            "completed" => JobStatus::Completed(json!({"url": view.download_url})),
            "failed" => JobStatus::Failed(view.error.unwrap_or_else(|| "the report failed".into())),
            _ => JobStatus::Running,
        })
    }

    /// The download is one JSONL body, streamed: each call hands on the next lines of it, and
    /// the token names the open body (and how far it got, to open it again from there when the
    /// partition is retried in a new instance).
    fn read_result(config: &Config, _job: &Value, download: &Value, token: Option<Value>) -> Result<Page> {
        let url = download["url"].as_str().unwrap_or_default();
        let open = |offset: u64| -> Result<http::Body> {
            let request = config.get(config.url(url));
            let request = if offset > 0 { request.query("offset", offset) } else { request };
            Ok(request.open()?.error_for_status()?.body)
        };
        let reading: Option<Reading> = token.map(serde_json::from_value).transpose()?;
        let (mut body, offset) = match reading {
            Some(r) => (http::Body::from_handle(r.body), r.offset),
            None => (open(0)?, 0),
        };
        let lines = match body.read_lines(config.report_page_size)? {
            Some(lines) => lines,
            None => {
                body = open(offset)?;
                body.read_lines(config.report_page_size)?
                    .ok_or_else(|| sluice_guest::Error::system("the body closed"))?
            }
        };
        let read = u64::from(lines.count);
        let records: Vec<String> = lines.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
        let next = (!lines.end).then(|| json!(Reading { body: body.handle(), offset: offset + read }));
        Ok(Page { records, next_token: next })
    }

    fn delete_job(config: &Config, job: &Value) -> Result<()> {
        let id = job["id"].as_str().unwrap_or_default();
        let request = http::delete(config.url(&format!("/reports/{id}")));
        let request = match &config.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let answer = request.send()?;
        // Gone already is as good as deleted.
        if answer.status != 404 {
            answer.error_for_status()?;
        }
        Ok(())
    }
}

sluice_guest::export_async_source!(DemoSource);
