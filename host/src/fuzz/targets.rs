//! One fuzz target per parser of untrusted input, each with the bound the host promises for it
//! (docs/sandbox.md, "Fuzzing"). The bounds are for this unoptimised test build: per byte they
//! are generous (a linear parser passes them many times over), so what breaks one is work that
//! grows faster than the input (a quadratic scan, an expansion) or a cap that does not hold.
//!
//! `just fuzz TARGET` names a target by its test: `manifest_yaml`, `state_file`, `catalog`,
//! `config_against_spec`, `records_split`, `streamed_lines`, `page_tokens`, `guest_records`.

use super::{Bound, Target, fuzz};
use fastrand::Rng;
use std::future::Future;
use std::time::Duration;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Time: a fixed part and a part per byte.
fn time(fixed_ms: u64, per_byte_ns: u64, n: usize) -> Duration {
    Duration::from_millis(fixed_ms) + Duration::from_nanos(per_byte_ns.saturating_mul(n as u64))
}

/// JSON parsed into values: a value is ~80 bytes here (ordered maps, exact numbers) for as
/// little as two bytes of text (`[]`), and vectors grow by doubling.
const JSON_BYTES_PER_BYTE: usize = 160;

fn text(input: &[u8]) -> Option<&str> {
    std::str::from_utf8(input).ok()
}

/// Random sizes, mostly small, sometimes near the limits: `1..=max` on a log scale.
fn size(rng: &mut Rng, max: usize) -> usize {
    let bits = usize::BITS - max.leading_zeros();
    let top = 1usize << rng.u32(0..bits);
    rng.usize(1..=top.min(max))
}

/// Nesting `depth` levels of `open`, closed by `close`, around `inner`.
fn nested(open: &str, close: &str, inner: &str, depth: usize) -> Vec<u8> {
    let mut out = open.repeat(depth);
    out.push_str(inner);
    out.push_str(&close.repeat(depth));
    out.into_bytes()
}

/// A JSON list of `count` copies of `item` under `prefix`/`suffix`.
fn list(prefix: &str, item: &str, count: usize, suffix: &str) -> Vec<u8> {
    let mut out = String::from(prefix);
    for i in 0..count {
        if i > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    out.push_str(suffix);
    out.into_bytes()
}

/// JSON nested deep, or wide, or both.
fn json_shapes(rng: &mut Rng) -> Vec<u8> {
    match rng.u8(0..4) {
        0 => nested("[", "]", "", size(rng, 200_000)),
        1 => nested("{\"a\":", "}", "{}", size(rng, 200_000)),
        2 => list("[", "{}", size(rng, 500_000), "]"),
        _ => list("{\"a\":{\"b\":[", &format!("{{\"b\":{}}}", "1".repeat(size(rng, 64))), size(rng, 100_000), "]}}"),
    }
}

const JSON_WORDS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\"a\":",
    "null",
    "true",
    "1e400",
    "-0",
    "12345678901234567890123",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "{\"a\":{\"b\":[",
    "]}}",
    "[[[[",
    "]]]]",
    "\"$ref\":\"#/definitions/d\"",
];

// A manifest (YAML): expansion by aliases and depth are counted by the prescan before anything
// is built, so what a small file may cost is capped by the expanded limits, not its size.
static MANIFEST_YAML: Target = Target {
    name: "manifest_yaml",
    dictionary: &[
        "&a ",
        "*a",
        "&b [",
        "*b, *b, *b",
        "- ",
        ": ",
        "\n  ",
        "\n- ",
        "[",
        "]",
        "{",
        "}",
        "<<: *a",
        "!!binary ",
        "|\n  ",
        ">\n  ",
        "? ",
        "---\n",
        "...\n",
        "'",
        "\"",
        "%YAML 1.1\n",
        "!tag ",
        "~",
        "0x1F",
        "1e400",
        ".inf",
    ],
    max_len: MIB,
    bound: |n| {
        use crate::guest::manifest::{MAX_EXPANDED_BYTES, MAX_EXPANDED_NODES};
        // Built up to the expanded caps: ~80 bytes and ~1.5 µs here a value, the text twice
        // (events and JSON). An 11 KB file of aliases to just under the node cap costs 150 MiB.
        let nodes = MAX_EXPANDED_NODES as usize;
        let expanded = Duration::from_nanos(1_500 * nodes as u64);
        Bound {
            time: time(2_000, 20_000, n) + expanded,
            memory: 4 * MIB + 64 * n + 80 * nodes + 2 * MAX_EXPANDED_BYTES,
        }
    },
    run: |input| {
        let _ = crate::guest::manifest::parse(input);
    },
    generate: |rng| match rng.u8(0..4) {
        // Laughs: each level a list of aliases to the one below.
        0 => {
            let (fanout, levels) = (rng.usize(2..=32), rng.usize(1..=9));
            let mut out = format!("l0: &l0 \"{}\"\n", "x".repeat(size(rng, 4096)));
            for level in 1..=levels {
                let below = vec![format!("*l{}", level - 1); fanout].join(", ");
                out.push_str(&format!("l{level}: &l{level} [{below}]\n"));
            }
            out.into_bytes()
        }
        // One anchored text aliased again and again, expanding to 1 KiB .. 1 GiB.
        1 => {
            let (expanded, text) = (1usize << rng.u32(10..=30), 1usize << rng.u32(4..=18));
            let uses = vec!["*t"; (expanded / text).clamp(1, 100_000)].join(", ");
            format!("t: &t \"{}\"\nuses: [{uses}]\n", "y".repeat(text)).into_bytes()
        }
        2 => nested("[", "]", "", size(rng, 500_000)),
        // Block sequences nested on one line: `- - - x`.
        _ => format!("{}x\n", "- ".repeat(size(rng, 400_000))).into_bytes(),
    },
};

