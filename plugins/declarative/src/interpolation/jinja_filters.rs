//! jinja2's built-in filters where minijinja's differ from them: `int`, `float`, `round`,
//! `join`, `tojson`, `urlencode`, `length`/`count`, `format`, `unique`, `center`, `wordcount`,
//! `truncate` and `striptags`, as jinja2 (on Python, with markupsafe) computes them.

use std::cmp::Ordering;
use std::fmt::Write as _;

use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value as Jv};

use super::methods::py_center;
use super::python::{Num, bind, int_value, is_list, num, num_value, py_order, py_type_name, str_arg};
use super::repr::{map_pairs, py_json, py_str};
use super::{type_error, undefined_error, value_error};
use crate::datetime;

pub(super) fn int(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("int", &args, &["default", "base"], 0)?;
    let default = if a[0].is_undefined() { Jv::from(0) } else { a[0].clone() };
    if value.is_undefined() {
        return Err(undefined_error("int() of an undefined value"));
    }
    let base = match num(&a[1]) {
        Some(Num::Int(b)) => b as u32,
        _ => 10,
    };
    if let Some(s) = value.as_str().filter(|_| value.kind() == ValueKind::String) {
        if let Some(i) = py_int_base(s, base) {
            return Ok(int_value(i));
        }
        return Ok(match datetime::py_float(s) {
            Some(f) if f.is_finite() => int_value(f.trunc() as i128),
            Some(_) => return Err(value_error("OverflowError: cannot convert float infinity to integer")),
            None => default,
        });
    }
    Ok(match num(&value) {
        Some(Num::Int(i)) => int_value(i),
        Some(Num::Float(f)) if f.is_finite() => int_value(f.trunc() as i128),
        Some(Num::Float(_)) => return Err(value_error("OverflowError: cannot convert float infinity to integer")),
        None => default,
    })
}

/// Python's `int(text, base)`, prefixes (`0x`, `0o`, `0b`) allowed when they match the base.
fn py_int_base(s: &str, base: u32) -> Option<i128> {
    if base == 10 {
        return datetime::py_int(s);
    }
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = t.to_ascii_lowercase();
    let digits = match base {
        16 => lower.strip_prefix("0x").unwrap_or(&lower),
        8 => lower.strip_prefix("0o").unwrap_or(&lower),
        2 => lower.strip_prefix("0b").unwrap_or(&lower),
        _ => &lower,
    };
    let digits = digits.strip_prefix('_').unwrap_or(digits);
    if digits.is_empty() || digits.ends_with('_') || digits.contains("__") || !(2..=36).contains(&base) {
        return None;
    }
    let v = i128::from_str_radix(&digits.replace('_', ""), base).ok()?;
    Some(if neg { -v } else { v })
}

pub(super) fn float(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("float", &args, &["default"], 0)?;
    if value.is_undefined() {
        return Err(undefined_error("float() of an undefined value"));
    }
    let f = match (num(&value), value.kind()) {
        (Some(n), _) => Some(n.f()),
        (None, ValueKind::String) => datetime::py_float(value.as_str().unwrap_or_default()),
        _ => None,
    };
    Ok(match f {
        Some(f) => Jv::from(f),
        None if a[0].is_undefined() => Jv::from(0.0),
        None => a[0].clone(),
    })
}

fn iterate(value: &Jv, what: &str) -> Result<Vec<Jv>, Error> {
    match value.kind() {
        ValueKind::Undefined => Ok(Vec::new()),
        ValueKind::String => Ok(value.as_str().unwrap_or_default().chars().map(|c| Jv::from(c.to_string())).collect()),
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map if is_list(value) || value.kind() == ValueKind::Map => {
            Ok(value.try_iter()?.collect())
        }
        _ => Err(type_error(format!("{what}: '{}' object is not iterable", py_type_name(value)))),
    }
}

