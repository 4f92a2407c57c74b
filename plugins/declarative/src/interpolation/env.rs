//! The minijinja environment the templates run in, set up as the CDK's `JinjaInterpolation`
//! sets up jinja2's: values printed as Python's `str()`, Python's methods on values, the
//! operators given Python's semantics, the CDK's macros and filters, and jinja2's filters where
//! minijinja's differ. The CDK's restricted environment has no `range`.

use std::cmp::Ordering;

use minijinja::value::{Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State, Value as Jv};

use super::python::{BinOp, NegPending, py_binop, py_compare, py_neg, py_type_name};
use super::repr::py_str;
use super::{filters, jinja_filters, macros, methods, type_error, undefined_error};

pub(super) fn make_env() -> Environment<'static> {
    let mut env = Environment::new();
    print_like_python(&mut env);
    add_operators(&mut env);
    add_macros(&mut env);
    add_cdk_filters(&mut env);
    add_jinja_filters(&mut env);
    add_iterating_filters(&mut env);
    env
}

/// Output as jinja2's (no escaping, values printed with Python's `str()`), Python's methods on
/// values, and jinja2's globals less the CDK's restricted `range` (minijinja's `debug` is not
/// jinja2's).
fn print_like_python(env: &mut Environment<'static>) {
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_formatter(|out, _state, value| {
        if let Some(n) = value.downcast_object_ref::<NegPending>() {
            return Err(n.error());
        }
        let r = match value.as_str() {
            Some(s) if value.kind() == ValueKind::String => out.write_str(s),
            _ => out.write_str(&py_str(value)),
        };
        r.map_err(|_| Error::from(ErrorKind::WriteFailure))
    });
    env.set_unknown_method_callback(methods::unknown_method);
    env.remove_global("range");
    env.remove_global("debug");
}

/// Python operators (see [`super::compile`]).
fn add_operators(env: &mut Environment<'static>) {
    env.add_function("__py_add", |a: Jv, b: Jv| py_binop(BinOp::Add, &a, &b));
    env.add_function("__py_sub", |a: Jv, b: Jv| py_binop(BinOp::Sub, &a, &b));
    env.add_function("__py_mul", |a: Jv, b: Jv| py_binop(BinOp::Mul, &a, &b));
    env.add_function("__py_truediv", |a: Jv, b: Jv| py_binop(BinOp::Div, &a, &b));
    env.add_function("__py_floordiv", |a: Jv, b: Jv| py_binop(BinOp::FloorDiv, &a, &b));
    env.add_function("__py_mod", |a: Jv, b: Jv| py_binop(BinOp::Mod, &a, &b));
    env.add_function("__py_pow", |a: Jv, b: Jv| py_binop(BinOp::Pow, &a, &b));
    env.add_function("__py_neg", |a: Jv| py_neg(&a));
    env.add_function("__py_concat", |a: Jv, b: Jv| Ok::<_, Error>(Jv::from(py_str(&a) + &py_str(&b))));
    env.add_function("__py_lt", |a: Jv, b: Jv| py_compare(&a, &b, "<").map(|o| Jv::from(o == Ordering::Less)));
    env.add_function("__py_le", |a: Jv, b: Jv| py_compare(&a, &b, "<=").map(|o| Jv::from(o != Ordering::Greater)));
    env.add_function("__py_gt", |a: Jv, b: Jv| py_compare(&a, &b, ">").map(|o| Jv::from(o == Ordering::Greater)));
    env.add_function("__py_ge", |a: Jv, b: Jv| py_compare(&a, &b, ">=").map(|o| Jv::from(o != Ordering::Less)));
}

/// The CDK's macros (macros.py).
fn add_macros(env: &mut Environment<'static>) {
    env.add_function("now_utc", macros::now_utc);
    env.add_function("today_utc", macros::today_utc);
    env.add_function("today_with_timezone", macros::today_with_timezone);
    env.add_function("timestamp", macros::timestamp);
    env.add_function("str_to_datetime", macros::str_to_datetime);
    env.add_function("max", macros::max);
    env.add_function("min", macros::min);
    env.add_function("day_delta", macros::day_delta);
    env.add_function("duration", macros::duration);
    env.add_function("format_datetime", macros::format_datetime);
    env.add_function("sanitize_url", macros::sanitize_url);
    env.add_function("camel_case_to_snake_case", macros::camel_case_to_snake_case);
    env.add_function("generate_uuid", macros::generate_uuid);
}

/// The CDK's filters (filters.py).
fn add_cdk_filters(env: &mut Environment<'static>) {
    env.add_filter("hash", filters::hash);
    env.add_filter("base64encode", filters::base64encode);
    env.add_filter("base64decode", filters::base64decode);
    env.add_filter("base64binascii_decode", filters::base64binascii_decode);
    env.add_filter("string", filters::string);
    env.add_filter("regex_search", filters::regex_search);
    env.add_filter("regex_replace", filters::regex_replace);
    env.add_filter("hmac", filters::hmac);
}

/// jinja2's filters where minijinja's differ.
fn add_jinja_filters(env: &mut Environment<'static>) {
    env.add_filter("int", jinja_filters::int);
    env.add_filter("float", jinja_filters::float);
    env.add_filter("join", jinja_filters::join);
    env.add_filter("tojson", jinja_filters::tojson);
    env.add_filter("round", jinja_filters::round);
    env.add_filter("urlencode", jinja_filters::urlencode);
    env.add_filter("length", jinja_filters::length);
    env.add_filter("count", jinja_filters::length);
    env.add_filter("format", jinja_filters::format);
    env.add_filter("unique", jinja_filters::unique);
    env.add_filter("center", jinja_filters::center);
    env.add_filter("wordcount", jinja_filters::wordcount);
    env.add_filter("truncate", jinja_filters::truncate);
    env.add_filter("striptags", jinja_filters::striptags);
}

/// minijinja's filters over sequences, with jinja2's view of what is not one: an undefined value
/// iterates as an empty sequence; None, a number or a bool is a TypeError.
fn add_iterating_filters(env: &mut Environment<'static>) {
    macro_rules! iterating {
        ($($name:ident),*) => {$(
            env.add_filter(concat!("__mj_", stringify!($name)), minijinja::filters::$name);
            env.add_filter(stringify!($name), |state: &State, v: Jv, args: Rest<Jv>| {
                iterating_filter(state, stringify!($name), concat!("__mj_", stringify!($name)), v, &args)
            });
        )*};
    }
    iterating!(
        first, last, list, sort, sum, min, max, map, select, reject, selectattr, rejectattr, batch, slice, groupby
    );
    iterating!(reverse, dictsort, items);
}

fn iterating_filter(state: &State, name: &str, builtin: &str, value: Jv, args: &[Jv]) -> Result<Jv, Error> {
    let value = match value.kind() {
        ValueKind::Undefined => match name {
            "first" | "last" | "min" | "max" => return Ok(Jv::UNDEFINED),
            "sum" => return Ok(Jv::from(0)),
            "dictsort" => return Err(undefined_error("dictsort of an undefined value")),
            _ => Jv::from(Vec::<Jv>::new()),
        },
        ValueKind::None | ValueKind::Number | ValueKind::Bool => {
            return Err(type_error(format!("'{}' object is not iterable", py_type_name(&value))));
        }
        _ => value,
    };
    let mut all = Vec::with_capacity(args.len() + 1);
    all.push(value);
    all.extend_from_slice(args);
    state.apply_filter(builtin, &all)
}
