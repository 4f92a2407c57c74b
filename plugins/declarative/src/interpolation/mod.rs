//! Jinja interpolation as the Airbyte python CDK evaluates it (`JinjaInterpolation`,
//! `InterpolatedString`, `InterpolatedBoolean`, `InterpolatedMapping`, `InterpolatedNestedMapping`):
//! Jinja2 semantics on minijinja, values printed as Python's `str()`, the rendered text read back
//! with Python's `ast.literal_eval`, and the CDK's macros and filters.
//!
//! minijinja has no operator overloading and follows Rust rather than Python for arithmetic and
//! comparisons, so each template is compiled through minijinja's machinery and its arithmetic,
//! comparison and `~` instructions are rewritten into calls of Python-semantics functions. That
//! is what makes `now_utc() - duration('P1D')` work, and `record.n > 5` fail (as a Python
//! `TypeError`) when `n` is a string.
//!
//! This file holds the public API (the CDK's `eval` family), the render context and how a failed
//! rendering maps to the Python exception the CDK reacts to. The rest, bottom up:
//!
//! - [`python`]: the Python-semantics layer on template values (numbers, operators, comparisons,
//!   `max`/`min`, calling a function with Python's arguments), and [`repr`]: `str()`, `repr()`
//!   and `json.dumps` of them;
//! - [`dates`]: `datetime`, `date`, `timedelta` and `isodate.Duration` values;
//! - [`methods`]: Python's `str` and `list` methods minijinja lacks;
//! - [`macros`] and [`filters`]: the CDK's macros.py and filters.py; [`jinja_filters`]: jinja2's
//!   filters where minijinja's differ;
//! - [`compile`]: templates compiled with the operators rewritten; [`env`]: the environment that
//!   registers all of the above;
//! - [`literal`]: Python's `ast.literal_eval`, which reads the rendered text back.

mod compile;
mod dates;
mod env;
mod filters;
mod jinja_filters;
mod literal;
mod macros;
mod methods;
mod python;
mod repr;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::rc::Rc;

use minijinja::machinery::{self, Vm};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Value as Jv};
use serde_json::{Map, Value};

use compile::{Compiled, has_jinja_syntax, normalize_newlines};
use literal::{Py, literal_eval_typed};

// =============================================================================================
// Public API

/// Python types for the CDK's `valid_types` (`isinstance` checks; `bool` is an `int` as in Python).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PyType {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
}

/// The request-option value types the CDK accepts (`ValidRequestTypes = (str, list)`).
pub const REQUEST_VALUE_TYPES: &[PyType] = &[PyType::Str, PyType::List];

/// Renders and evaluates templates; compiles each distinct template once.
pub struct Interpolator {
    env: Environment<'static>,
    cache: RefCell<HashMap<String, Rc<Compiled>>>,
    /// `config` for templates whose context has none, converted once (see [`Interpolator::with_config`]).
    config: Option<Jv>,
}

impl Default for Interpolator {
    fn default() -> Self {
        Self::new()
    }
}

impl Interpolator {
    pub fn new() -> Self {
        Interpolator { env: env::make_env(), cache: RefCell::default(), config: None }
    }

    /// An interpolator whose templates see `config` without it being in each context: each
    /// field converted once, when a template first names it (a config may hold long lists).
    pub fn with_config(config: &crate::config::Config) -> Self {
        Interpolator { config: Some(config.template_value(json_to_jv)), ..Self::new() }
    }

    /// Renders `template` to text, as Jinja2 does (values printed as Python's `str()`; an undefined
    /// value prints nothing, but a lookup *on* an undefined value is an error). `context` is a
    /// JSON object of variables; `stream_interval` and `stream_partition` alias `stream_slice`
    /// unless given.
    pub fn render(&self, template: &str, context: &Value) -> Result<String, String> {
        check_stream_state(template)?;
        self.render_raw(template, context).map_err(|e| e.message(template))
    }

