//! A hostile connector. Stream `numbers` has `partitions` partitions; partition
//! `hostile_partition` misbehaves as `mode` says, the others are well-behaved, so each test can
//! check both that the misbehaviour is contained and that the rest of the run completes.
//! `panic-<export>` modes panic in that export instead.

use serde::Deserialize;
use sluice_guest::{
    CursorValue, Error, Page, Partition, PartitionBatch, Result, Source, Steps, Stream, Value, http, json, log,
};
use std::hint::black_box;

#[derive(Deserialize)]
struct Config {
    mode: String,
    base_url: Option<String>,
    /// The URL or address the request and socket modes aim at.
    target: Option<String>,
    /// Extra hosts declared as needed (so a denial is the operator's, not the declaration's).
    #[serde(default)]
    declare: Vec<String>,
    #[serde(default = "three")]
    partitions: u64,
    #[serde(default = "one")]
    hostile_partition: u64,
    /// For `recursion-depth` and `deep-record`: how deep to go.
    #[serde(default)]
    depth: u64,
    /// Headers the request modes send.
    #[serde(default)]
    headers: Vec<(String, String)>,
    /// For `send-records` and `forward-records`: where the records are.
    #[serde(default)]
    path: Vec<String>,
    /// For `header-flood`, `log-bomb`, `big-page`, `many-records`: how many.
    #[serde(default)]
    count: u64,
    /// For `log-bomb` and `big-page`: bytes of each message or record.
    #[serde(default)]
    size: u64,
    /// For `big-page`: how many pages.
    #[serde(default = "one")]
    pages: u64,
    /// Text the `say` mode logs, one message each; `secret` is the spec's secret field.
    #[serde(default)]
    say: Vec<String>,
    /// For `secret-stream`: a suffix of the stream's name.
    #[serde(default)]
    stream_suffix: String,
    #[serde(default)]
    token: String,
}

fn three() -> u64 {
    3
}
fn one() -> u64 {
    1
}

fn panic_in(config: &Config, export: &str) {
    if config.mode == format!("panic-{export}") {
        panic!("{export} panicked on purpose");
    }
}

/// Recurses without end. Plain integers stay in wasm locals, so each frame lands on the wasm
/// stack (not Rust's shadow stack in linear memory), and rotating the result before returning
/// it keeps the compiler from turning the recursion into a loop.
#[inline(never)]
#[allow(unconditional_recursion, reason = "the point: the host must stop it")]
fn deep(depth: u64) -> u64 {
    deep(depth.wrapping_add(1)).rotate_left(1) ^ depth
}

/// Recurses exactly `depth` levels.
#[inline(never)]
fn bounded(depth: u64) -> u64 {
    if depth == 0 { 0 } else { bounded(black_box(depth - 1)).rotate_left(1) ^ depth }
}

fn outcome<T, E: std::fmt::Display>(attempt: &str, result: std::result::Result<T, E>) -> String {
    match result {
        Ok(_) => json!({"id": 1, "attempt": attempt, "ok": true}).to_string(),
        Err(e) => json!({"id": 1, "attempt": attempt, "ok": false, "error": e.to_string()}).to_string(),
    }
}

struct Hostile;

impl Source for Hostile {
    type Config = Config;

    fn spec() -> Value {
        // `spec` takes no config to pick a mode from, so this panic is a build variant
        // (`--features panic-spec`, built as hostile-panic-spec.wasm).
        if cfg!(feature = "panic-spec") {
            panic!("spec panicked on purpose");
        }
        json!({"type": "object", "properties": {"mode": {"type": "string"}, "token": {"type": "string", "airbyte_secret": true}}})
    }

    fn hosts(config: &Config) -> Result<Vec<String>> {
        panic_in(config, "capabilities");
        let mut hosts = config.declare.clone();
        if let Some(base) = &config.base_url {
            hosts.push(http::host_port(base)?);
        }
        Ok(hosts)
    }

    fn check(config: &Config) -> Result<()> {
        panic_in(config, "check");
        Ok(())
    }