// A state file (`--state`), and every stream's state taken in as the run takes it.
static STATE_FILE: Target = Target {
    name: "state_file",
    dictionary: &[
        "{\"type\":\"STATE\",\"state\":{\"type\":\"STREAM\",\"stream\":{\"stream_descriptor\":{\"name\":\"s\"},\"stream_state\":",
        "}}}",
        "\"partitions\":[",
        "{\"partition\":{\"id\":1},\"cursor\":",
        "\"in_progress\":[",
        "\"token\":",
        "\"cursor_field\":[\"updated_at\"]",
        "\"low_water\":",
        "\"2024-01-01T00:00:00Z\"",
        "\"bookmarks\":",
        "\"type\":\"GLOBAL\"",
        "\"shared_state\":",
        "\n",
        "\"completed\":[[0,1],[2,3]]",
        "[4,5],",
        "\"done\":[",
    ],
    max_len: MIB,
    bound: |n| Bound { time: time(500, 5_000, n), memory: 2 * MIB + JSON_BYTES_PER_BYTE * 2 * n },
    run: |input| {
        let Some(text) = text(input) else { return };
        let Ok(state) = crate::data::state::InputState::parse(text) else { return };
        for (stream, saved) in &state.streams {
            let _ = crate::data::state::StreamCursor::new(stream, vec!["updated_at".into()], Some(saved));
            let _ = crate::run::resume::Resumption::from_state(stream, Some(saved), true);
        }
    },
    generate: |rng| {
        let partition = "{\"partition\":{\"id\":7},\"cursor\":\"2024-01-01T00:00:00Z\"}";
        let partitions = String::from_utf8(list("[", partition, size(rng, 200_000), "]")).expect("text");
        let progress = "{\"partition\":{\"id\":8},\"token\":{\"page\":2}}";
        let progress = String::from_utf8(list("[", progress, size(rng, 200_000), "]")).expect("text");
        // Finished ranges in reverse order, each merged into the sorted list.
        let ranges: Vec<String> = (0..size(rng, 200_000)).rev().map(|i| format!("[{},{}]", 2 * i, 2 * i + 1)).collect();
        let ranges = ranges.join(",");
        format!(
            "{{\"s\":{{\"cursor_field\":[\"updated_at\"],\"partitions\":{partitions},\"in_progress\":{progress},\"completed\":[{ranges}]}}}}"
        )
        .into_bytes()
    },
};

static CATALOG: Target = Target {
    name: "catalog",
    dictionary: &[
        "{\"streams\":[",
        "{\"stream\":{\"name\":\"s\",\"json_schema\":{}},\"sync_mode\":\"incremental\"}",
        "\"tap_stream_id\":\"s\"",
        "\"metadata\":[{\"breadcrumb\":[],\"metadata\":{\"selected\":true}}]",
        "\"breadcrumb\":[\"properties\",\"a\"]",
        "\"selected\":false",
        "\"destination_sync_mode\":\"append\"",
    ],
    max_len: MIB,
    bound: |n| Bound { time: time(500, 5_000, n), memory: 2 * MIB + JSON_BYTES_PER_BYTE * 2 * n },
    run: |input| {
        if let Some(text) = text(input) {
            let _ = crate::data::catalog::parse(text);
        }
    },
    generate: |rng| {
        let stream = "{\"stream\":{\"name\":\"s\",\"json_schema\":{}},\"sync_mode\":\"full_refresh\"}";
        list("{\"streams\":[", stream, size(rng, 100_000), "]}")
    },
};

/// Between a spec and a config in one input.
const CONFIG_SEPARATOR: &str = "\n%%\n";