    /// `InterpolatedString.eval`: renders, then reads the text back like `ast.literal_eval`
    /// (`"5"` → 5, `"True"` → true, `"['a']"` → ["a"], `"None"` → null, `"abc"` → "abc"). When
    /// the rendering is empty the template itself is the default: rendered again, so an empty
    /// rendering gives `""` and an undefined error becomes an error.
    pub fn eval(&self, template: &str, context: &Value) -> Result<Value, String> {
        self.eval_with(template, context, Some(template), &[])
    }

    /// `JinjaInterpolation.eval(template, config, default, valid_types)`. When the rendering is
    /// empty or hits an undefined value, `default` is rendered and read back instead (`None`:
    /// null). With `valid_types`, a literal of another type is returned as the rendered text
    /// (the CDK gives request parameters `(str, list)`, so `"123"` stays `"123"`).
    pub fn eval_with(
        &self,
        template: &str,
        context: &Value,
        default: Option<&str>,
        valid_types: &[PyType],
    ) -> Result<Value, String> {
        self.eval_py(template, context, default, valid_types).map(|p| p.to_json())
    }

    /// `InterpolatedBoolean.eval`: false for `False`, `false`, `0`, `0.0`, `""`, `{}`, `[]`, `()`
    /// and their texts (the default is `"False"`), true for anything else, `None` included.
    pub fn eval_bool(&self, template: &str, context: &Value) -> Result<bool, String> {
        let v = self.eval_py(template, context, Some("False"), &[])?;
        Ok(!v.is_cdk_false())
    }

    /// `str(InterpolatedString.eval(...))`, as the CDK builds URLs and paths: `None` → "None",
    /// `True` → "True", lists and dicts as Python prints them.
    pub fn eval_str(&self, template: &str, context: &Value) -> Result<String, String> {
        Ok(self.eval_py(template, context, Some(template), &[])?.py_str())
    }

    /// `InterpolatedMapping.eval`: keys evaluated with `valid_key_types` (default `(str,)`: a key
    /// always stays text), string values evaluated with `valid_value_types` (default none: any
    /// literal), other values as written. Values may come out null (the CDK request providers
    /// then drop them).
    pub fn eval_mapping(
        &self,
        mapping: &Map<String, Value>,
        context: &Value,
        valid_key_types: Option<&[PyType]>,
        valid_value_types: &[PyType],
    ) -> Result<Map<String, Value>, String> {
        let key_types = valid_key_types.unwrap_or(&[PyType::Str]);
        let mut out = Map::new();
        for (k, v) in mapping {
            let key = self.eval_py(k, context, None, key_types)?.json_key();
            let value = match v {
                Value::String(t) => self.eval_with(t, context, None, valid_value_types)?,
                other => other.clone(),
            };
            out.insert(key, value);
        }
        Ok(out)
    }