    fn streams(config: &Config) -> Result<Vec<Stream>> {
        panic_in(config, "discover");
        let name = format!("numbers{}", config.stream_suffix);
        let stream = Stream::new(&name, json!({"type": "object"})).primary_key("id");
        // `mixed-cursor` reads incrementally on `c`, whose values change kind.
        let incremental = matches!(config.mode.as_str(), "mixed-cursor" | "cursor-partitions" | "raw-cursors");
        Ok(vec![if incremental { stream.cursor_field("c") } else { stream }])
    }

    fn partitions(config: &Config, stream: &str, _: Option<&Value>) -> Result<Vec<Partition>> {
        panic_in(config, "partitions");
        (0..config.partitions).map(|p| Partition::keyed(stream, json!({"p": p}))).collect()
    }

    fn partition_batch(
        config: &Config,
        stream: &str,
        state: Option<&Value>,
        token: Option<Value>,
    ) -> Result<PartitionBatch> {
        let n = token.as_ref().and_then(Value::as_u64).unwrap_or(0);
        match config.mode.as_str() {
            // Empty batches, each with a new token, forever.
            "list-forever" => Ok(PartitionBatch::new(vec![]).next(Some(json!(n + 1)))),
            // The same partition in every batch, forever.
            "list-same" => {
                Ok(PartitionBatch::new(vec![Partition::keyed(stream, json!({"p": 0}))?]).next(Some(json!(n + 1))))
            }
            // The same token forever.
            "list-repeat" => Ok(PartitionBatch::new(vec![]).next(Some(json!("again")))),
            // Records forwarded where no page can take them.
            "forward-in-listing" => {
                let target = config.target.clone().ok_or_else(|| Error::config("this mode needs a target"))?;
                http::get(target).forward_records(&["data"])?;
                Ok(PartitionBatch::new(vec![]))
            }
            // A bounded partition that ends before it starts.
            "backwards-range" => Ok(PartitionBatch::new(vec![
                Partition::keyed(stream, json!({"p": 0}))?
                    .starting_at(Some(CursorValue::Integer(50)))
                    .ending_at(Some(CursorValue::Integer(20))),
            ])),
            _ => Ok(PartitionBatch::new(Self::partitions(config, stream, state)?)),
        }
    }

    // `steps-*` modes read `numbers` in steps (contract 0.1.5).
    fn stepped_streams(config: &Config) -> Result<Vec<String>> {
        match config.mode.starts_with("steps-") {
            true => Ok(vec![format!("numbers{}", config.stream_suffix)]),
            false => Ok(Vec::new()),
        }
    }

