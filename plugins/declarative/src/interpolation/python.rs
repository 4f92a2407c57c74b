//! The Python-semantics layer on template values: what jinja2 does because it runs on Python and
//! minijinja does differently. Python's numbers (`int` without overflow, `/` always a float,
//! `//` and `%` flooring), its binary operators on text, lists, datetimes and durations, unary
//! minus binding after attribute access, its ordering (a `TypeError` between unlike types),
//! the built-in `max`/`min`, the type names its errors print, and calling a function with
//! Python's positional and keyword arguments.
//!
//! How values print (`str()`, `repr()`, `json.dumps`) is in [`super::repr`].

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr, ValueKind};
use minijinja::{Error, State, Value as Jv};

use super::dates::{PyDateTime, PyDuration};
use super::repr::py_str;
use super::{type_error, undefined_error, value_error};

// =============================================================================================
// Numbers and types

/// A Python number: `bool` counts as an `int`, as in Python.
#[derive(Clone, Copy, Debug)]
pub(super) enum Num {
    Int(i128),
    Float(f64),
}

pub(super) fn num(v: &Jv) -> Option<Num> {
    match v.kind() {
        ValueKind::Bool => Some(Num::Int(v.is_true() as i128)),
        ValueKind::Number if v.is_integer() => i128::try_from(v.clone()).ok().map(Num::Int),
        ValueKind::Number => f64::try_from(v.clone()).ok().map(Num::Float),
        _ => None,
    }
}

impl Num {
    pub(super) fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

pub(super) fn int_value(i: i128) -> Jv {
    match i64::try_from(i) {
        Ok(v) => Jv::from(v),
        Err(_) => Jv::from(i),
    }
}

pub(super) fn num_value(n: Num) -> Jv {
    match n {
        Num::Int(i) => int_value(i),
        Num::Float(f) => Jv::from(f),
    }
}

/// Python's type names, for error messages.
pub(super) fn py_type_name(v: &Jv) -> &'static str {
    if let Some(d) = v.downcast_object_ref::<PyDateTime>() {
        return if d.is_date { "datetime.date" } else { "datetime.datetime" };
    }
    if let Some(d) = v.downcast_object_ref::<PyDuration>() {
        return if d.is_timedelta { "datetime.timedelta" } else { "Duration" };
    }
    match v.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if v.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

/// A list as Python sees one (a datetime or a duration is not, though minijinja may iterate it).
pub(super) fn is_list(v: &Jv) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
        && v.downcast_object_ref::<PyDateTime>().is_none()
        && v.downcast_object_ref::<PyDuration>().is_none()
}

// =============================================================================================
// Binary operators

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "** or pow()",
        }
    }
}

/// `a <op> b` as Python computes it: numbers, then datetimes and durations, then text and lists;
/// anything else a TypeError, an undefined operand jinja2's error.
pub(super) fn py_binop(op: BinOp, a: &Jv, b: &Jv) -> Result<Jv, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(undefined_error("an operand is undefined"));
    }
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return num_binop(op, x, y);
    }
    if let Some(result) = datetime_binop(op, a, b) {
        return result;
    }
    if let Some(result) = sequence_binop(op, a, b)? {
        return Ok(result);
    }
    Err(unsupported(op, a, b))
}

fn unsupported(op: BinOp, a: &Jv, b: &Jv) -> Error {
    type_error(format!(
        "unsupported operand type(s) for {}: '{}' and '{}'",
        op.symbol(),
        py_type_name(a),
        py_type_name(b)
    ))
}

/// `datetime ± duration`, `duration + datetime`, `datetime - datetime` (of the same kind) and
/// `duration ± duration`; `None` when the operands are none of these.
fn datetime_binop(op: BinOp, a: &Jv, b: &Jv) -> Option<Result<Jv, Error>> {
    let (dt_a, dt_b) = (a.downcast_object_ref::<PyDateTime>(), b.downcast_object_ref::<PyDateTime>());
    let (du_a, du_b) = (a.downcast_object_ref::<PyDuration>(), b.downcast_object_ref::<PyDuration>());
    Some(match (op, dt_a, dt_b, du_a, du_b) {
        (BinOp::Add, Some(d), None, None, Some(du)) | (BinOp::Add, None, Some(d), Some(du), None) => {
            d.add(du, false).map(PyDateTime::into_value)
        }
        (BinOp::Sub, Some(d), None, None, Some(du)) => d.add(du, true).map(PyDateTime::into_value),
        (BinOp::Sub, Some(x), Some(y), None, None) => {
            if x.is_date != y.is_date || x.offset.is_some() != y.offset.is_some() {
                return Some(Err(unsupported(op, a, b)));
            }
            Ok(PyDuration::timedelta(x.micros_since_epoch() - y.micros_since_epoch()).into_value())
        }
        (BinOp::Add | BinOp::Sub, None, None, Some(x), Some(y)) => {
            let sign = if op == BinOp::Sub { -1 } else { 1 };
            Ok(PyDuration {
                years: x.years + sign * y.years,
                months: x.months + sign * y.months,
                micros: x.micros + sign as i128 * y.micros,
                is_timedelta: x.is_timedelta && y.is_timedelta,
            }
            .into_value())
        }
        _ => return None,
    })
}