pub(super) fn join(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("join", &args, &["d", "attribute"], 0)?;
    let sep = if a[0].is_undefined() { String::new() } else { py_str(&a[0]) };
    let mut parts = Vec::new();
    for item in iterate(&value, "join")? {
        let item = if a[1].is_undefined() { item } else { item.get_attr(&py_str(&a[1])).unwrap_or_default() };
        parts.push(py_str(&item));
    }
    Ok(Jv::from(parts.join(&sep)))
}

pub(super) fn tojson(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("tojson", &args, &["indent"], 0)?;
    let indent = match num(&a[0]) {
        Some(Num::Int(n)) if n >= 0 => Some(n as usize),
        _ => None,
    };
    if value.is_undefined() {
        return Err(type_error("Object of type Undefined is not JSON serializable"));
    }
    let mut s = String::new();
    py_json(&value, true, indent, 0, &mut s)?;
    let s = s.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026").replace('\'', "\\u0027");
    Ok(Jv::from_safe_string(s))
}

pub(super) fn round(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("round", &args, &["precision", "method"], 0)?;
    let precision = match num(&a[0]) {
        Some(Num::Int(p)) => p as i32,
        _ => 0,
    };
    let method = if a[1].is_undefined() { "common".to_string() } else { str_arg(&a[1])? };
    let Some(n) = num(&value) else {
        return Err(type_error(format!("type {} doesn't define __round__ method", py_type_name(&value))));
    };
    match method.as_str() {
        // Python's round(int, n) stays an int.
        "common" => Ok(match n {
            Num::Int(i) if precision >= 0 => int_value(i),
            _ => Jv::from(round_half_even(n.f(), precision)),
        }),
        "ceil" | "floor" => {
            let scale = 10f64.powi(precision);
            let v = n.f() * scale;
            Ok(Jv::from(if method == "ceil" { v.ceil() } else { v.floor() } / scale))
        }
        _ => Err(Error::new(ErrorKind::InvalidOperation, "ValueError: method must be common, ceil or floor")),
    }
}

/// Python's `round(float, n)`: the nearest decimal of the exact binary value, ties to even.
fn round_half_even(f: f64, precision: i32) -> f64 {
    if !f.is_finite() {
        return f;
    }
    if precision >= 0 {
        format!("{:.*}", precision as usize, f).parse().unwrap_or(f)
    } else {
        let scale = 10f64.powi(-precision);
        (f / scale).round_ties_even() * scale
    }
}

pub(super) fn urlencode(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("urlencode", &args, &[], 0)?;
    let pairs: Vec<(Jv, Jv)> = match value.kind() {
        ValueKind::Map => map_pairs(&value),
        ValueKind::Seq | ValueKind::Iterable if is_list(&value) => value
            .try_iter()?
            .map(|item| {
                let kv: Vec<Jv> = item.try_iter().map(|i| i.collect()).unwrap_or_default();
                (kv.first().cloned().unwrap_or_default(), kv.get(1).cloned().unwrap_or_default())
            })
            .collect(),
        _ => return Ok(Jv::from(quote(&py_str(&value), "/", false))),
    };
    let encoded: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{}={}", quote(&py_str(k), "", true), quote(&py_str(v), "", true))).collect();
    Ok(Jv::from(encoded.join("&")))
}

