//! A hostile connector. Stream `numbers` has `partitions` partitions; partition
//! `hostile_partition` misbehaves as `mode` says, the others are well-behaved, so each test can
//! check both that the misbehaviour is contained and that the rest of the run completes.
//! `panic-<export>` modes panic in that export instead.

use serde::Deserialize;
use sluice_guest::{Error, Page, Partition, Result, Source, Stream, Value, http, json, log};
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
    /// For `recursion-depth`: how deep to recurse.
    #[serde(default)]
    depth: u64,
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
        Ok(vec![Stream::new("numbers", json!({"type": "object"})).primary_key("id")])
    }

    fn partitions(config: &Config, stream: &str, _: Option<&Value>) -> Result<Vec<Partition>> {
        panic_in(config, "partitions");
        (0..config.partitions).map(|p| Partition::keyed(stream, json!({"p": p}))).collect()
    }

    fn read_page(config: &Config, partition: &Partition, _token: Option<Value>) -> Result<Page> {
        panic_in(config, "read");
        let p = partition.key["p"].as_u64().unwrap_or(0);
        if p != config.hostile_partition {
            return Page::from_values([json!({"id": p})]);
        }
        let target = || config.target.clone().ok_or_else(|| Error::config("this mode needs a target"));
        let record = match config.mode.as_str() {
            "loop" => {
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
                let answer = http::get(target()?).send()?;
                json!({"id": 1, "status": answer.status}).to_string()
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