/// `str + str`, `list + list`, `str * int` and `list * int` (either way round), and `str % args`
/// (printf-style formatting); `None` for other operands.
fn sequence_binop(op: BinOp, a: &Jv, b: &Jv) -> Result<Option<Jv>, Error> {
    match op {
        BinOp::Add => {
            if let (Some(x), Some(y)) = (a.as_str(), b.as_str())
                && a.kind() == ValueKind::String
                && b.kind() == ValueKind::String
            {
                return Ok(Some(Jv::from([x, y].concat())));
            }
            if is_list(a) && is_list(b) {
                let mut items: Vec<Jv> = a.try_iter()?.collect();
                items.extend(b.try_iter()?);
                return Ok(Some(Jv::from(items)));
            }
        }
        BinOp::Mul => {
            if let Some(r) = repeat(a, b).or_else(|| repeat(b, a)) {
                return r.map(Some);
            }
        }
        BinOp::Mod if a.kind() == ValueKind::String => {
            let args: Vec<Jv> = match b.kind() {
                ValueKind::Seq => b.try_iter()?.collect(),
                _ => vec![b.clone()],
            };
            return minijinja::format_filter(minijinja::FormatStyle::Printf, a.as_str().unwrap_or_default(), &args)
                .map(|s| Some(Jv::from(s)))
                .map_err(|e| type_error(e.detail().unwrap_or("not all arguments converted during string formatting")));
        }
        _ => {}
    }
    Ok(None)
}

/// `s * n` of a text or a list `s` and an integer `n`; `None` for other operands.
fn repeat(s: &Jv, n: &Jv) -> Option<Result<Jv, Error>> {
    let Some(Num::Int(n)) = num(n) else { return None };
    let n = n.max(0) as usize;
    if s.kind() == ValueKind::String {
        let s = s.as_str()?;
        if s.len().saturating_mul(n) > 100_000_000 {
            return Some(Err(value_error("repeated string is too long")));
        }
        return Some(Ok(Jv::from(s.repeat(n))));
    }
    if is_list(s) {
        let items: Vec<Jv> = s.try_iter().ok()?.collect();
        if items.len().saturating_mul(n) > 10_000_000 {
            return Some(Err(value_error("repeated list is too long")));
        }
        return Some(Ok(Jv::from(items.iter().cycle().take(items.len() * n).cloned().collect::<Vec<_>>())));
    }
    None
}

fn num_binop(op: BinOp, x: Num, y: Num) -> Result<Jv, Error> {
    match (x, y) {
        (Num::Int(a), Num::Int(b)) => int_binop(op, a, b),
        _ => float_binop(op, x.f(), y.f()),
    }
}

fn zero_division() -> Error {
    value_error("ZeroDivisionError: division by zero")
}

/// Python's `int` arithmetic; past i128 the result is a float (Python's would be a big int).
fn int_binop(op: BinOp, a: i128, b: i128) -> Result<Jv, Error> {
    Ok(match op {
        BinOp::Add => a.checked_add(b).map(int_value).unwrap_or(Jv::from(a as f64 + b as f64)),
        BinOp::Sub => a.checked_sub(b).map(int_value).unwrap_or(Jv::from(a as f64 - b as f64)),
        BinOp::Mul => a.checked_mul(b).map(int_value).unwrap_or(Jv::from(a as f64 * b as f64)),
        BinOp::Div => {
            if b == 0 {
                return Err(zero_division());
            }
            Jv::from(a as f64 / b as f64)
        }
        BinOp::FloorDiv | BinOp::Mod => {
            if b == 0 {
                return Err(zero_division());
            }
            let (mut q, mut r) = (a / b, a % b);
            if r != 0 && ((r < 0) != (b < 0)) {
                q -= 1;
                r += b;
            }
            int_value(if op == BinOp::FloorDiv { q } else { r })
        }
        BinOp::Pow => {
            if b >= 0 {
                match u32::try_from(b).ok().and_then(|e| a.checked_pow(e)) {
                    Some(v) => int_value(v),
                    None => Jv::from((a as f64).powf(b as f64)),
                }
            } else if a == 0 {
                return Err(value_error("ZeroDivisionError: 0.0 cannot be raised to a negative power"));
            } else {
                Jv::from((a as f64).powf(b as f64))
            }
        }
    })
}

