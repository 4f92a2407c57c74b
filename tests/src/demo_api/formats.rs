//! How a report download is encoded: JSON lines or CSV, plain or gzip-compressed, written as it
//! is sent.

use std::io::Write;

use axum::body::{Body, Bytes};
use flate2::write::GzEncoder;

use super::data::{self, Item};

/// The header line of CSV reports: [`Item`]'s fields, in the order of each row.
pub const CSV_HEADER: &str = "id,name,account_id,amount,updated_at";

/// Rows per chunk: a report of any size costs this server (running inside a benchmark's process)
/// one chunk of memory.
const ROWS_PER_CHUNK: usize = 1000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportFormat {
    /// One JSON object per line (`\n`-terminated), as `/items` serves them.
    #[default]
    Jsonl,
    /// RFC 4180: a [`CSV_HEADER`] line, then one row per item, every line `\r\n`-terminated.
    Csv,
}

impl ReportFormat {
    pub fn parse(s: &str) -> Option<ReportFormat> {
        match s {
            "jsonl" => Some(ReportFormat::Jsonl),
            "csv" => Some(ReportFormat::Csv),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    #[default]
    None,
    /// The whole body is one gzip member (`Content-Type: application/gzip`, no
    /// `Content-Encoding`, so clients see the compressed bytes as a file would hold them).
    Gzip,
}

impl Compression {
    pub fn parse(s: &str) -> Option<Compression> {
        match s {
            "none" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            _ => None,
        }
    }
}

/// What a report's download looks like.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportOutput {
    pub format: ReportFormat,
    pub compression: Compression,
}

impl ReportOutput {
    pub fn content_type(self) -> &'static str {
        match (self.compression, self.format) {
            (Compression::Gzip, _) => "application/gzip",
            (Compression::None, ReportFormat::Jsonl) => "application/x-ndjson",
            (Compression::None, ReportFormat::Csv) => "text/csv",
        }
    }

    /// The items `ids` (of a data set with `accounts` accounts), encoded as they are sent,
    /// [`ROWS_PER_CHUNK`] rows at a time.
    pub fn body(self, mut ids: impl Iterator<Item = u64> + Send + 'static, accounts: u64) -> Body {
        let format = self.format;
        let mut header = (format == ReportFormat::Csv).then(|| format!("{CSV_HEADER}\r\n").into_bytes());
        let mut gzip =
            (self.compression == Compression::Gzip).then(|| GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let mut done = false;
        let chunks = futures_util::stream::poll_fn(move |_| {
            // Loops only while the compressor buffers whole chunks of rows: an empty chunk would
            // end a chunked body early.
            while !done {
                let mut chunk = header.take().unwrap_or_default();
                let mut rows = 0;
                for id in ids.by_ref().take(ROWS_PER_CHUNK) {
                    write_row(format, &mut chunk, &data::item(id, accounts));
                    rows += 1;
                }
                done = rows < ROWS_PER_CHUNK;
                let out = match &mut gzip {
                    None => chunk,
                    Some(encoder) => {
                        encoder.write_all(&chunk).expect("writing to memory");
                        if done {
                            gzip.take().expect("set").finish().expect("writing to memory")
                        } else {
                            std::mem::take(encoder.get_mut())
                        }
                    }
                };
                if !out.is_empty() {
                    return std::task::Poll::Ready(Some(Ok::<_, std::io::Error>(Bytes::from(out))));
                }
            }
            std::task::Poll::Ready(None)
        });
        Body::from_stream(chunks)
    }
}

fn write_row(format: ReportFormat, out: &mut Vec<u8>, item: &Item) {
    match format {
        ReportFormat::Jsonl => {
            serde_json::to_writer(&mut *out, item).expect("items serialize");
            out.push(b'\n');
        }
        ReportFormat::Csv => {
            let Item { id, name, account_id, amount, updated_at, .. } = item;
            let fields = [&id.to_string(), name, &account_id.to_string(), &amount.to_string(), updated_at];
            for (i, field) in fields.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_csv_field(out, field);
            }
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// A field as RFC 4180 wants it: quoted (with quotes doubled) only when it holds a comma, a
/// quote or a line break.
fn write_csv_field(out: &mut Vec<u8>, field: &str) {
    if field.contains([',', '"', '\r', '\n']) {
        out.push(b'"');
        out.extend_from_slice(field.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(field.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        let field = |s: &str| {
            let mut out = Vec::new();
            write_csv_field(&mut out, s);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(field("item-1"), "item-1");
        assert_eq!(field(""), "");
        assert_eq!(field("a,b"), r#""a,b""#);
        assert_eq!(field(r#"say "hi""#), r#""say ""hi""""#);
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("cr\r"), "\"cr\r\"");
    }

    #[test]
    fn csv_header_names_the_item_fields_in_row_order() {
        let item = data::item(12, 5);
        let json = serde_json::to_value(&item).unwrap();
        let mut row = Vec::new();
        write_row(ReportFormat::Csv, &mut row, &item);
        let row = String::from_utf8(row).unwrap();
        let values: Vec<&str> = row.strip_suffix("\r\n").unwrap().split(',').collect();
        let names: Vec<&str> = CSV_HEADER.split(',').collect();
        assert_eq!(names.len(), json.as_object().unwrap().len());
        for (name, value) in names.into_iter().zip(values) {
            let expected = match &json[name] {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            assert_eq!(value, expected, "{name}");
        }
    }
}
