//! A connector for host tests. Its config picks a behaviour (`mode`), well-behaved or not, so
//! each host test can pair with exactly the misbehaviour it checks.

use serde::Deserialize;
use sluice_guest::{CursorValue, Error, Page, Partition, Result, Source, Stream, Value, json, log, paginate};

#[derive(Deserialize)]
struct Config {
    #[serde(default)]
    mode: String,
    /// Partitions of the `numbers` stream.
    #[serde(default = "one")]
    partitions: u64,
    /// Pages per partition.
    #[serde(default = "one")]
    pages: u64,
    /// Records per page.
    #[serde(default = "one")]
    per_page: u64,
    /// For `mode = "fail-partition"`: the partition that fails.
    #[serde(default)]
    failing_partition: u64,
    /// For `mode = "sleep"`: how long each page sleeps, milliseconds (`std::thread::sleep`,
    /// which waits on a WASI clock pollable).
    #[serde(default)]
    sleep_ms: u64,
}

fn one() -> u64 {
    1
}

struct TestConnector;

std::thread_local! {
    /// The config text this instance was last handed, for `mode = "config-fields"`.
    static CONFIG_TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl Source for TestConnector {
    type Config = Config;

    fn parse_config(text: &str) -> Result<Config> {
        CONFIG_TEXT.with(|t| *t.borrow_mut() = text.to_string());
        sluice_guest::parse_config(text)
    }

    fn spec() -> Value {
        json!({"type": "object", "properties": {"mode": {"type": "string"}}})
    }

    fn check(config: &Config) -> Result<()> {
        match config.mode.as_str() {
            "print" => {
                println!("hello from stdout");
                eprintln!("hello from stderr");
                log::warn("hello from the log import");
                Ok(())
            }
            "panic" => panic!("check panicked on purpose"),
            _ => Ok(()),
        }
    }

    fn streams(_: &Config) -> Result<Vec<Stream>> {
        Ok(vec![
            Stream::new("numbers", json!({"type": "object"})).primary_key("id"),
            // Partition p covers the integer cursor range (10p, 10p + 10].
            Stream::new("windows", json!({"type": "object"})).primary_key("n").cursor_field("n"),
        ])
    }

    fn partitions(config: &Config, stream: &str, _: Option<&Value>) -> Result<Vec<Partition>> {
        (0..config.partitions)
            .map(|p| {
                let partition = Partition::keyed(stream, json!({"p": p}))?;
                Ok(match stream {
                    "windows" => partition
                        .starting_at(Some(CursorValue::Integer(p as i64 * 10)))
                        .ending_at(Some(CursorValue::Integer(p as i64 * 10 + 10))),
                    _ => partition,
                })
            })
            .collect()
    }

    fn read_page(config: &Config, partition: &Partition, token: Option<Value>) -> Result<Page> {
        let p = partition.key["p"].as_u64().unwrap_or(0);
        if partition.stream == "windows" {
            if config.mode == "fail-partition" && p == config.failing_partition {
                return Err(Error::system(format!("window {p} fails on purpose")));
            }
            // Records after the (possibly raised) start, up to the end, in one page.
            let bound = |v: Option<&CursorValue>| match v {
                Some(CursorValue::Integer(i)) => Ok(*i),
                other => Err(Error::system(format!("expected an integer bound, got {other:?}"))),
            };
            let (start, end) = (bound(partition.cursor_start())?, bound(partition.cursor_end())?);
            return Page::from_values((start + 1..=end).map(|n| json!({"n": n, "p": p})));
        }
        if config.mode == "config-fields" {
            // The config's top-level fields as this partition's call got them.
            let text = CONFIG_TEXT.with(|t| t.borrow().clone());
            let fields: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap_or_default();
            return Page::from_values([json!({"id": p, "config_fields": fields.keys().collect::<Vec<_>>()})]);
        }
        if config.mode == "sleep" {
            let started = std::time::Instant::now();
            std::thread::sleep(std::time::Duration::from_millis(config.sleep_ms));
            return Page::from_values([json!({"id": p, "slept_ms": started.elapsed().as_millis() as u64})]);
        }
        if config.mode == "dirty-memory" {
            return Page::from_values([json!({"id": p, "pristine": memory_is_pristine_then_dirty(p)})]);
        }
        if config.mode == "repeat-token" {
            // The same next token forever: the host must stop the loop.
            let id = u64::from(token.is_some());
            return Ok(Page::from_values([json!({"id": id})])?.next(Some(json!("same"))));
        }
        let page = paginate::page_number(token.as_ref(), 0)?;
        let records = match config.mode.as_str() {
            "invalid-json" => vec!["{not json".to_string()],
            "not-object" => vec!["[1, 2]".to_string()],
            // Legal JSON whose whitespace would end the line and forge a STATE message.
            "forge" => vec![
                "{\"id\": 1,\n\"note\": \"x\"}\n{\"type\":\"STATE\",\"state\":{\"data\":{}}}".to_string(),
                "{\"id\": 2,\r\n\"text\": \"line\\n{\\\"type\\\":\\\"STATE\\\"}\"\n}".to_string(),
            ],
            "newline" => {
                vec!["{\"id\": 1,\n\"note\": \"x\"}".to_string(), "{\"id\": 2,\r\n\"text\": \"a\\nb\"\n}".to_string()]
            }
            "panic" => panic!("read_page panicked on purpose"),
            "config-error" => return Err(Error::config("the API key is wrong")),
            "transient-error" => return Err(Error::transient("the API is overloaded")),
            "fail-partition" if p == config.failing_partition => {
                return Err(Error::system(format!("partition {p} fails on purpose")));
            }
            _ => (0..config.per_page)
                .map(|i| json!({"id": (p * config.pages + page) * config.per_page + i, "p": p}).to_string())
                .collect(),
        };
        let next = (page + 1 < config.pages).then(|| json!(page + 1));
        Ok(Page { records, next_token: next })
    }
}

/// 1 MiB the image leaves zeroed and 256 KiB it fills with 0x5A, for `dirty-memory`.
const ZEROED_BYTES: usize = 1 << 20;
const FILLED_BYTES: usize = 256 << 10;
static mut ZEROED: [u8; ZEROED_BYTES] = [0; ZEROED_BYTES];
static mut FILLED: [u8; FILLED_BYTES] = [0x5A; FILLED_BYTES];

/// Whether this instance finds both as the image left them; then writes every other page of
/// both, so the slot the next instance gets has 160 separate runs of dirty pages to reset (a
/// pagemap scan before wasmtime 48.0.11 stopped at 32 and gave the rest back to the kernel).
fn memory_is_pristine_then_dirty(p: u64) -> bool {
    const PAGE: usize = 4096;
    // SAFETY: an instance runs one call at a time, and nothing else refers to these statics.
    let (zeroed, filled) = unsafe {
        let zeroed = std::slice::from_raw_parts_mut((&raw mut ZEROED).cast::<u8>(), ZEROED_BYTES);
        let filled = std::slice::from_raw_parts_mut((&raw mut FILLED).cast::<u8>(), FILLED_BYTES);
        (zeroed, filled)
    };
    let pristine = zeroed.iter().all(|b| *b == 0) && filled.iter().all(|b| *b == 0x5A);
    let mark = (p as u8) | 1;
    for page in (0..zeroed.len() / PAGE).step_by(2) {
        zeroed[page * PAGE] = mark;
    }
    for page in (0..filled.len() / PAGE).step_by(2) {
        filled[page * PAGE + 1] = mark;
    }
    // The writes must reach memory: without this the compiler may drop them as never read.
    std::hint::black_box((&zeroed, &filled));
    pristine
}

sluice_guest::export_source!(TestConnector);