/// Python's `float` arithmetic (an `int` operand converted).
fn float_binop(op: BinOp, a: f64, b: f64) -> Result<Jv, Error> {
    Ok(match op {
        BinOp::Add => Jv::from(a + b),
        BinOp::Sub => Jv::from(a - b),
        BinOp::Mul => Jv::from(a * b),
        BinOp::Div => {
            if b == 0.0 {
                return Err(zero_division());
            }
            Jv::from(a / b)
        }
        BinOp::FloorDiv | BinOp::Mod => {
            if b == 0.0 {
                return Err(zero_division());
            }
            let m = a % b;
            let m = if m != 0.0 && ((m < 0.0) != (b < 0.0)) { m + b } else { m };
            if op == BinOp::Mod { Jv::from(m) } else { Jv::from(((a - m) / b).round()) }
        }
        BinOp::Pow => {
            if a == 0.0 && b < 0.0 {
                return Err(value_error("ZeroDivisionError: 0.0 cannot be raised to a negative power"));
            }
            Jv::from(a.powf(b))
        }
    })
}

// =============================================================================================
// Unary minus

pub(super) fn py_neg(a: &Jv) -> Result<Jv, Error> {
    if a.is_undefined() {
        return Err(undefined_error("the operand is undefined"));
    }
    match num(a) {
        Some(Num::Int(i)) => Ok(int_value(-i)),
        Some(Num::Float(f)) => Ok(Jv::from(-f)),
        None => match a.downcast_object_ref::<PyDuration>() {
            Some(d) => Ok(d.neg().into_value()),
            // minijinja binds `-x.y` as `(-x).y`; Python as `-(x.y)`. The negation waits for
            // the attribute, item or method access that follows.
            None => Ok(Jv::from_object(NegPending(a.clone()))),
        },
    }
}

/// A unary minus applied to something not a number, in wait of the lookup after it.
#[derive(Debug)]
pub(super) struct NegPending(Jv);

impl NegPending {
    pub(super) fn error(&self) -> Error {
        type_error(format!("bad operand type for unary -: '{}'", py_type_name(&self.0)))
    }
}

impl Object for NegPending {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        let inner = self.0.get_item(key).ok()?;
        py_neg(&inner).ok()
    }

    fn call_method(self: &Arc<Self>, state: &State, method: &str, args: &[Jv]) -> Result<Jv, Error> {
        py_neg(&self.0.call_method(state, method, args)?)
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&py_str(&self.0))
    }
}

// =============================================================================================
// Ordering, max and min

/// Python's ordering: numbers with numbers, text with text, lists element-wise, datetimes with
/// datetimes of the same kind; anything else a TypeError, an undefined operand jinja2's error.
pub(super) fn py_compare(a: &Jv, b: &Jv, op: &str) -> Result<Ordering, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(undefined_error("an operand is undefined"));
    }
    py_order(a, b).ok_or_else(|| {
        type_error(format!("'{op}' not supported between instances of '{}' and '{}'", py_type_name(a), py_type_name(b)))
    })
}

pub(super) fn py_order(a: &Jv, b: &Jv) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return match (x, y) {
            (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
            _ => x.f().partial_cmp(&y.f()).or(Some(Ordering::Equal)),
        };
    }
    if a.kind() == ValueKind::String && b.kind() == ValueKind::String {
        return Some(a.as_str()?.cmp(b.as_str()?));
    }
    if let (Some(x), Some(y)) = (a.downcast_object_ref::<PyDateTime>(), b.downcast_object_ref::<PyDateTime>()) {
        if x.is_date != y.is_date || x.offset.is_some() != y.offset.is_some() {
            return None;
        }
        return Some(x.micros_since_epoch().cmp(&y.micros_since_epoch()));
    }
    if let (Some(x), Some(y)) = (a.downcast_object_ref::<PyDuration>(), b.downcast_object_ref::<PyDuration>()) {
        return (x.is_timedelta && y.is_timedelta).then(|| x.micros.cmp(&y.micros));
    }
    if is_list(a) && is_list(b) {
        let (xs, ys): (Vec<Jv>, Vec<Jv>) = (a.try_iter().ok()?.collect(), b.try_iter().ok()?.collect());
        for (x, y) in xs.iter().zip(&ys) {
            if x != y {
                return py_order(x, y);
            }
        }
        return Some(xs.len().cmp(&ys.len()));
    }
    None
}