    /// `InterpolatedNestedMapping.eval`: strings evaluated anywhere in the structure (keys too),
    /// entries of objects whose value evaluates to null dropped.
    pub fn eval_nested(&self, value: &Value, context: &Value) -> Result<Value, String> {
        Ok(match value {
            Value::String(t) => self.eval_with(t, context, None, &[])?,
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, v) in m {
                    let key = self.eval_py(k, context, None, &[])?.json_key();
                    let v = self.eval_nested(v, context)?;
                    if !v.is_null() {
                        out.insert(key, v);
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.eval_nested(v, context)).collect::<Result<_, _>>()?)
            }
            other => other.clone(),
        })
    }

    fn eval_py(&self, template: &str, context: &Value, default: Option<&str>, valid: &[PyType]) -> Result<Py, String> {
        check_stream_state(template)?;
        let rendered = match self.render_raw(template, context) {
            Ok(text) => text,
            Err(Failure::Undefined(_)) => String::new(),
            // `_eval` catches TypeError and hands back the template itself.
            Err(Failure::Type(_)) => template.to_string(),
            Err(e) => return Err(e.message(template)),
        };
        if !rendered.is_empty() {
            return Ok(literal_eval_typed(&rendered, valid));
        }
        let Some(default) = default else { return Ok(Py::None) };
        let rendered = match self.render_raw(default, context) {
            Ok(text) => text,
            Err(Failure::Type(_)) => default.to_string(),
            Err(e) => return Err(e.message(default)),
        };
        Ok(literal_eval_typed(&rendered, valid))
    }

    fn render_raw(&self, template: &str, context: &Value) -> Result<String, Failure> {
        if !has_jinja_syntax(template) {
            return Ok(normalize_newlines(template, true).into_owned());
        }
        let compiled = self.compile(template);
        let (instructions, vars) = match &*compiled {
            Compiled::Invalid(e) => return Err(Failure::Other(e.clone())),
            Compiled::Jinja { instructions, vars } => (instructions, vars),
        };
        let root = build_root(vars, context, self.config.as_ref())?;
        let mut out = String::with_capacity(template.len() + 32);
        let blocks = BTreeMap::new();
        let vm = Vm::new(&self.env);
        vm.eval(instructions, root, &blocks, &mut machinery::make_string_output(&mut out), AutoEscape::None)
            .map_err(classify)?;
        Ok(out)
    }

    /// Whether the template's value depends on the config alone: it names no variable but
    /// `config` and calls nothing that changes between calls (the clock, random ids). Such a
    /// template gives the same value for the life of an engine, so it need be evaluated once.
    pub fn depends_on_config_only(&self, template: &str) -> bool {
        if !has_jinja_syntax(template) {
            return true;
        }
        const IMPURE: &[&str] = &["now_utc", "today_utc", "today_with_timezone", "generate_uuid", "day_delta"];
        match &*self.compile(template) {
            Compiled::Jinja { vars, .. } => {
                vars.iter().all(|v| v == "config") && !IMPURE.iter().any(|f| template.contains(f))
            }
            Compiled::Invalid(_) => false,
        }
    }

    fn compile(&self, template: &str) -> Rc<Compiled> {
        if let Some(c) = self.cache.borrow().get(template) {
            return c.clone();
        }
        let compiled = Rc::new(compile::compile(template));
        self.cache.borrow_mut().insert(template.to_string(), compiled.clone());
        compiled
    }
}

/// Python's `str()` of a JSON value as the CDK holds it (`None`, `True`, `['a', 1]`, `{'k': 'v'}`,
/// `1.0`): what `requests` and f-strings make of evaluated values.
pub fn py_str_json(value: &Value) -> String {
    Py::from_json(value).py_str()
}

// =============================================================================================
// Failures, in Python's terms

/// What a failed rendering was, in the Python terms the CDK reacts to.
#[derive(Debug)]
enum Failure {
    /// jinja2's UndefinedError: the CDK falls back to the default.
    Undefined(String),
    /// A Python TypeError: the CDK's `_eval` returns the template text.
    Type(String),
    Other(String),
}

impl Failure {
    fn message(&self, template: &str) -> String {
        let (Failure::Undefined(m) | Failure::Type(m) | Failure::Other(m)) = self;
        format!("cannot render {template:?}: {m}")
    }
}

const TYPE_ERROR: &str = "TypeError: ";
const UNDEFINED_ERROR: &str = "UndefinedError: ";

/// The Python exception a minijinja error stands for.
fn classify(e: Error) -> Failure {
    let detail = e.detail().unwrap_or_default().to_string();
    let text = if detail.is_empty() { e.kind().to_string() } else { detail.clone() };
    let text = match e.line() {
        Some(line) if line > 1 => format!("{text} (line {line})"),
        _ => text,
    };
    match e.kind() {
        ErrorKind::UndefinedError | ErrorKind::UnknownMethod => Failure::Undefined(text),
        ErrorKind::InvalidOperation if detail.starts_with(UNDEFINED_ERROR) => Failure::Undefined(text),
        ErrorKind::InvalidOperation if detail.starts_with(TYPE_ERROR) => Failure::Type(text),
        ErrorKind::TooManyArguments | ErrorKind::MissingArgument | ErrorKind::NonKey | ErrorKind::NonPrimitive => {
            Failure::Type(text)
        }
        // minijinja's own operation errors are Python TypeErrors (calling a non-callable, len(5) ...).
        ErrorKind::InvalidOperation if !detail.starts_with("ValueError") => Failure::Type(text),
        _ => Failure::Other(text),
    }
}