    fn read_step(config: &Config, partition: &Partition, token: Option<Value>, steps: &mut Steps) -> Result<Page> {
        let p = partition.key["p"].as_u64().unwrap_or(0);
        if p != config.hostile_partition {
            return Self::read_page(config, partition, token);
        }
        let target = || config.target.clone().ok_or_else(|| Error::config("this mode needs a target"));
        let path: Vec<&str> = config.path.iter().map(String::as_str).collect();
        match config.mode.as_str() {
            // One more request every step: the host ends the page at its limit of steps.
            "steps-forever" => loop {
                steps.send(http::get(target()?))?;
            },
            // Forwards the records at `path` of the target in `count` steps (at least one),
            // then adds a record of its own: how many the host kept, or why it stopped. (The
            // error of a request not answered yet is caught too: the step still ends with it.)
            "steps-forward" => {
                let (mut kept, mut error) = (0, None);
                for _ in 0..config.count.max(1) {
                    match steps.forward_records(http::get(target()?), &path) {
                        Ok(answer) => kept += answer.records.unwrap_or(0),
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                Page::from_values([json!({"id": 1, "own": true, "kept": kept, "error": error})])
            }
            // Takes the records at `path` out of the target's answer; what it got, or its error.
            "steps-records" => match steps.send_records(http::get(target()?), &path) {
                Ok(answer) => Page::from_values([json!({"id": 1, "records": answer.records, "status": answer.status})]),
                Err(e) => Page::from_values([json!({"id": 1, "error": e.to_string()})]),
            },
            other => Err(Error::config(format!("unknown steps mode {other}"))),
        }
    }

    fn read_page(config: &Config, partition: &Partition, token: Option<Value>) -> Result<Page> {
        let p = partition.key["p"].as_u64().unwrap_or(0);
        if p == config.hostile_partition {
            panic_in(config, "read");
        }
        // Every partition one record, its cursor `c` its number.
        if config.mode == "cursor-partitions" {
            return Page::from_values([json!({"id": p, "c": p})]);
        }
        // `loop-all`: every partition spins (guests contending for the cores).
        if p != config.hostile_partition && config.mode != "loop-all" {
            return Page::from_values([json!({"id": p})]);
        }
        let target = || config.target.clone().ok_or_else(|| Error::config("this mode needs a target"));
        let record = match config.mode.as_str() {
            "loop" | "loop-all" => {
                let mut x = 0u64;
                loop {
                    x = black_box(x.wrapping_add(1));
                }
            }
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(black_box(vec![7u8; 1 << 20]));
                }
            }
            "recursion" => json!({"id": deep(black_box(0))}).to_string(),
            "recursion-depth" => json!({"id": 1, "result": bounded(black_box(config.depth))}).to_string(),
            "read-file" => outcome("read /etc/passwd", std::fs::read_to_string("/etc/passwd")),
            "list-root" => outcome("list /", std::fs::read_dir("/")),
            "env" => json!({"id": 1, "vars": std::env::vars().count(), "home": std::env::var("HOME").ok()}).to_string(),
            "socket" => outcome("connect", std::net::TcpStream::connect(target()?.as_str())),
            "request" => {
                let mut request = http::get(target()?);
                for (name, value) in &config.headers {
                    request = request.header(name, value.clone());
                }
                let answer = request.send()?;
                let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
                json!({"id": 1, "status": answer.status, "body": body}).to_string()
            }
            // What the host takes out of an answer at a path: the records' count, the rest, or why not.
            "send-records" => {
                let path: Vec<&str> = config.path.iter().map(String::as_str).collect();
                match http::get(target()?).send_records(&path) {
                    Ok(answer) => {
                        let rest: Value = serde_json::from_slice(&answer.rest).unwrap_or(Value::Null);
                        let records = answer.records.as_ref().map(|r| r.len());
                        let first = answer.records.as_ref().and_then(|r| r.first().cloned());
                        json!({"id": 1, "status": answer.status, "records": records, "first": first, "rest": rest})
                            .to_string()
                    }
                    Err(e) => json!({"id": 1, "error": e.to_string()}).to_string(),
                }
            }
            // Forwards the records at `path` of the target `count` times (at least once), then
            // adds a record of its own after them: how many the host kept, or why it stopped.
            "forward-records" => {
                let path: Vec<&str> = config.path.iter().map(String::as_str).collect();
                let (mut kept, mut error) = (0, None);
                for _ in 0..config.count.max(1) {
                    match http::get(target()?).forward_records(&path) {
                        Ok(answer) => kept += answer.records.unwrap_or(0),
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                json!({"id": 1, "own": true, "kept": kept, "error": error}).to_string()
            }
            // Guest work between import calls that return at once (a denied request): all of it
            // must be charged to the CPU budget.
            "spin-send" => loop {
                let started = std::time::Instant::now();
                while started.elapsed() < std::time::Duration::from_millis(1) {
                    black_box(started);
                }
                let _ = http::get(target()?).send();
            },
            // Opens `count` bodies without reading them: the host must refuse past its limit.
            "open-many" => {
                let mut opened = 0;
                let mut error = None;
                for _ in 0..config.count {
                    match http::get(target()?).open() {
                        Ok(_) => opened += 1,
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                json!({"id": 1, "attempt": "open", "opened": opened, "error": error}).to_string()
            }
            // Reads a body it never opened (handle `count`).
            "foreign-body" => {
                let read = http::Body::from_handle(config.count as u32).read_lines(10)?;
                json!({"id": 1, "attempt": "read", "known": read.is_some()}).to_string()
            }
            // Opens the target and reads it `count` lines at a time to the end.
            "stream-lines" => {
                let body = http::get(target()?).open()?.body;
                let (mut lines, mut reads) = (0u64, 0u64);
                loop {
                    let read =
                        body.read_lines(config.count as u32)?.ok_or_else(|| Error::system("the body vanished"))?;
                    lines += u64::from(read.count);
                    reads += 1;
                    if read.end {
                        break;
                    }
                }
                json!({"id": 1, "attempt": "stream", "lines": lines, "reads": reads}).to_string()
            }
            "header-flood" => {
                let mut request = http::get(target()?);
                for i in 0..config.count {
                    request = request.header(&format!("x-flood-{i}"), "v");
                }
                let answer = request.send()?;
                json!({"id": 1, "status": answer.status}).to_string()
            }
            // Prints `count` lines of `size` bytes to stdout.
            "print-flood" => {
                let line = "p".repeat(config.size as usize);
                for _ in 0..config.count {
                    println!("{line}");
                }
                json!({"id": 1}).to_string()
            }
            "log-bomb" => {
                let message = "y".repeat(config.size as usize);
                for _ in 0..config.count {
                    log::info(message.clone());
                }
                json!({"id": 1}).to_string()
            }
            "say" => {
                for text in &config.say {
                    log::info(text.replace("{secret}", &config.token));
                }
                json!({"id": 1}).to_string()
            }
            "deep-record" => {
                let depth = config.depth as usize;
                format!("{{\"id\": 1, \"deep\": {}{}}}", "[".repeat(depth), "]".repeat(depth))
            }
            // `count` records of `size` bytes a page, for `pages` pages.
            "big-page" => {
                let page = token.as_ref().and_then(Value::as_u64).unwrap_or(0);
                let blob = "z".repeat(config.size as usize);
                let first = 100 + page * config.count;
                let records =
                    (first..first + config.count).map(|id| json!({"id": id, "blob": blob}).to_string()).collect();
                let next_token = (page + 1 < config.pages).then(|| json!(page + 1));
                return Ok(Page { records, next_token });
            }
            // Records whose cursor values are the JSON texts in `say`, as written.
            "raw-cursors" => {
                let records = config.say.iter().enumerate().map(|(i, c)| format!("{{\"id\":{},\"c\":{c}}}", 100 + i));
                return Ok(Page { records: records.collect(), next_token: None });
            }
            "mixed-cursor" => {
                let records = vec![json!({"id": 100, "c": "9"}).to_string(), json!({"id": 101, "c": 10}).to_string()];
                return Ok(Page { records, next_token: None });
            }
            "many-records" => {
                let records = (0..config.count).map(|i| json!({"id": 100 + i}).to_string()).collect();
                return Ok(Page { records, next_token: None });
            }
            "endless-pages" => {
                let n = token.as_ref().and_then(Value::as_u64).unwrap_or(0);
                return Ok(Page { records: vec![json!({"id": 100 + n}).to_string()], next_token: Some(json!(n + 1)) });
            }
            // A record, then a page token of `count` bytes (and, on the next page, the end): tokens
            // travel in every STATE of their stream while the partition is read.
            "big-token" => {
                let next_token = token.is_none().then(|| json!("t".repeat(config.count as usize)));
                return Ok(Page { records: vec![json!({"id": 100}).to_string()], next_token });
            }
            "big-record" => format!("{{\"id\": 1, \"blob\": \"{}\"}}", "x".repeat(100 << 20)),
            "invalid-utf8" => {
                // SAFETY: deliberately not; the host must refuse it, not trust it.
                unsafe { String::from_utf8_unchecked(vec![b'{', b'"', 0xff, 0xfe, b'"', b':', b'1', b'}']) }
            }
            "log-flood" => {
                for i in 0..200_000 {
                    log::info(format!("flood {i}"));
                }
                json!({"id": 1}).to_string()
            }
            other => return Err(Error::config(format!("unknown mode {other:?}"))),
        };
        Ok(Page { records: vec![record], next_token: None })
    }
}

sluice_guest::export_source!(Hostile);