/// Python's built-in `max`/`min`: one iterable argument or several arguments; the first of
/// equal extremes wins.
pub(super) fn py_max_min(name: &str, args: &[Jv], want: Ordering) -> Result<Jv, Error> {
    let (positional, default) = match args.last() {
        Some(last) if last.is_kwargs() => {
            let default = last.get_item(&Jv::from("default")).ok().filter(|v| !v.is_undefined());
            (&args[..args.len() - 1], default)
        }
        _ => (args, None),
    };
    let items: Vec<Jv> = match positional {
        [] => return Err(type_error(format!("{name} expected at least 1 argument, got 0"))),
        [one] => {
            if one.is_undefined() {
                return Err(undefined_error("the argument is undefined"));
            }
            match one.kind() {
                ValueKind::String => {
                    one.as_str().unwrap_or_default().chars().map(|c| Jv::from(c.to_string())).collect()
                }
                ValueKind::Seq | ValueKind::Iterable | ValueKind::Map => one.try_iter()?.collect(),
                _ => return Err(type_error(format!("'{}' object is not iterable", py_type_name(one)))),
            }
        }
        many => many.to_vec(),
    };
    let mut best: Option<Jv> = None;
    for item in items {
        best = Some(match best {
            None => item,
            Some(b) => {
                if py_compare(&item, &b, if want == Ordering::Greater { ">" } else { "<" })? == want {
                    item
                } else {
                    b
                }
            }
        });
    }
    match (best, default) {
        (Some(b), _) => Ok(b),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(value_error(format!("{name}() arg is an empty sequence"))),
    }
}

// =============================================================================================
// Calling a function

/// Binds Python-style arguments: positionals, then keywords by name; a missing, extra or unknown
/// argument is a TypeError, as calling a Python function wrongly is.
pub(super) fn bind(name: &str, args: &[Jv], params: &[&str], required: usize) -> Result<Vec<Jv>, Error> {
    let (positional, kwargs) = match args.last() {
        Some(last) if last.is_kwargs() => (&args[..args.len() - 1], Some(last)),
        _ => (args, None),
    };
    if positional.len() > params.len() {
        return Err(type_error(format!(
            "{name}() takes {} positional arguments but {} were given",
            params.len(),
            positional.len()
        )));
    }
    let mut out: Vec<Option<Jv>> = positional.iter().cloned().map(Some).collect();
    out.resize(params.len(), None);
    if let Some(kwargs) = kwargs {
        for key in kwargs.try_iter().map_err(|e| type_error(e.to_string()))? {
            let key_str = key.as_str().unwrap_or_default().to_string();
            let Some(i) = params.iter().position(|p| *p == key_str) else {
                return Err(type_error(format!("{name}() got an unexpected keyword argument '{key_str}'")));
            };
            if out[i].is_some() {
                return Err(type_error(format!("{name}() got multiple values for argument '{key_str}'")));
            }
            out[i] = Some(kwargs.get_item(&key).unwrap_or_default());
        }
    }
    if let Some(i) = out.iter().take(required).position(Option::is_none) {
        return Err(type_error(format!("{name}() missing required argument: '{}'", params[i])));
    }
    Ok(out.into_iter().map(|v| v.unwrap_or(Jv::UNDEFINED)).collect())
}

/// A string argument; an undefined value is jinja2's UndefinedError.
pub(super) fn str_arg(v: &Jv) -> Result<String, Error> {
    if v.is_undefined() {
        return Err(undefined_error("a required value is undefined"));
    }
    Ok(match v.as_str() {
        Some(s) => s.to_string(),
        None => py_str(v),
    })
}

/// An optional argument not given, or given as None.
pub(super) fn is_absent(v: &Jv) -> bool {
    v.is_undefined() || v.is_none()
}
