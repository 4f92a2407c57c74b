//! Python's methods on template values, where neither minijinja nor minijinja-contrib's
//! `pycompat` (which supplies `upper`, `split`, `get`, `items` and the like) has them or has
//! them as Python does: `str.join` wanting text items, `rsplit`, `zfill`, `removeprefix`,
//! `swapcase`, `casefold`, `ljust`/`rjust`/`center`, `index`/`rindex`, `partition`, and
//! `list.index`. Everything else goes on to `pycompat`.

use minijinja::value::ValueKind;
use minijinja::{Error, State, Value as Jv};

use super::python::{Num, bind, is_absent, is_list, num, py_type_name, str_arg};
use super::repr::py_str;
use super::{type_error, undefined_error, value_error};

/// minijinja's unknown-method callback: `value.method(*args)` as Python runs it.
pub(super) fn unknown_method(state: &State, value: &Jv, method: &str, args: &[Jv]) -> Result<Jv, Error> {
    if value.is_undefined() {
        return Err(undefined_error(format!("'{method}' called on an undefined value")));
    }
    if value.kind() == ValueKind::String
        && let Some(result) = str_method(value, method, args)
    {
        return result;
    }
    if is_list(value) && method == "index" {
        return list_index(value, args);
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// A method of `str`; `None` when it is left to `pycompat`.
fn str_method(value: &Jv, method: &str, args: &[Jv]) -> Option<Result<Jv, Error>> {
    let s = value.as_str().unwrap_or_default();
    Some(match method {
        "join" => str_join(s, args),
        "rsplit" => str_rsplit(s, args),
        "zfill" => str_zfill(value, s, args),
        "removeprefix" | "removesuffix" => str_remove_affix(s, method, args),
        "swapcase" => bind(method, args, &[], 0).map(|_| Jv::from(swapcase(s))),
        "casefold" => bind(method, args, &[], 0).map(|_| Jv::from(s.to_lowercase())),
        "ljust" | "rjust" | "center" => str_justify(s, method, args),
        "index" | "rindex" => str_index(s, method, args),
        "partition" | "rpartition" => str_partition(s, method, args),
        _ => return None,
    })
}

/// `str.join`: Python's wants text items (minijinja-contrib's would print `true`).
fn str_join(s: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind("join", args, &["iterable"], 1)?;
    let mut parts = Vec::new();
    for item in a[0].try_iter().map_err(|_| type_error("can only join an iterable"))? {
        if item.kind() != ValueKind::String {
            return Err(type_error(format!(
                "sequence item {}: expected str instance, {} found",
                parts.len(),
                py_type_name(&item)
            )));
        }
        parts.push(item.as_str().unwrap_or_default().to_string());
    }
    Ok(Jv::from(parts.join(s)))
}

fn str_rsplit(s: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind("rsplit", args, &["sep", "maxsplit"], 0)?;
    let maxsplit = match num(&a[1]) {
        Some(Num::Int(n)) if n >= 0 => n as usize,
        _ => usize::MAX,
    };
    let mut parts: Vec<&str> = Vec::new();
    if is_absent(&a[0]) {
        // Runs of whitespace from the right; the remainder keeps its leading whitespace.
        let mut rest = s.trim_end();
        while parts.len() < maxsplit {
            let Some((i, c)) = rest.char_indices().rev().find(|(_, c)| c.is_whitespace()) else { break };
            parts.push(&rest[i + c.len_utf8()..]);
            rest = rest[..i].trim_end();
        }
        if !rest.is_empty() {
            parts.push(rest);
        }
    } else {
        let sep = str_arg(&a[0])?;
        if sep.is_empty() {
            return Err(value_error("empty separator"));
        }
        parts.extend(s.rsplitn(maxsplit.saturating_add(1), sep.as_str()));
    }
    parts.reverse();
    Ok(Jv::from(parts.into_iter().map(Jv::from).collect::<Vec<_>>()))
}

fn str_zfill(value: &Jv, s: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind("zfill", args, &["width"], 1)?;
    let Some(Num::Int(w)) = num(&a[0]) else { return Err(type_error("an integer is required")) };
    let len = s.chars().count();
    if w as usize <= len || w < 0 {
        return Ok(value.clone());
    }
    let (sign, digits) = match s.chars().next() {
        Some(c @ ('+' | '-')) => (c.to_string(), &s[1..]),
        _ => (String::new(), s),
    };
    Ok(Jv::from(format!("{sign}{}{digits}", "0".repeat(w as usize - len))))
}

fn str_remove_affix(s: &str, method: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind(method, args, &["affix"], 1)?;
    let affix = str_arg(&a[0])?;
    let out = if method == "removeprefix" { s.strip_prefix(affix.as_str()) } else { s.strip_suffix(affix.as_str()) };
    Ok(Jv::from(out.unwrap_or(s)))
}

fn swapcase(s: &str) -> String {
    s.chars()
        .flat_map(|c| if c.is_uppercase() { c.to_lowercase().collect::<Vec<_>>() } else { c.to_uppercase().collect() })
        .collect()
}

/// `str.ljust`, `str.rjust` and `str.center`, with an optional fill character.
fn str_justify(s: &str, method: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind(method, args, &["width", "fillchar"], 1)?;
    let fill = if is_absent(&a[1]) { ' ' } else { str_arg(&a[1])?.chars().next().unwrap_or(' ') };
    if method == "center" {
        return py_center(s, &a[0], fill);
    }
    let Some(Num::Int(w)) = num(&a[0]) else { return Err(type_error("an integer is required")) };
    let pad = (w - s.chars().count() as i128).max(0) as usize;
    let fill = std::iter::repeat_n(fill, pad).collect::<String>();
    Ok(Jv::from(if method == "ljust" { format!("{s}{fill}") } else { format!("{fill}{s}") }))
}

/// Python's `str.center`: the odd extra space goes left when the width is odd.
pub(super) fn py_center(s: &str, width: &Jv, fill: char) -> Result<Jv, Error> {
    let Some(Num::Int(w)) = num(width) else { return Err(type_error("an integer is required")) };
    let len = s.chars().count() as i128;
    if w <= len {
        return Ok(Jv::from(s));
    }
    let pad = (w - len) as usize;
    let left = pad / 2 + (pad & w as usize & 1);
    let f = |n| std::iter::repeat_n(fill, n).collect::<String>();
    Ok(Jv::from(format!("{}{s}{}", f(left), f(pad - left))))
}

/// `str.index` and `str.rindex`: a position in characters; not found is a ValueError.
fn str_index(s: &str, method: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind(method, args, &["sub"], 1)?;
    let sub = str_arg(&a[0])?;
    let found = if method == "index" { s.find(sub.as_str()) } else { s.rfind(sub.as_str()) };
    match found {
        Some(i) => Ok(Jv::from(s[..i].chars().count())),
        None => Err(value_error("substring not found")),
    }
}

fn str_partition(s: &str, method: &str, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind(method, args, &["sep"], 1)?;
    let sep = str_arg(&a[0])?;
    let found = if method == "partition" { s.find(sep.as_str()) } else { s.rfind(sep.as_str()) };
    let parts = match found {
        Some(i) => [&s[..i], sep.as_str(), &s[i + sep.len()..]],
        None if method == "partition" => [s, "", ""],
        None => ["", "", s],
    };
    Ok(Jv::from(parts.iter().map(|p| Jv::from(*p)).collect::<Vec<_>>()))
}

/// `list.index`: not found is a ValueError.
fn list_index(value: &Jv, args: &[Jv]) -> Result<Jv, Error> {
    let a = bind("index", args, &["value"], 1)?;
    match value.try_iter()?.position(|x| x == a[0]) {
        Some(i) => Ok(Jv::from(i)),
        None => Err(value_error(format!("{} is not in list", py_str(&a[0])))),
    }
}