/// `urllib.parse.quote` (and `quote_plus` with `plus`): letters, digits and `_.-~` kept, plus
/// the `safe` characters.
pub(super) fn quote(s: &str, safe: &str, plus: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let c = b as char;
        if c.is_ascii_alphanumeric() || "_.-~".contains(c) || safe.contains(c) {
            out.push(c);
        } else if plus && c == ' ' {
            out.push('+');
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

pub(super) fn length(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("length", &args, &[], 0)?;
    if value.is_undefined() {
        return Ok(Jv::from(0));
    }
    if value.kind() == ValueKind::String {
        return Ok(Jv::from(value.as_str().unwrap_or_default().chars().count()));
    }
    if is_list(&value) || value.kind() == ValueKind::Map {
        if let Some(n) = value.len() {
            return Ok(Jv::from(n));
        }
        return Ok(Jv::from(value.try_iter()?.count()));
    }
    Err(type_error(format!("object of type '{}' has no len()", py_type_name(&value))))
}

/// jinja2's `unique`: Python set semantics (`1 == True`), text compared without case unless asked.
pub(super) fn unique(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("unique", &args, &["case_sensitive", "attribute"], 0)?;
    let case_sensitive = a[0].is_true();
    let mut seen: Vec<Jv> = Vec::new();
    let mut out = Vec::new();
    for item in iterate(&value, "unique")? {
        let mut key =
            if a[1].is_undefined() { item.clone() } else { item.get_attr(&py_str(&a[1])).unwrap_or_default() };
        if !case_sensitive && key.kind() == ValueKind::String {
            key = Jv::from(key.as_str().unwrap_or_default().to_lowercase());
        }
        if matches!(key.kind(), ValueKind::Seq | ValueKind::Map) {
            return Err(type_error(format!("unhashable type: '{}'", py_type_name(&key))));
        }
        let same = |k: &Jv| match (num(k), num(&key)) {
            (Some(x), Some(y)) => py_order(&num_value(x), &num_value(y)) == Some(Ordering::Equal),
            _ => *k == key && k.kind() == key.kind(),
        };
        if !seen.iter().any(same) {
            seen.push(key);
            out.push(item);
        }
    }
    Ok(Jv::from(out))
}

pub(super) fn format(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let fmt = str_arg(&value)?;
    let args: Vec<Jv> = args.iter().filter(|a| !a.is_kwargs()).cloned().collect();
    minijinja::format_filter(minijinja::FormatStyle::Printf, &fmt, &args)
        .map(Jv::from)
        .map_err(|e| type_error(e.detail().unwrap_or("not all arguments converted during string formatting")))
}

pub(super) fn center(v: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("center", &args, &["width"], 0)?;
    let width = if a[0].is_undefined() { Jv::from(80) } else { a[0].clone() };
    py_center(&py_str(&v), &width, ' ')
}

pub(super) fn wordcount(v: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("wordcount", &args, &[], 0)?;
    let s = py_str(&v);
    Ok(Jv::from(s.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).count()))
}

pub(super) fn striptags(v: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("striptags", &args, &[], 0)?;
    Ok(Jv::from(strip_tags(&py_str(&v))))
}

/// jinja2's `truncate` (leeway 5, its default policy).
pub(super) fn truncate(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("truncate", &args, &["length", "killwords", "end", "leeway"], 0)?;
    if value.is_undefined() {
        return Ok(value);
    }
    if value.kind() != ValueKind::String {
        return Err(type_error(format!("object of type '{}' has no len()", py_type_name(&value))));
    }
    let int = |v: &Jv, d: i128| match num(v) {
        Some(Num::Int(i)) => i,
        _ => d,
    };
    let length = int(&a[0], 255).max(0) as usize;
    let end = if a[2].is_undefined() { "...".to_string() } else { py_str(&a[2]) };
    let leeway = int(&a[3], 5).max(0) as usize;
    let chars: Vec<char> = value.as_str().unwrap_or_default().chars().collect();
    if length < end.chars().count() {
        return Err(value_error(format!("expected length >= {}, got {length}", end.chars().count())));
    }
    if chars.len() <= length + leeway {
        return Ok(value);
    }
    let head: String = chars[..length - end.chars().count()].iter().collect();
    if a[1].is_true() {
        return Ok(Jv::from(head + &end));
    }
    let head = match head.rfind(' ') {
        Some(i) => head[..i].to_string(),
        None => head,
    };
    Ok(Jv::from(head + &end))
}

/// markupsafe's `striptags`: comments and tags removed, entities read, whitespace collapsed.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |i| &after[i + 3..]);
        } else if rest.starts_with('<') && rest[1..].contains('>') {
            rest = &rest[rest.find('>').unwrap() + 1..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    let out = out
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}
