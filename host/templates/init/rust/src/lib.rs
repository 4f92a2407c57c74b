//! {{name}}: a Sluice connector (written by `host init`). It reads one stream, `items`, from
//! `{base_url}/items`: cursor pagination (`next_cursor`), incremental on `updated_at`. Change
//! it to fit your API; README.md has the build and test commands.

use serde::Deserialize;
use serde_json::value::RawValue;
use sluice_guest::{Page, Partition, Result, Source, Stream, Value, http, json, paginate};

#[derive(Deserialize)]
struct Config {
    base_url: String,
    #[serde(default = "default_page_size")]
    page_size: u32,
}

fn default_page_size() -> u32 {
    100
}

/// One page of `/items` as the API answers it: the records are passed on as the API wrote them.
#[derive(Deserialize)]
struct ItemsPage {
    data: Vec<Box<RawValue>>,
    next_cursor: Option<String>,
}

struct Connector;

impl Source for Connector {
    type Config = Config;

    fn spec() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "{{name}}",
            "type": "object",
            "required": ["base_url"],
            "properties": {
                "base_url": {"type": "string", "description": "Where the API listens, e.g. http://127.0.0.1:8080"},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100}
            }
        })
    }

    /// What the operator must grant (`--allow-host`).
    fn hosts(config: &Config) -> Result<Vec<String>> {
        Ok(vec![http::host_port(&config.base_url)?])
    }

    fn check(config: &Config) -> Result<()> {
        http::get(http::join(&config.base_url, "/items")).query("limit", 1).send()?.error_for_status()?;
        Ok(())
    }

    fn streams(_: &Config) -> Result<Vec<Stream>> {
        let schema = json!({
            "type": "object",
            "required": ["id", "updated_at"],
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "updated_at": {"type": "string", "format": "date-time"}
            }
        });
        Ok(vec![Stream::new("items", schema).primary_key("id").cursor_field("updated_at")])
    }

    fn read_page(config: &Config, partition: &Partition, token: Option<Value>) -> Result<Page> {
        let mut request = http::get(http::join(&config.base_url, "/items")).query("limit", config.page_size);
        // Incremental: the host sets the partition's start from the saved state.
        if let Some(start) = partition.cursor_start() {
            request = request.query("updated_after", start.to_query_value());
        }
        if let Some(cursor) = paginate::cursor(token.as_ref())? {
            request = request.query("cursor", cursor);
        }
        let page: ItemsPage = request.send()?.error_for_status()?.json()?;
        Ok(Page::from_raw(page.data).next(paginate::next_cursor(page.next_cursor.as_deref())))
    }

    /// The API's cursors stay valid across runs: a run that stopped can go on where it was.
    fn resumable_streams(_: &Config) -> Result<Vec<String>> {
        Ok(vec!["items".to_string()])
    }
}

sluice_guest::export_source!(Connector);