/// A Python TypeError (see [`classify`]).
fn type_error(msg: impl fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("{TYPE_ERROR}{msg}"))
}

/// A Python ValueError (or another exception named in `msg`): an error the CDK does not catch.
fn value_error(msg: impl fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("ValueError: {msg}"))
}

/// jinja2's UndefinedError.
fn undefined_error(msg: impl fmt::Display) -> Error {
    Error::new(ErrorKind::UndefinedError, msg.to_string())
}

/// The CDK refuses `stream_state` in templates since its migration to `stream_interval`.
fn check_stream_state(template: &str) -> Result<(), String> {
    if template.contains("stream_state") {
        return Err(format!(
            "cannot render {template:?}: `stream_state` is no longer supported for interpolation. We recommend using `stream_interval` instead. Please reference the CDK Migration Guide for more information."
        ));
    }
    Ok(())
}

// =============================================================================================
// The render context

/// The render context: the variables the template names, converted from JSON (`config`, when
/// the context has none, is the interpolator's). The CDK refuses a template naming a variable its
/// context lacks.
fn build_root(vars: &[String], context: &Value, config: Option<&Jv>) -> Result<Jv, Failure> {
    let empty = Map::new();
    let ctx = match context {
        Value::Object(m) => m,
        Value::Null => &empty,
        other => return Err(Failure::Other(format!("the context must be a JSON object, got {other}"))),
    };
    let lookup = |name: &str| -> Option<&Value> {
        ctx.get(name).or_else(|| match name {
            "stream_interval" | "stream_partition" => ctx.get("stream_slice"),
            _ => None,
        })
    };
    let kept = |name: &str| config.filter(|_| name == "config" && !ctx.contains_key("config"));
    let missing: Vec<&str> =
        vars.iter().map(String::as_str).filter(|v| lookup(v).is_none() && kept(v).is_none()).collect();
    if !missing.is_empty() {
        return Err(Failure::Other(format!("Jinja macro has undeclared variables: {}", missing.join(", "))));
    }
    Ok(Jv::from_iter(vars.iter().map(|v| {
        let value = match kept(v) {
            Some(config) => config.clone(),
            None => json_to_jv(lookup(v).expect("checked above")),
        };
        (v.as_str(), value)
    })))
}