// A plugin's spec (its JSON Schema) built into a validator, and a config checked against it:
// the schema's depth, `$ref`s and patterns are bounded before the validator is built, and
// patterns run on a linear-time engine.
static CONFIG_AGAINST_SPEC: Target = Target {
    name: "config_against_spec",
    dictionary: &[
        "\n%%\n",
        "{\"type\":\"object\",\"properties\":{",
        "\"a\":{\"type\":\"string\",\"pattern\":\"^(a|a)*$\"}",
        "\"allOf\":[",
        "\"anyOf\":[",
        "\"oneOf\":[",
        "\"$ref\":\"#/definitions/d\"",
        "\"definitions\":{\"d\":",
        "\"required\":[\"a\"]",
        "\"patternProperties\":{\"^(a+)+$\":{}}",
        "\"enum\":[1,2]",
        "\"format\":\"date\"",
        "\"minLength\":1000000",
        "\"items\":",
        "\"additionalProperties\":false",
        "\"a\":\"aaaaaaaaaaaaaaaaaaaaaaa!\"",
    ],
    max_len: 256 * KIB,
    bound: |n| Bound { time: time(2_000, 20_000, n), memory: 16 * MIB + 4 * JSON_BYTES_PER_BYTE * n },
    run: |input| {
        let Some(text) = text(input) else { return };
        let (spec, config) = text.split_once(CONFIG_SEPARATOR).unwrap_or((text, "{}"));
        let (Ok(spec), Ok(config)) = (serde_json::from_str(spec), serde_json::from_str(config)) else { return };
        let _ = crate::data::config::check(&spec, &config);
    },
    generate: |rng| {
        let config = format!("{{\"a\":\"{}!\",\"x\":{{\"x\":{{}}}}}}", "a".repeat(size(rng, 64)));
        let spec = match rng.u8(0..3) {
            // A chain of `$ref`s.
            0 => {
                let length = size(rng, 20_000);
                let links: Vec<String> =
                    (0..length).map(|i| format!("\"d{i}\":{{\"$ref\":\"#/definitions/d{}\"}}", i + 1)).collect();
                format!("{{\"$ref\":\"#/definitions/d0\",\"definitions\":{{{},\"d{length}\":{{}}}}}}", links.join(","))
            }
            // Backtracking patterns, many of them.
            1 => {
                let pattern = ["^(a|a)*\\\\1b$", "^(a+)+$", "(x*)*y", "^(a|aa)+$"][rng.usize(0..4)];
                let copy = format!("{{\"properties\":{{\"a\":{{\"pattern\":\"{pattern}\"}}}}}}");
                String::from_utf8(list("{\"allOf\":[", &copy, size(rng, 2_000), "]}")).expect("text")
            }
            // Properties nested deep.
            _ => String::from_utf8(nested("{\"properties\":{\"x\":", "}}", "{}", size(rng, 2_000))).expect("text"),
        };
        format!("{spec}{CONFIG_SEPARATOR}{config}").into_bytes()
    },
};

// An API's answer split into records at a path (`send-records`, `forward-records`): counted as
// the list is read, past the page's limit nothing is kept.
static RECORDS_SPLIT: Target = Target {
    name: "records_split",
    dictionary: JSON_WORDS,
    max_len: 2 * MIB,
    // The rest of the answer and at most the page's records, each copied once, and a key read
    // whole (serde_json's scratch, doubling, then the copy: a 2 MB key costs ~3.5 n): a list
    // past the limit is counted, not kept (it used to hold 824 MiB for a 32 MiB answer; without
    // the limit a list of `{}` costs 8 n).
    bound: |n| Bound { time: time(500, 5_000, n), memory: MIB + 5 * n },
    run: |input| {
        // The first byte picks the path, the rest is the answer.
        let Some((pick, body)) = input.split_first() else { return };
        let path: Vec<String> = match pick % 3 {
            0 => vec!["data".into()],
            1 => vec!["a".into(), "b".into()],
            _ => vec!["records".into()],
        };
        let _ = crate::net::records::split(body, &path, 1000);
    },
    generate: |rng| match rng.u8(0..3) {
        0 => list("\u{0}{\"data\":[", "{}", size(rng, 2_000_000), "]}"),
        1 => list("\u{1}{\"a\":{\"b\":[", "{\"k\":[1,2,3]}", size(rng, 200_000), "]},\"z\":1}"),
        _ => json_shapes(rng),
    },
};

