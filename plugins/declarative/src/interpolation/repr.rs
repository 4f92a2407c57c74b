//! How Python prints template values, as jinja2 prints them: `str()` (what `{{ x }}` renders),
//! `repr()` (a value inside a printed list or dict: `['a', None, True]`), and `json.dumps` as
//! jinja2's `tojson` and the CDK's `string` filter call it. Datetimes and durations print as
//! Python's `datetime` module does ([`super::dates`]).

use std::fmt::Write as _;

use minijinja::value::ValueKind;
use minijinja::{Error, Value as Jv};

use super::dates::{PyDateTime, PyDuration};
use super::python::{Num, is_list, num, py_type_name};
use super::type_error;
use crate::datetime;

/// Python's `str()` of a value (jinja2 prints values with it).
pub(super) fn py_str(v: &Jv) -> String {
    match v.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => v.as_str().unwrap_or_default().to_string(),
        _ => {
            if let Some(d) = v.downcast_object_ref::<PyDateTime>() {
                return d.py_str();
            }
            if let Some(d) = v.downcast_object_ref::<PyDuration>() {
                return d.py_str();
            }
            let mut s = String::new();
            py_repr(v, &mut s);
            s
        }
    }
}

/// Python's `repr()` of a value, as it appears inside a printed list or dict.
pub(super) fn py_repr(v: &Jv, out: &mut String) {
    match v.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => match num(v) {
            Some(Num::Int(i)) => out.push_str(&i.to_string()),
            Some(Num::Float(f)) => out.push_str(&datetime::py_float_repr(f)),
            None => out.push_str(&v.to_string()),
        },
        ValueKind::String => py_repr_str(v.as_str().unwrap_or_default(), out),
        ValueKind::Bytes => {
            out.push('b');
            py_repr_bytes(v.as_bytes().unwrap_or_default(), out);
        }
        _ => {
            if let Some(d) = v.downcast_object_ref::<PyDateTime>() {
                out.push_str(&d.py_repr());
                return;
            }
            if let Some(d) = v.downcast_object_ref::<PyDuration>() {
                out.push_str(&d.py_repr());
                return;
            }
            match v.kind() {
                ValueKind::Seq | ValueKind::Iterable => {
                    out.push('[');
                    if let Ok(iter) = v.try_iter() {
                        for (i, item) in iter.enumerate() {
                            if i > 0 {
                                out.push_str(", ");
                            }
                            py_repr(&item, out);
                        }
                    }
                    out.push(']');
                }
                ValueKind::Map => {
                    out.push('{');
                    for (i, (k, val)) in map_pairs(v).into_iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        py_repr(&k, out);
                        out.push_str(": ");
                        py_repr(&val, out);
                    }
                    out.push('}');
                }
                _ => out.push_str(&v.to_string()),
            }
        }
    }
}

pub(super) fn map_pairs(v: &Jv) -> Vec<(Jv, Jv)> {
    match v.as_object().and_then(|o| o.try_iter_pairs()) {
        Some(pairs) => pairs.collect(),
        None => Vec::new(),
    }
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and no double quote.
pub(super) fn py_repr_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !is_printable(c) => {
                let n = c as u32;
                if n < 0x100 {
                    let _ = write!(out, "\\x{n:02x}");
                } else if n < 0x10000 {
                    let _ = write!(out, "\\u{n:04x}");
                } else {
                    let _ = write!(out, "\\U{n:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

pub(super) fn py_repr_bytes(b: &[u8], out: &mut String) {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') { '"' } else { '\'' };
    out.push(quote);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c as char == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(quote);
}

/// An approximation of Python's `str.isprintable` without the Unicode tables: control and
/// format characters, separators other than the space, and private-use characters are not.
fn is_printable(c: char) -> bool {
    let n = c as u32;
    !(n < 0x20
        || (0x7f..=0xa0).contains(&n)
        || n == 0xad
        || n == 0x1680
        || (0x2000..=0x200f).contains(&n)
        || (0x2028..=0x202f).contains(&n)
        || (0x205f..=0x206f).contains(&n)
        || n == 0x3000
        || (0xe000..=0xf8ff).contains(&n)
        || n == 0xfeff
        || (0xfff9..=0xfffb).contains(&n)
        || n >= 0xf0000)
}

/// Python's `json.dumps` (ensure_ascii, `", "` and `": "` separators); `sort_keys` and `indent`
/// as jinja2's `tojson` passes them. Anything not JSON is a TypeError, as in Python.
pub(super) fn py_json(
    v: &Jv,
    sort_keys: bool,
    indent: Option<usize>,
    level: usize,
    out: &mut String,
) -> Result<(), Error> {
    match v.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => match num(v) {
            Some(Num::Int(i)) => out.push_str(&i.to_string()),
            Some(Num::Float(f)) if f.is_nan() => out.push_str("NaN"),
            Some(Num::Float(f)) if f.is_infinite() => out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" }),
            Some(Num::Float(f)) => out.push_str(&datetime::py_float_repr(f)),
            None => out.push_str(&v.to_string()),
        },
        ValueKind::String => json_str(v.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable if is_list(v) => {
            let items: Vec<Jv> = v.try_iter()?.collect();
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                json_item_start(i, indent, level, out);
                py_json(item, sort_keys, indent, level + 1, out)?;
            }
            if !items.is_empty() {
                json_newline(indent, level, out);
            }
            out.push(']');
        }
        ValueKind::Map => {
            let mut pairs: Vec<(String, Jv)> = Vec::new();
            for (k, val) in map_pairs(v) {
                pairs.push((json_key(&k)?, val));
            }
            if sort_keys {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, val)) in pairs.iter().enumerate() {
                json_item_start(i, indent, level, out);
                json_str(k, out);
                out.push_str(": ");
                py_json(val, sort_keys, indent, level + 1, out)?;
            }
            if !pairs.is_empty() {
                json_newline(indent, level, out);
            }
            out.push('}');
        }
        _ => return Err(type_error(format!("Object of type {} is not JSON serializable", py_type_name(v)))),
    }
    Ok(())
}

/// Before the `i`th item of a list or dict: the separator, then with `indent` a new line.
fn json_item_start(i: usize, indent: Option<usize>, level: usize, out: &mut String) {
    if i > 0 {
        out.push_str(if indent.is_some() { "," } else { ", " });
    }
    json_newline(indent, level + 1, out);
}

fn json_newline(indent: Option<usize>, level: usize, out: &mut String) {
    if let Some(n) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', n * level));
    }
}

/// A dict key as `json.dumps` writes it: text as it is, numbers, bools and None as JSON.
fn json_key(k: &Jv) -> Result<String, Error> {
    Ok(match k.kind() {
        ValueKind::String => k.as_str().unwrap_or_default().to_string(),
        ValueKind::Number | ValueKind::Bool | ValueKind::None => {
            let mut s = String::new();
            py_json(k, false, None, 0, &mut s)?;
            s
        }
        _ => {
            return Err(type_error(format!("keys must be str, int, float, bool or None, not {}", py_type_name(k))));
        }
    })
}

fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e && (c as u32) != 0x7f => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