fn json_to_jv(v: &Value) -> Jv {
    match v {
        Value::Null => Jv::from(()),
        Value::Bool(b) => Jv::from(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Jv::from(i)
            } else if let Some(u) = n.as_u64() {
                Jv::from(u)
            } else if let Ok(i) = n.to_string().parse::<i128>() {
                // Only reachable with serde_json's arbitrary_precision.
                Jv::from(i)
            } else {
                Jv::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Jv::from(s.as_str()),
        Value::Array(items) => Jv::from(items.iter().map(json_to_jv).collect::<Vec<_>>()),
        Value::Object(m) => Jv::from_iter(m.iter().map(|(k, v)| (k.as_str(), json_to_jv(v)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn ctx() -> Value {
        json!({
            "config": {"date": "2022-01-01", "field": "value", "num": 3, "s": "123", "key": "value", "t": true,
                       "l": ["a", "b"], "d": {"k": "v"}, "start_date": "2021-01-01T00:00:00Z", "page": 2, "n": null},
            "parameters": {"hello": "world", "from_parameters": "come_find_me", "k": "key", "b": "VALUE_FROM_PARAMETERS"},
            "stream_slice": {"start_time": "2021-01-01T00:00:00Z", "stream_slice_key": "hello"},
            "record": {"id": 5, "name": "Bob", "count": "5", "tags": ["a", "b"], "meta": null},
            "headers": {"link": "<https://this-is-test-link.com/?page=2>; rel=\"next\""},
            "kwargs": {"a": "VALUE_FROM_KWARGS", "c": "airbyte"},
            "to_be": "that_is_the_question",
        })
    }

    /// JinjaInterpolation.eval(template, config) with no default.
    pub(super) fn ev(t: &str) -> Value {
        Interpolator::new().eval_with(t, &ctx(), None, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn ist(t: &str) -> Result<Value, String> {
        Interpolator::new().eval(t, &ctx())
    }

    // test_jinja.py
    #[test]
    fn jinja_values_and_missing_values() {
        assert_eq!(ev("{{ config['date'] }}"), json!("2022-01-01"));
        assert_eq!(ev("{{ config['missing'] }}"), Value::Null);
        assert_eq!(ev("{{ stream_slice['stream_slice_key'] }}"), json!("hello"));
        assert_eq!(ev("{{ stream_slice['missing'] }}"), Value::Null);
        assert_eq!(ev("{{ stream_partition['stream_slice_key'] }}"), json!("hello"));
        assert_eq!(ev("{{ stream_interval['stream_slice_key'] }}"), json!("hello"));
        assert_eq!(ev("{{ record.tags[0] }}"), json!("a"));
        assert_eq!(ev("{{ config.d.k }}"), json!("v"));
        assert_eq!(ev("{{ config.get('missing', 'dflt') }}"), json!("dflt"));
        assert_eq!(ev("{{ config.get('field') }}"), json!("value"));
        assert_eq!(ev("{{ to_be }}"), json!("that_is_the_question"));
        assert_eq!(ev("hello world"), json!("hello world"));
    }

    #[test]
    fn jinja_literals() {
        assert_eq!(ev("{{1}}"), json!(1));
        assert_eq!(ev("{{[1,2]}}"), json!([1, 2]));
        assert_eq!(ev("{{ {1:2} }}"), json!({"1": 2}));
        assert_eq!(ev("{{ {'a': 1, 'b': [True, None, 'x']} }}"), json!({"a": 1, "b": [true, null, "x"]}));
        assert_eq!(ev("{{ 1+2 }}"), json!(3));
        assert_eq!(ev("{{ 7 / 2 }}"), json!(3.5));
        assert_eq!(ev("{{ config.s }}"), json!(123));
        assert_eq!(ev("{{ config.t }}"), json!(true));
        assert_eq!(ev("{{ none }}"), Value::Null);
        assert_eq!(ev("{{ config.n }}"), Value::Null);
        assert_eq!(ev("{{ config.l }}"), json!(["a", "b"]));
        assert_eq!(ev("{{ record.id }}, {{ record.id }}"), json!([5, 5]));
        assert_eq!(ev("'{{ config.key }}'"), json!("value"));
        assert_eq!(ev("007"), json!("007"));
        assert_eq!(ev("1e5"), json!(100000.0));
        assert_eq!(ev("9173710294242221J"), json!("9173710294242221J"));
        // ast.literal_eval raises TypeError on a set of sets: the text stays.
        let c = json!({"config": {"query": "{{'web'}, {'discover'}}"}});
        assert_eq!(
            Interpolator::new().eval_with("{{ config['query'] }}", &c, None, &[]).unwrap(),
            json!("{{'web'}, {'discover'}}")
        );
    }

    #[test]
    fn rendering_prints_like_python() {
        let i = Interpolator::new();
        let r = |t: &str| i.render(t, &ctx()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r("x{{ config.l }}"), "x['a', 'b']");
        assert_eq!(r("{{ config.t }}-{{ config.n }}-{{ config.missing }}"), "True-None-");
        assert_eq!(r("{{ config.d }}"), "{'k': 'v'}");
        assert_eq!(r("{{ 1e16 }} {{ 0.00001 }} {{ 2.50 }}"), "1e+16 1e-05 2.5");
        assert_eq!(r("{{ config.t ~ 'x' }}"), "Truex");
        assert_eq!(r("{{ config.l | join(',') }}"), "a,b");
        assert_eq!(r("{{ ', '.join(config.l) }}"), "a, b");
        assert_eq!(r("{{ config.l | tojson }}"), "[\"a\", \"b\"]");
        assert_eq!(r("{{ {'b': 1, 'a': '<'} | tojson }}"), "{\"a\": \"\\u003c\", \"b\": 1}");
        assert_eq!(r("a\n"), "a");
        assert_eq!(r("{{ 'a' }}\r\n\r\n"), "a\n");
        assert_eq!(r("{% if record.id > 3 %}big{% else %}small{% endif %}"), "big");
        assert_eq!(r("{% for t in record.tags %}{{ loop.index }}{{ t }}{% endfor %}"), "1a2b");
        assert_eq!(r("{% set x = record.id * 2 %}{{ x }}"), "10");
        assert_eq!(r("{{ config.start_date[:10] }}"), "2021-01-01");
        assert_eq!(r("{{ '%s-%05d' % ('a', 42) }}"), "a-00042");
        assert_eq!(r("{{ -config.page }} {{ -record.id + 1 }}"), "-2 -4");
        assert_eq!(r("{{ -7 // config.num }} {{ -7 % config.num }}"), "-3 2");
        assert_eq!(r("{{ [1, True, 1.0, 'A', 'a'] | unique | list }}"), "[1, 'A']");
    }

    #[test]
    fn undefined_semantics() {
        // A lookup on an undefined value is jinja2's UndefinedError: the default is used.
        assert_eq!(ev("{{ config['missing']['x'] }}"), Value::Null);
        assert_eq!(ev("{{ config.missing.get('x') }}"), Value::Null);
        assert_eq!(ev("{{ config.missing + 1 }}"), Value::Null);
        assert_eq!(ev("{{ config.missing | length }}"), json!(0));
        assert_eq!(ev("{{ config.missing ~ 'a' }}"), json!("a"));
        assert_eq!(ev("{{ config.missing is defined }}"), json!(false));
        assert_eq!(ev("{{ config.missing | default('d') }}"), json!("d"));
        // InterpolatedString's default is the template: rendered again, so that error surfaces.
        assert!(ist("{{ config['missing']['x'] }}").unwrap_err().contains("{{ config['missing']['x'] }}"));
        assert_eq!(ist("{{ config['missing'] }}").unwrap(), json!(""));
        assert_eq!(ist("").unwrap(), json!(""));
        let i = Interpolator::new();
        assert_eq!(i.eval_with("{{ config.missing }}", &ctx(), Some("x"), &[]).unwrap(), json!("x"));
        assert_eq!(i.eval_with("{{ config.missing }}", &ctx(), Some("{{ config.num }}"), &[]).unwrap(), json!(3));
    }

    #[test]
    fn undeclared_and_restricted() {
        let i = Interpolator::new();
        for t in [
            "{{ missingno }}",
            "{{ to_be and or_not_to_be }}",
            "{{ range(3) }}",
            "{{ eval('2+2') }}",
            "{{ getattr(config, 'key') }}",
            "{% for i in range(1000000000) %}{% endfor %}",
        ] {
            let e = i.eval(t, &ctx()).unwrap_err();
            assert!(e.contains("undeclared variables") && e.contains(&format!("{t:?}")), "{t}: {e}");
        }
        assert!(i.eval("{{ stream_state.get('some_field') }}", &ctx()).unwrap_err().contains("stream_state"));
        assert!(i.eval("{{ import os) }}", &ctx()).is_err());
        assert!(i.eval("{{ record.id | bogus }}", &ctx()).is_err());
        assert!(i.render("{{ config['x'] }", &ctx()).unwrap_err().starts_with("cannot render \"{{ config['x'] }\": "));
        assert!(i.render("{{ x }}", &json!([])).is_err());
    }

    #[test]
    fn type_errors_give_the_template_back() {
        // The CDK's `_eval` catches TypeError and returns the template as it stands.
        assert_eq!(ev("{{ config.s + 1 }}"), json!("{{ config.s + 1 }}"));
        assert_eq!(ev("{{ record.meta > 3 }}"), json!("{{ record.meta > 3 }}"));
        assert_eq!(ev("{{ max(1, 'a') }}"), json!("{{ max(1, 'a') }}"));
        let i = Interpolator::new();
        assert!(i.eval_bool("{{ record.count > 3 }}", &ctx()).unwrap());
        assert!(!i.eval_bool("{{ record.missing > 3 }}", &ctx()).unwrap());
    }

    // test_interpolated_string.py
    #[test]
    fn interpolated_string() {
        assert_eq!(ist("HELLO WORLD").unwrap(), json!("HELLO WORLD"));
        assert_eq!(ist("{{ parameters['hello'] }}").unwrap(), json!("world"));
        assert_eq!(ist("{{ config['field'] }}").unwrap(), json!("value"));
        assert_eq!(ist("{{ kwargs['c'] }}").unwrap(), json!("airbyte"));
        const FLOAT: &str = "{{ record['some_calculation'] | float if record.get('some_calculation') is not none and record.get('some_calculation') != '' else none }}";
        const MULTILINE: &str = "{% set v = record.get('some_calculation') %}\n{{ v | replace('%', '') | float if v is not none and v != '' else None }}";
        let i = Interpolator::new();
        let cases = [
            (json!("4.4"), json!(4.4)),
            (json!(4.4), json!(4.4)),
            (json!(""), Value::Null),
            (Value::Null, Value::Null),
            (json!("0.0"), json!(0.0)),
            (json!("0.00"), json!(0.0)),
            (json!(0.0), json!(0.0)),
        ];
        for t in [FLOAT, MULTILINE] {
            for (value, want) in &cases {
                let c = json!({"record": {"some_calculation": value}, "config": {}, "parameters": {}});
                let got = i.eval(t, &c).unwrap();
                assert_eq!(&got, want, "{t} {c}");
                assert_eq!(got.is_f64(), want.is_f64());
            }
        }
        assert_eq!(i.eval_str("{{ config.n }}", &ctx()).unwrap(), "None");
        assert_eq!(i.eval_str("/v1/{{ config.s }}/{{ config.t }}", &ctx()).unwrap(), "/v1/123/True");
        assert_eq!(i.eval_str("{{ config.l }}", &ctx()).unwrap(), "['a', 'b']");
        assert_eq!(i.eval_str("{{ config.missing }}", &ctx()).unwrap(), "");
        assert_eq!(py_str_json(&json!({"a": [1, 2.0, null, true, "x'"]})), "{'a': [1, 2.0, None, True, \"x'\"]}");
    }

    // test_interpolated_boolean.py
    #[test]
    fn interpolated_boolean() {
        let c = json!({
            "config": {"parent": {"key_with_true": true}, "string_key": "compare_me", "zero_value": 0, "empty_array": [],
                       "non_empty_array": [1], "empty_dict": {}},
            "parameters": {"from_parameters": "come_find_me"},
            "record": {"meta": null, "name": "x"},
        });
        let i = Interpolator::new();
        let b = |t: &str| i.eval_bool(t, &c).unwrap_or_else(|e| panic!("{e}"));
        assert!(b("{{ config['parent']['key_with_true'] }}"));
        assert!(b("{{ config['string_key'] == \"compare_me\" }}"));
        assert!(!b("{{ config['string_key'] == \"witness_me\" }}"));
        assert!(b("{{ config['string_key'] }}"));
        assert!(!b("{{ config['zero_value'] }}"));
        assert!(!b("{{ config['empty_array'] }}"));
        assert!(!b("{{ config['empty_dict'] }}"));
        assert!(!b("{{ () }}"));
        assert!(!b("{{ \"false\" }}"));
        assert!(!b("{{ False }}"));
        assert!(b("{{ True }}"));
        assert!(b("{{ 1 in config['non_empty_array'] }}"));
        assert!(!b("{{ 2 in config['non_empty_array'] }}"));
        assert!(b("{{ parameters['from_parameters'] == \"come_find_me\" }}"));
        // Rendered "None" is not among the CDK's false values.
        assert!(b("{{ record.meta }}"));
        assert!(b("{{ record.get('missing') }}"));
        assert!(!b("{{ record.missing }}"));
        assert!(!b("{{ record.missing.x }}"));
        assert!(!b("{{ '0.0' }}"));
        assert!(b("{{ 'FALSE' }}"));
    }

    // test_interpolated_mapping.py, test_interpolated_nested_mapping.py
    #[test]
    fn mappings() {
        let c = json!({"config": {"c": "VALUE_FROM_CONFIG", "num_value": 3}, "kwargs": {"a": "VALUE_FROM_KWARGS"},
                       "parameters": {"b": "VALUE_FROM_PARAMETERS", "k": "key"}});
        let m = json!({"field": "value", "number": 100, "field_to_interpolate_from_config": "{{ config['c'] }}",
                       "field_to_interpolate_from_kwargs": "{{ kwargs['a'] }}",
                       "field_to_interpolate_from_parameters": "{{ parameters['b'] }}",
                       "{{ parameters.k }}": "VALUE", "n": "{{ 5 }}", "none": "{{ config.missing }}"});
        let i = Interpolator::new();
        let out = i.eval_mapping(m.as_object().unwrap(), &c, None, &[]).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"field": "value", "number": 100, "field_to_interpolate_from_config": "VALUE_FROM_CONFIG",
                   "field_to_interpolate_from_kwargs": "VALUE_FROM_KWARGS",
                   "field_to_interpolate_from_parameters": "VALUE_FROM_PARAMETERS", "key": "VALUE", "n": 5, "none": null})
        );
        let params = i.eval_mapping(m.as_object().unwrap(), &c, None, REQUEST_VALUE_TYPES).unwrap();
        assert_eq!(params["n"], json!("5"));
        let nested = json!({"nested": {"field": "value", "number": 100, "nested_array": [{"{{ parameters.k }}": "VALUE"},
            {"value": "{{ config['num_value'] | int + 2 }}"}, {"value": "{{ True }}"}], "config_value": "{{ config['c'] }}",
            "dropped": "{{ config.missing }}"}});
        assert_eq!(
            i.eval_nested(&nested, &c).unwrap(),
            json!({"nested": {"field": "value", "number": 100,
                   "nested_array": [{"key": "VALUE"}, {"value": 5}, {"value": true}], "config_value": "VALUE_FROM_CONFIG"}})
        );
    }

    #[test]
    fn valid_types() {
        let i = Interpolator::new();
        let e = |t: &str, v: &[PyType]| i.eval_with(t, &ctx(), None, v).unwrap();
        assert_eq!(e("{{ config.s }}", REQUEST_VALUE_TYPES), json!("123"));
        assert_eq!(e("{{ config.l }}", REQUEST_VALUE_TYPES), json!(["a", "b"]));
        assert_eq!(e("{{ config.t }}", &[PyType::Int]), json!(true));
        assert_eq!(e("{{ config.num }}", &[PyType::Float]), json!("3"));
        assert_eq!(e("{{ config.num }}", &[PyType::Int]), json!(3));
    }

    #[test]
    fn plain_templates_skip_jinja() {
        let i = Interpolator::new();
        assert_eq!(i.render("https://api.example.com/v1", &ctx()).unwrap(), "https://api.example.com/v1");
        assert!(i.cache.borrow().is_empty());
        i.render("{{ record.id }}", &ctx()).unwrap();
        i.render("{{ record.id }}", &ctx()).unwrap();
        assert_eq!(i.cache.borrow().len(), 1);
    }

    #[test]
    fn many_records_are_quick() {
        let i = Interpolator::new();
        let start = std::time::Instant::now();
        for n in 0..20_000 {
            let c = json!({"record": {"id": n, "updated_at": "2021-05-01T00:00:00Z", "name": "x"},
                           "config": {"start": "2021-01-01"}, "stream_slice": {}});
            assert_eq!(
                i.eval_bool("{{ record.id % 2 == 0 and record.updated_at >= config.start }}", &c).unwrap(),
                n % 2 == 0
            );
            i.eval("{{ record.name | upper }}-{{ record.id }}", &c).unwrap();
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "{:?}", start.elapsed());
    }
}