// A body read in lines as a guest asks, cut into network chunks of any size: each byte is
// scanned once, and an open body holds at most a chunk and one unfinished line.
static STREAMED_LINES: Target = Target {
    name: "streamed_lines",
    dictionary: &["\n", "\r\n", "\n\n\n", "aaaaaaaaaaaaaaaa", "{\"a\":1}\n"],
    max_len: 2 * MIB,
    // The chunks themselves (the input, made here) and the pieces handed out.
    bound: |n| Bound { time: time(500, 5_000, n), memory: 256 * KIB + 4 * n },
    run: |input| {
        use crate::net::body::{BodySource, OpenBody};
        let mut rng = fastrand::Rng::with_seed(input.len() as u64);
        let mut chunks = std::collections::VecDeque::new();
        let mut rest = input;
        while !rest.is_empty() {
            let size = if rng.bool() { rng.usize(1..=8) } else { rng.usize(1..=64 * KIB) }.min(rest.len());
            chunks.push_back(bytes::Bytes::copy_from_slice(&rest[..size]));
            rest = &rest[size..];
        }
        let mut body = OpenBody::new(BodySource::Chunks(chunks), "http://api/fuzz".into());
        let received = std::sync::atomic::AtomicU64::default();
        let cap = rng.usize(1..=64 * KIB);
        // A body of chunks never waits: each read is ready when first polled.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for _ in 0..=input.len() {
            let max_lines = rng.u32(1..=1000);
            let mut read = std::pin::pin!(body.read_lines(max_lines, cap, &received));
            let std::task::Poll::Ready(result) = read.as_mut().poll(&mut cx) else { panic!("a body of chunks waited") };
            match result {
                Ok(lines) if !lines.end => {}
                _ => break,
            }
        }
    },
    generate: |rng| match rng.u8(0..3) {
        0 => "z".repeat(size(rng, 4 << 20)).into_bytes(),
        1 => "\n".repeat(size(rng, 4 << 20)).into_bytes(),
        _ => format!("{}\n", "q".repeat(size(rng, 128))).repeat(size(rng, 30_000)).into_bytes(),
    },
};

// Page and listing tokens a guest hands back, one a line: checked for size, JSON and repeats.
static PAGE_TOKENS: Target = Target {
    name: "page_tokens",
    dictionary: &["\n", "\"\\ud800x\"", "{\"page\":1}", "null", "\"a\"", "[1,2]", "1e400"],
    max_len: MIB,
    bound: |n| Bound { time: time(500, 5_000, n), memory: 2 * MIB + JSON_BYTES_PER_BYTE * n },
    run: |input| {
        let mut guard = crate::run::read::TokenGuard::default();
        for token in input.split(|b| *b == b'\n') {
            if let Ok(token) = std::str::from_utf8(token) {
                let _ = guard.check(token);
            }
        }
    },
    generate: |rng| match rng.u8(0..3) {
        // Tokens that never repeat, past the exact memory of the guard.
        0 => (0..size(rng, 100_000)).map(|i| format!("{i}\n")).collect::<String>().into_bytes(),
        // One token past the size cap.
        1 => format!("\"{}\"", "t".repeat(size(rng, 1 << 20))).into_bytes(),
        _ => json_shapes(rng),
    },
};

// A record a guest hands over, as the host checks it before it goes out (size, JSON, depth,
// the cursor value of an incremental stream).
static GUEST_RECORDS: Target = Target {
    name: "guest_records",
    dictionary: JSON_WORDS,
    max_len: 2 * MIB,
    bound: |n| Bound { time: time(500, 5_000, n), memory: MIB + JSON_BYTES_PER_BYTE * n },
    run: |input| {
        use crate::data::protocol::{checked_record, checked_record_with_cursor, split_record_with_cursor};
        let Some(text) = text(input) else { return };
        let checked = checked_record(text, 64 * MIB, 64);
        let field = ["a".to_string(), "b".to_string()];
        let with_cursor = checked_record_with_cursor(text, 64 * MIB, 64, &field);
        let _ = crate::data::state::cursor_in_text(text, &["a".into()]);
        // A valid object, as the host splits it out of an answer, is only scanned: the same.
        if let Ok(record) = &checked {
            let raw = text.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\n' || c == '\r');
            let split = split_record_with_cursor(raw, 64 * MIB, 64, &field);
            assert_eq!(split, with_cursor, "split and parsed records differ: {}", crate::data::protocol::preview(raw));
            let split = split_record_with_cursor(raw, 64 * MIB, 64, &[]);
            assert_eq!(split.as_ref().map(|(r, _)| r), Ok(record));
        }
    },
    generate: json_shapes,
};

#[test]
fn manifest_yaml() {
    fuzz(&MANIFEST_YAML);
}

#[test]
fn state_file() {
    fuzz(&STATE_FILE);
}

#[test]
fn catalog() {
    fuzz(&CATALOG);
}

#[test]
fn config_against_spec() {
    fuzz(&CONFIG_AGAINST_SPEC);
}

#[test]
fn records_split() {
    fuzz(&RECORDS_SPLIT);
}

#[test]
fn streamed_lines() {
    fuzz(&STREAMED_LINES);
}

#[test]
fn page_tokens() {
    fuzz(&PAGE_TOKENS);
}

#[test]
fn guest_records() {
    fuzz(&GUEST_RECORDS);
}
