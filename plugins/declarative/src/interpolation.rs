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

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use minijinja::machinery::{self, CodeGenerator, Instruction, Instructions, Vm, WhitespaceConfig};
use minijinja::value::{DynObject, Object, ObjectRepr, Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State, Value as Jv};
use serde_json::{Map, Value};

use crate::datetime::{self, Duration};

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
        Interpolator { env: make_env(), cache: RefCell::default(), config: None }
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
        let compiled = Rc::new(compile(template));
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
// Compilation and rendering

enum Compiled {
    Jinja { instructions: Instructions<'static>, vars: Vec<String> },
    Invalid(String),
}

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

fn type_error(msg: impl fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("{TYPE_ERROR}{msg}"))
}

fn value_error(msg: impl fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("ValueError: {msg}"))
}

fn undefined_error(msg: impl fmt::Display) -> Error {
    Error::new(ErrorKind::UndefinedError, msg.to_string())
}

fn check_stream_state(template: &str) -> Result<(), String> {
    if template.contains("stream_state") {
        return Err(format!(
            "cannot render {template:?}: `stream_state` is no longer supported for interpolation. We recommend using `stream_interval` instead. Please reference the CDK Migration Guide for more information."
        ));
    }
    Ok(())
}

fn has_jinja_syntax(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Jinja2's lexer splits the source on `\r\n`, `\r` and `\n` and joins the lines with `\n`,
/// dropping one trailing line end.
/// (minijinja drops that line end itself, so a template to compile keeps it.)
fn normalize_newlines(s: &str, drop_trailing: bool) -> std::borrow::Cow<'_, str> {
    if !(s.contains('\r') || drop_trailing && s.ends_with('\n')) {
        return s.into();
    }
    let mut t = s.replace("\r\n", "\n").replace('\r', "\n");
    if drop_trailing && t.ends_with('\n') {
        t.pop();
    }
    t.into()
}

/// Template sources live as long as the process: minijinja's compiled instructions borrow their
/// source. Each distinct text is kept once, and templates come from the manifest.
fn intern(s: &str) -> &'static str {
    static SOURCES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = SOURCES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = set.get(s) {
        return s;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// Globals that are not context variables (jinja2's `find_undeclared_variables` leaves them out).
const GLOBALS: &[&str] = &[
    "now_utc",
    "today_utc",
    "timestamp",
    "max",
    "min",
    "day_delta",
    "duration",
    "format_datetime",
    "today_with_timezone",
    "str_to_datetime",
    "sanitize_url",
    "camel_case_to_snake_case",
    "generate_uuid",
    "dict",
    "namespace",
    "cycler",
    "joiner",
    "lipsum",
    "loop",
];

fn compile(template: &str) -> Compiled {
    let source = intern(&normalize_newlines(template, false));
    let ast = match machinery::parse(source, "<template>", Default::default(), WhitespaceConfig::default()) {
        Ok(ast) => ast,
        Err(e) => return Compiled::Invalid(syntax_message(&e)),
    };
    let mut g = CodeGenerator::new("<template>", source);
    g.compile_stmt(&ast);
    let (mut instructions, _blocks) = g.finish();
    for i in 0..instructions.len() as u32 {
        let Some(ins) = instructions.get_mut(i) else { continue };
        let replacement = match ins {
            Instruction::Add => ("__py_add", 2),
            Instruction::Sub => ("__py_sub", 2),
            Instruction::Mul => ("__py_mul", 2),
            Instruction::Div => ("__py_truediv", 2),
            Instruction::IntDiv => ("__py_floordiv", 2),
            Instruction::Rem => ("__py_mod", 2),
            Instruction::Pow => ("__py_pow", 2),
            Instruction::Neg => ("__py_neg", 1),
            Instruction::StringConcat => ("__py_concat", 2),
            Instruction::Lt => ("__py_lt", 2),
            Instruction::Lte => ("__py_le", 2),
            Instruction::Gt => ("__py_gt", 2),
            Instruction::Gte => ("__py_ge", 2),
            _ => continue,
        };
        *ins = Instruction::CallFunction(replacement.0, Some(replacement.1));
    }
    // The names the template looks up and never assigns: the context variables it needs (read
    // off the instructions: minijinja's `undeclared_variables` misses sliced expressions).
    let (mut looked, mut stored) = (Vec::new(), HashSet::new());
    for i in 0..instructions.len() as u32 {
        match instructions.get(i) {
            Some(Instruction::Lookup(name) | Instruction::CallFunction(name, _)) => looked.push(*name),
            Some(Instruction::StoreLocal(name)) => {
                stored.insert(*name);
            }
            _ => {}
        }
    }
    let mut vars: Vec<String> = looked
        .into_iter()
        .filter(|v| !stored.contains(v) && !GLOBALS.contains(v) && !v.starts_with("__py_") && *v != "super")
        .map(String::from)
        .collect();
    vars.sort();
    vars.dedup();
    Compiled::Jinja { instructions, vars }
}

fn syntax_message(e: &Error) -> String {
    let mut m = format!("{}: {}", e.kind(), e.detail().unwrap_or_default());
    if let Some(line) = e.line() {
        m.push_str(&format!(" (line {line})"));
    }
    m
}

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

// =============================================================================================
// The environment

fn make_env() -> Environment<'static> {
    let mut env = Environment::new();
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
    env.set_unknown_method_callback(unknown_method);
    // jinja2's globals, less the CDK's restricted `range` (minijinja's `debug` is not jinja2's).
    env.remove_global("range");
    env.remove_global("debug");

    // Python operators (see `compile`).
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

    // The CDK's macros.
    env.add_function("now_utc", |args: Rest<Jv>| {
        bind("now_utc", &args, &[], 0)?;
        Ok::<_, Error>(PyDateTime::now().into_value())
    });
    env.add_function("today_utc", |args: Rest<Jv>| {
        bind("today_utc", &args, &[], 0)?;
        Ok::<_, Error>(PyDateTime::now().date().into_value())
    });
    env.add_function("today_with_timezone", macro_today_with_timezone);
    env.add_function("timestamp", macro_timestamp);
    env.add_function("str_to_datetime", macro_str_to_datetime);
    env.add_function("max", |args: Rest<Jv>| py_max_min("max", &args, Ordering::Greater));
    env.add_function("min", |args: Rest<Jv>| py_max_min("min", &args, Ordering::Less));
    env.add_function("day_delta", macro_day_delta);
    env.add_function("duration", macro_duration);
    env.add_function("format_datetime", macro_format_datetime);
    env.add_function("sanitize_url", |args: Rest<Jv>| {
        let a = bind("sanitize_url", &args, &["value"], 1)?;
        Ok::<_, Error>(Jv::from(quote(&str_arg(&a[0])?, "", true)))
    });
    env.add_function("camel_case_to_snake_case", |args: Rest<Jv>| {
        let a = bind("camel_case_to_snake_case", &args, &["value"], 1)?;
        Ok::<_, Error>(Jv::from(camel_to_snake(&str_arg(&a[0])?)))
    });
    env.add_function("generate_uuid", |args: Rest<Jv>| {
        bind("generate_uuid", &args, &[], 0)?;
        Ok::<_, Error>(Jv::from(uuid4()))
    });

    // The CDK's filters.
    env.add_filter("hash", filter_hash);
    env.add_filter("base64encode", |v: Jv, args: Rest<Jv>| {
        bind("base64encode", &args, &[], 0)?;
        Ok::<_, Error>(Jv::from(base64_encode(str_arg(&v)?.as_bytes())))
    });
    env.add_filter("base64decode", |v: Jv, args: Rest<Jv>| {
        bind("base64decode", &args, &[], 0)?;
        let bytes = base64_decode(&str_arg(&v)?).map_err(value_error)?;
        String::from_utf8(bytes).map(Jv::from).map_err(|_| value_error("'utf-8' codec can't decode the decoded bytes"))
    });
    env.add_filter("base64binascii_decode", |v: Jv, args: Rest<Jv>| {
        bind("base64binascii_decode", &args, &[], 0)?;
        let s = str_arg(&v)?;
        if !s.is_ascii() {
            return Err(value_error("'ascii' codec can't encode the value"));
        }
        Ok(Jv::from(base64_encode(s.as_bytes())))
    });
    env.add_filter("string", filter_string);
    env.add_filter("regex_search", filter_regex_search);
    env.add_filter("regex_replace", filter_regex_replace);
    env.add_filter("hmac", filter_hmac);

    // jinja2's filters where minijinja's differ.
    env.add_filter("int", filter_int);
    env.add_filter("float", filter_float);
    env.add_filter("join", filter_join);
    env.add_filter("tojson", filter_tojson);
    env.add_filter("round", filter_round);
    env.add_filter("urlencode", filter_urlencode);
    env.add_filter("length", filter_length);
    env.add_filter("count", filter_length);
    env.add_filter("format", filter_format);
    env.add_filter("unique", filter_unique);
    env.add_filter("center", |v: Jv, args: Rest<Jv>| {
        let a = bind("center", &args, &["width"], 0)?;
        let width = if a[0].is_undefined() { Jv::from(80) } else { a[0].clone() };
        py_center(&py_str(&v), &width, ' ')
    });
    env.add_filter("wordcount", |v: Jv, args: Rest<Jv>| {
        bind("wordcount", &args, &[], 0)?;
        let s = py_str(&v);
        Ok::<_, Error>(Jv::from(
            s.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).count(),
        ))
    });
    env.add_filter("truncate", filter_truncate);
    env.add_filter("striptags", |v: Jv, args: Rest<Jv>| {
        bind("striptags", &args, &[], 0)?;
        Ok::<_, Error>(Jv::from(strip_tags(&py_str(&v))))
    });
    // jinja2 iterates an undefined value as an empty sequence; None is a TypeError.
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
    env
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

/// Binds Python-style arguments: positionals, then keywords by name; a missing, extra or unknown
/// argument is a TypeError, as calling a Python function wrongly is.
fn bind(name: &str, args: &[Jv], params: &[&str], required: usize) -> Result<Vec<Jv>, Error> {
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
fn str_arg(v: &Jv) -> Result<String, Error> {
    if v.is_undefined() {
        return Err(undefined_error("a required value is undefined"));
    }
    Ok(match v.as_str() {
        Some(s) => s.to_string(),
        None => py_str(v),
    })
}

fn is_absent(v: &Jv) -> bool {
    v.is_undefined() || v.is_none()
}

// =============================================================================================
// Python semantics on values

#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num(v: &Jv) -> Option<Num> {
    match v.kind() {
        ValueKind::Bool => Some(Num::Int(v.is_true() as i128)),
        ValueKind::Number if v.is_integer() => i128::try_from(v.clone()).ok().map(Num::Int),
        ValueKind::Number => f64::try_from(v.clone()).ok().map(Num::Float),
        _ => None,
    }
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn int_value(i: i128) -> Jv {
    match i64::try_from(i) {
        Ok(v) => Jv::from(v),
        Err(_) => Jv::from(i),
    }
}

/// Python's type names, for error messages.
fn py_type_name(v: &Jv) -> &'static str {
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum BinOp {
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

fn py_binop(op: BinOp, a: &Jv, b: &Jv) -> Result<Jv, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(undefined_error("an operand is undefined"));
    }
    let unsupported = || {
        type_error(format!(
            "unsupported operand type(s) for {}: '{}' and '{}'",
            op.symbol(),
            py_type_name(a),
            py_type_name(b)
        ))
    };
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return num_binop(op, x, y);
    }
    let (dt_a, dt_b) = (a.downcast_object_ref::<PyDateTime>(), b.downcast_object_ref::<PyDateTime>());
    let (du_a, du_b) = (a.downcast_object_ref::<PyDuration>(), b.downcast_object_ref::<PyDuration>());
    match (op, dt_a, dt_b, du_a, du_b) {
        (BinOp::Add, Some(d), None, None, Some(du)) | (BinOp::Add, None, Some(d), Some(du), None) => {
            return d.add(du, false).map(PyDateTime::into_value);
        }
        (BinOp::Sub, Some(d), None, None, Some(du)) => return d.add(du, true).map(PyDateTime::into_value),
        (BinOp::Sub, Some(x), Some(y), None, None) => {
            if x.is_date != y.is_date || x.offset.is_some() != y.offset.is_some() {
                return Err(unsupported());
            }
            return Ok(PyDuration::timedelta(x.micros_since_epoch() - y.micros_since_epoch()).into_value());
        }
        (BinOp::Add | BinOp::Sub, None, None, Some(x), Some(y)) => {
            let sign = if op == BinOp::Sub { -1 } else { 1 };
            return Ok(PyDuration {
                years: x.years + sign * y.years,
                months: x.months + sign * y.months,
                micros: x.micros + sign as i128 * y.micros,
                is_timedelta: x.is_timedelta && y.is_timedelta,
            }
            .into_value());
        }
        _ => {}
    }
    match op {
        BinOp::Add => {
            if let (Some(x), Some(y)) = (a.as_str(), b.as_str())
                && a.kind() == ValueKind::String
                && b.kind() == ValueKind::String
            {
                return Ok(Jv::from([x, y].concat()));
            }
            if is_list(a) && is_list(b) {
                let mut items: Vec<Jv> = a.try_iter()?.collect();
                items.extend(b.try_iter()?);
                return Ok(Jv::from(items));
            }
        }
        BinOp::Mul => {
            let repeat = |s: &Jv, n: &Jv| -> Option<Result<Jv, Error>> {
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
            };
            if let Some(r) = repeat(a, b).or_else(|| repeat(b, a)) {
                return r;
            }
        }
        BinOp::Mod if a.kind() == ValueKind::String => {
            let args: Vec<Jv> = match b.kind() {
                ValueKind::Seq => b.try_iter()?.collect(),
                _ => vec![b.clone()],
            };
            return minijinja::format_filter(minijinja::FormatStyle::Printf, a.as_str().unwrap_or_default(), &args)
                .map(Jv::from)
                .map_err(|e| type_error(e.detail().unwrap_or("not all arguments converted during string formatting")));
        }
        _ => {}
    }
    Err(unsupported())
}

fn is_list(v: &Jv) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
        && v.downcast_object_ref::<PyDateTime>().is_none()
        && v.downcast_object_ref::<PyDuration>().is_none()
}

fn num_binop(op: BinOp, x: Num, y: Num) -> Result<Jv, Error> {
    let zero_div = || value_error("ZeroDivisionError: division by zero");
    Ok(match (x, y) {
        (Num::Int(a), Num::Int(b)) => match op {
            BinOp::Add => a.checked_add(b).map(int_value).unwrap_or(Jv::from(a as f64 + b as f64)),
            BinOp::Sub => a.checked_sub(b).map(int_value).unwrap_or(Jv::from(a as f64 - b as f64)),
            BinOp::Mul => a.checked_mul(b).map(int_value).unwrap_or(Jv::from(a as f64 * b as f64)),
            BinOp::Div => {
                if b == 0 {
                    return Err(zero_div());
                }
                Jv::from(a as f64 / b as f64)
            }
            BinOp::FloorDiv | BinOp::Mod => {
                if b == 0 {
                    return Err(zero_div());
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
        },
        _ => {
            let (a, b) = (x.f(), y.f());
            match op {
                BinOp::Add => Jv::from(a + b),
                BinOp::Sub => Jv::from(a - b),
                BinOp::Mul => Jv::from(a * b),
                BinOp::Div => {
                    if b == 0.0 {
                        return Err(zero_div());
                    }
                    Jv::from(a / b)
                }
                BinOp::FloorDiv | BinOp::Mod => {
                    if b == 0.0 {
                        return Err(zero_div());
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
            }
        }
    })
}

fn py_neg(a: &Jv) -> Result<Jv, Error> {
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

/// Python's `str.center`: the odd extra space goes left when the width is odd.
fn py_center(s: &str, width: &Jv, fill: char) -> Result<Jv, Error> {
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

/// jinja2's `truncate` (leeway 5, its default policy).
fn filter_truncate(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

/// A unary minus applied to something not a number, in wait of the lookup after it.
#[derive(Debug)]
struct NegPending(Jv);

impl NegPending {
    fn error(&self) -> Error {
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

/// Python's ordering: numbers with numbers, text with text, lists element-wise, datetimes with
/// datetimes of the same kind; anything else a TypeError, an undefined operand jinja2's error.
fn py_compare(a: &Jv, b: &Jv, op: &str) -> Result<Ordering, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(undefined_error("an operand is undefined"));
    }
    py_order(a, b).ok_or_else(|| {
        type_error(format!("'{op}' not supported between instances of '{}' and '{}'", py_type_name(a), py_type_name(b)))
    })
}

fn py_order(a: &Jv, b: &Jv) -> Option<Ordering> {
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
fn py_max_min(name: &str, args: &[Jv], want: Ordering) -> Result<Jv, Error> {
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

/// Python's `str()` of a value (jinja2 prints values with it).
fn py_str(v: &Jv) -> String {
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
fn py_repr(v: &Jv, out: &mut String) {
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

fn map_pairs(v: &Jv) -> Vec<(Jv, Jv)> {
    match v.as_object().and_then(|o| o.try_iter_pairs()) {
        Some(pairs) => pairs.collect(),
        None => Vec::new(),
    }
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and no double quote.
fn py_repr_str(s: &str, out: &mut String) {
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

fn py_repr_bytes(b: &[u8], out: &mut String) {
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
fn py_json(v: &Jv, sort_keys: bool, indent: Option<usize>, level: usize, out: &mut String) -> Result<(), Error> {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
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
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                py_json(item, sort_keys, indent, level + 1, out)?;
            }
            if !items.is_empty() {
                newline(out, level);
            }
            out.push(']');
        }
        ValueKind::Map => {
            let mut pairs: Vec<(String, Jv)> = Vec::new();
            for (k, val) in map_pairs(v) {
                let key = match k.kind() {
                    ValueKind::String => k.as_str().unwrap_or_default().to_string(),
                    ValueKind::Number | ValueKind::Bool | ValueKind::None => {
                        let mut s = String::new();
                        py_json(&k, false, None, 0, &mut s)?;
                        s
                    }
                    _ => {
                        return Err(type_error(format!(
                            "keys must be str, int, float, bool or None, not {}",
                            py_type_name(&k)
                        )));
                    }
                };
                pairs.push((key, val));
            }
            if sort_keys {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, val)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                json_str(k, out);
                out.push_str(": ");
                py_json(val, sort_keys, indent, level + 1, out)?;
            }
            if !pairs.is_empty() {
                newline(out, level);
            }
            out.push('}');
        }
        _ => return Err(type_error(format!("Object of type {} is not JSON serializable", py_type_name(v)))),
    }
    Ok(())
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

// =============================================================================================
// Python methods on values

fn unknown_method(state: &State, value: &Jv, method: &str, args: &[Jv]) -> Result<Jv, Error> {
    if value.is_undefined() {
        return Err(undefined_error(format!("'{method}' called on an undefined value")));
    }
    if value.kind() == ValueKind::String {
        let s = value.as_str().unwrap_or_default();
        match method {
            // Python's str.join wants text items; minijinja-contrib's would print `true`.
            "join" => {
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
                return Ok(Jv::from(parts.join(s)));
            }
            "rsplit" => {
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
                return Ok(Jv::from(parts.into_iter().map(Jv::from).collect::<Vec<_>>()));
            }
            "zfill" => {
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
                return Ok(Jv::from(format!("{sign}{}{digits}", "0".repeat(w as usize - len))));
            }
            "removeprefix" | "removesuffix" => {
                let a = bind(method, args, &["affix"], 1)?;
                let affix = str_arg(&a[0])?;
                let out = if method == "removeprefix" {
                    s.strip_prefix(affix.as_str())
                } else {
                    s.strip_suffix(affix.as_str())
                };
                return Ok(Jv::from(out.unwrap_or(s)));
            }
            "swapcase" => {
                bind(method, args, &[], 0)?;
                return Ok(Jv::from(
                    s.chars()
                        .flat_map(|c| {
                            if c.is_uppercase() {
                                c.to_lowercase().collect::<Vec<_>>()
                            } else {
                                c.to_uppercase().collect()
                            }
                        })
                        .collect::<String>(),
                ));
            }
            "casefold" => {
                bind(method, args, &[], 0)?;
                return Ok(Jv::from(s.to_lowercase()));
            }
            "ljust" | "rjust" | "center" => {
                let a = bind(method, args, &["width", "fillchar"], 1)?;
                let fill = if is_absent(&a[1]) { ' ' } else { str_arg(&a[1])?.chars().next().unwrap_or(' ') };
                if method == "center" {
                    return py_center(s, &a[0], fill);
                }
                let Some(Num::Int(w)) = num(&a[0]) else { return Err(type_error("an integer is required")) };
                let pad = (w - s.chars().count() as i128).max(0) as usize;
                let fill = std::iter::repeat_n(fill, pad).collect::<String>();
                return Ok(Jv::from(if method == "ljust" { format!("{s}{fill}") } else { format!("{fill}{s}") }));
            }
            "index" | "rindex" => {
                let a = bind(method, args, &["sub"], 1)?;
                let sub = str_arg(&a[0])?;
                let found = if method == "index" { s.find(sub.as_str()) } else { s.rfind(sub.as_str()) };
                return match found {
                    Some(i) => Ok(Jv::from(s[..i].chars().count())),
                    None => Err(value_error("substring not found")),
                };
            }
            "partition" | "rpartition" => {
                let a = bind(method, args, &["sep"], 1)?;
                let sep = str_arg(&a[0])?;
                let found = if method == "partition" { s.find(sep.as_str()) } else { s.rfind(sep.as_str()) };
                let parts = match found {
                    Some(i) => [&s[..i], sep.as_str(), &s[i + sep.len()..]],
                    None if method == "partition" => [s, "", ""],
                    None => ["", "", s],
                };
                return Ok(Jv::from(parts.iter().map(|p| Jv::from(*p)).collect::<Vec<_>>()));
            }
            _ => {}
        }
    }
    if is_list(value) && method == "index" {
        let a = bind("index", args, &["value"], 1)?;
        return match value.try_iter()?.position(|x| x == a[0]) {
            Some(i) => Ok(Jv::from(i)),
            None => Err(value_error(format!("{} is not in list", py_str(&a[0])))),
        };
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

// =============================================================================================
// datetime.datetime, datetime.date, datetime.timedelta and isodate.Duration

/// A Python `datetime` (aware when `offset` is set) or, with `is_date`, a `date`.
#[derive(Clone, Debug)]
struct PyDateTime {
    naive: NaiveDateTime,
    offset: Option<FixedOffset>,
    is_date: bool,
    /// str_to_datetime's datetimes carry pytz's UTC (only their repr differs).
    pytz: bool,
}

impl PyDateTime {
    fn now() -> PyDateTime {
        let now = Utc::now();
        let micros = now.timestamp_subsec_micros();
        let naive = now.naive_utc().with_nanosecond(micros * 1000).unwrap_or(now.naive_utc());
        PyDateTime { naive, offset: Some(utc_offset()), is_date: false, pytz: false }
    }

    fn from_utc(dt: &datetime::DateTime, pytz: bool) -> PyDateTime {
        PyDateTime { naive: dt.naive_utc(), offset: Some(utc_offset()), is_date: false, pytz }
    }

    fn date(&self) -> PyDateTime {
        PyDateTime { naive: self.naive.date().and_time(NaiveTime::MIN), offset: None, is_date: true, pytz: false }
    }

    fn into_value(self) -> Jv {
        Jv::from_object(self)
    }

    fn micros_since_epoch(&self) -> i128 {
        let utc = match self.offset {
            Some(o) => self.naive - chrono::TimeDelta::seconds(o.local_minus_utc() as i64),
            None => self.naive,
        };
        utc.and_utc().timestamp() as i128 * 1_000_000 + (utc.nanosecond() / 1000) as i128
    }

    fn add(&self, d: &PyDuration, subtract: bool) -> Result<PyDateTime, Error> {
        let sign = if subtract { -1 } else { 1 };
        let months = sign * (d.years * 12 + d.months);
        let mut micros = sign as i128 * d.micros;
        if self.is_date {
            // date + timedelta uses whole days only.
            micros = micros.div_euclid(86_400_000_000) * 86_400_000_000;
        }
        let naive = datetime::add_to_naive(&Duration::from_micros(months, micros), &self.naive)
            .filter(|n| (1..=9999).contains(&n.year()))
            .ok_or_else(|| value_error("OverflowError: date value out of range"))?;
        Ok(PyDateTime { naive, ..self.clone() })
    }

    fn py_str(&self) -> String {
        if self.is_date {
            return format!("{:04}-{:02}-{:02}", self.naive.year(), self.naive.month(), self.naive.day());
        }
        datetime::isoformat(&self.naive, self.offset, ' ')
    }

    fn py_repr(&self) -> String {
        let n = &self.naive;
        if self.is_date {
            return format!("datetime.date({}, {}, {})", n.year(), n.month(), n.day());
        }
        let mut s = format!("datetime.datetime({}, {}, {}, {}, {}", n.year(), n.month(), n.day(), n.hour(), n.minute());
        let us = n.nanosecond() / 1000;
        if n.second() != 0 || us != 0 {
            let _ = write!(s, ", {}", n.second());
        }
        if us != 0 {
            let _ = write!(s, ", {us}");
        }
        match self.offset {
            Some(o) if o.local_minus_utc() == 0 => {
                s.push_str(if self.pytz { ", tzinfo=<UTC>" } else { ", tzinfo=datetime.timezone.utc" })
            }
            Some(o) => {
                let _ = write!(
                    s,
                    ", tzinfo=datetime.timezone({})",
                    PyDuration::timedelta(o.local_minus_utc() as i128 * 1_000_000).py_repr()
                );
            }
            None => {}
        }
        s.push(')');
        s
    }

    fn strftime(&self, format: &str) -> String {
        datetime::strftime(&self.naive, self.offset, format)
    }
}

fn utc_offset() -> FixedOffset {
    FixedOffset::east_opt(0).unwrap()
}

impl Object for PyDateTime {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        let n = &self.naive;
        Some(match key.as_str()? {
            "year" => Jv::from(n.year()),
            "month" => Jv::from(n.month()),
            "day" => Jv::from(n.day()),
            "hour" if !self.is_date => Jv::from(n.hour()),
            "minute" if !self.is_date => Jv::from(n.minute()),
            "second" if !self.is_date => Jv::from(n.second()),
            "microsecond" if !self.is_date => Jv::from(n.nanosecond() / 1000),
            _ => return None,
        })
    }

    fn call_method(self: &Arc<Self>, _state: &State, method: &str, args: &[Jv]) -> Result<Jv, Error> {
        match method {
            "strftime" => {
                let a = bind("strftime", args, &["format"], 1)?;
                if a[0].kind() != ValueKind::String {
                    return Err(type_error("strftime() argument 1 must be str"));
                }
                Ok(Jv::from(self.strftime(a[0].as_str().unwrap_or_default())))
            }
            "isoformat" => {
                let a = bind("isoformat", args, &["sep", "timespec"], 0)?;
                if self.is_date {
                    return Ok(Jv::from(self.py_str()));
                }
                let sep = if is_absent(&a[0]) { 'T' } else { str_arg(&a[0])?.chars().next().unwrap_or('T') };
                Ok(Jv::from(datetime::isoformat(&self.naive, self.offset, sep)))
            }
            "timestamp" if !self.is_date => {
                bind("timestamp", args, &[], 0)?;
                Ok(Jv::from(self.micros_since_epoch() as f64 / 1_000_000.0))
            }
            "date" if !self.is_date => {
                bind("date", args, &[], 0)?;
                Ok(self.date().into_value())
            }
            "weekday" | "isoweekday" => {
                bind(method, args, &[], 0)?;
                let wd = self.naive.weekday();
                Ok(Jv::from(if method == "weekday" { wd.num_days_from_monday() } else { wd.number_from_monday() }))
            }
            "astimezone" if !self.is_date => {
                bind("astimezone", args, &["tz"], 0)?;
                let utc = self.micros_since_epoch();
                let dt =
                    chrono::DateTime::from_timestamp_micros(utc as i64).ok_or_else(|| value_error("out of range"))?;
                Ok(PyDateTime::from_utc(&dt, false).into_value())
            }
            "replace" => {
                let names = ["year", "month", "day", "hour", "minute", "second", "microsecond"];
                let a = bind("replace", args, &names, 0)?;
                let n = &self.naive;
                let cur = [n.year() as i64, n.month() as i64, n.day() as i64, n.hour() as i64, n.minute() as i64];
                let cur = [cur[0], cur[1], cur[2], cur[3], cur[4], n.second() as i64, (n.nanosecond() / 1000) as i64];
                let mut v = cur;
                for (i, arg) in a.iter().enumerate() {
                    if arg.is_undefined() {
                        continue;
                    }
                    match num(arg) {
                        Some(Num::Int(x)) => v[i] = x as i64,
                        _ => return Err(type_error("an integer is required")),
                    }
                }
                let date = NaiveDate::from_ymd_opt(v[0] as i32, v[1] as u32, v[2] as u32)
                    .ok_or_else(|| value_error("day is out of range for month"))?;
                let time = NaiveTime::from_hms_micro_opt(v[3] as u32, v[4] as u32, v[5] as u32, v[6] as u32)
                    .ok_or_else(|| value_error("time out of range"))?;
                Ok(PyDateTime { naive: date.and_time(time), ..(**self).clone() }.into_value())
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<PyDateTime>()?;
        (self.is_date == other.is_date).then(|| self.micros_since_epoch().cmp(&other.micros_since_epoch()))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.py_str())
    }
}

/// A `datetime.timedelta` or, with years or months, an `isodate.Duration`.
#[derive(Clone, Debug)]
struct PyDuration {
    years: i32,
    months: i32,
    micros: i128,
    is_timedelta: bool,
}

impl PyDuration {
    fn timedelta(micros: i128) -> PyDuration {
        PyDuration { years: 0, months: 0, micros, is_timedelta: true }
    }

    fn neg(&self) -> PyDuration {
        PyDuration { years: -self.years, months: -self.months, micros: -self.micros, is_timedelta: self.is_timedelta }
    }

    fn into_value(self) -> Jv {
        Jv::from_object(self)
    }

    fn py_str(&self) -> String {
        let td = datetime::timedelta_str(self.micros);
        if self.is_timedelta {
            return td;
        }
        let mut parts = Vec::new();
        if self.years != 0 {
            parts.push(format!("{} years", self.years));
        }
        if self.months != 0 {
            parts.push(format!("{} {}", self.months, if self.months <= 1 { "month" } else { "months" }));
        }
        parts.push(td);
        parts.join(", ")
    }

    fn py_repr(&self) -> String {
        let days = self.micros.div_euclid(86_400_000_000);
        let rest = self.micros.rem_euclid(86_400_000_000);
        let (secs, us) = (rest / 1_000_000, rest % 1_000_000);
        let mut fields = Vec::new();
        if days != 0 {
            fields.push(format!("days={days}"));
        }
        if secs != 0 {
            fields.push(format!("seconds={secs}"));
        }
        if us != 0 {
            fields.push(format!("microseconds={us}"));
        }
        let td = if fields.is_empty() {
            "datetime.timedelta(0)".to_string()
        } else {
            format!("datetime.timedelta({})", fields.join(", "))
        };
        if self.is_timedelta {
            td
        } else {
            format!("isodate.duration.Duration({days}, {secs}, {us}, years={}, months={})", self.years, self.months)
        }
    }
}

impl Object for PyDuration {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        let days = self.micros.div_euclid(86_400_000_000);
        let rest = self.micros.rem_euclid(86_400_000_000);
        Some(match key.as_str()? {
            "days" => int_value(days),
            "seconds" => int_value(rest / 1_000_000),
            "microseconds" => int_value(rest % 1_000_000),
            "years" if !self.is_timedelta => Jv::from(self.years),
            "months" if !self.is_timedelta => Jv::from(self.months),
            "tdelta" if !self.is_timedelta => PyDuration::timedelta(self.micros).into_value(),
            _ => return None,
        })
    }

    fn call_method(self: &Arc<Self>, _state: &State, method: &str, args: &[Jv]) -> Result<Jv, Error> {
        match method {
            "total_seconds" if self.is_timedelta => {
                bind("total_seconds", args, &[], 0)?;
                Ok(Jv::from(self.micros as f64 / 1_000_000.0))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<PyDuration>()?;
        Some((self.years * 12 + self.months, self.micros).cmp(&(other.years * 12 + other.months, other.micros)))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.py_str())
    }
}

// =============================================================================================
// The CDK's macros (macros.py)

fn macro_today_with_timezone(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("today_with_timezone", &args, &["timezone"], 1)?;
    let tz = str_arg(&a[0])?;
    // No timezone database in the component: the fixed-offset zones only.
    let offset_hours = match tz.as_str() {
        "UTC" | "Etc/UTC" | "GMT" | "Etc/GMT" | "Etc/UCT" | "UCT" | "Universal" | "Zulu" | "Etc/Zulu" => Some(0),
        t => t.strip_prefix("Etc/GMT").and_then(|n| n.parse::<i64>().ok()).filter(|n| n.abs() <= 14).map(|n| -n),
    };
    let Some(hours) = offset_hours else {
        return Err(value_error(format!(
            "today_with_timezone: unsupported timezone {tz:?} (only UTC and Etc/GMT±N are known)"
        )));
    };
    let now = Utc::now() + chrono::TimeDelta::hours(hours);
    Ok(PyDateTime::from_utc(&now, false).date().into_value())
}

fn macro_timestamp(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("timestamp", &args, &["dt"], 1)?;
    let v = &a[0];
    if v.is_undefined() {
        return Err(undefined_error("timestamp() of an undefined value"));
    }
    match num(v) {
        Some(Num::Int(i)) => Ok(int_value(i)),
        Some(Num::Float(f)) => {
            if !f.is_finite() {
                return Err(value_error("cannot convert float to integer"));
            }
            Ok(int_value(f.trunc() as i128))
        }
        None => {
            let dt = datetime_arg(v)?;
            Ok(Jv::from(dt.micros_since_epoch() as f64 / 1_000_000.0))
        }
    }
}

/// `str_to_datetime` of a text, or a datetime as it is.
fn datetime_arg(v: &Jv) -> Result<PyDateTime, Error> {
    if let Some(d) = v.downcast_object_ref::<PyDateTime>() {
        return Ok(d.clone());
    }
    match v.kind() {
        ValueKind::Undefined => Err(undefined_error("a datetime is undefined")),
        ValueKind::String => {
            let dt = datetime::parse_iso(v.as_str().unwrap_or_default()).map_err(value_error)?;
            Ok(PyDateTime::from_utc(&dt, true))
        }
        _ => Err(type_error(format!("expected a datetime string, got '{}'", py_type_name(v)))),
    }
}

fn macro_str_to_datetime(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("str_to_datetime", &args, &["s"], 1)?;
    datetime_arg(&a[0]).map(PyDateTime::into_value)
}

fn macro_day_delta(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("day_delta", &args, &["num_days", "format"], 1)?;
    let micros = match num(&a[0]) {
        Some(Num::Int(d)) => d * 86_400_000_000,
        Some(Num::Float(d)) => (d * 86_400_000_000.0).round_ties_even() as i128,
        None if a[0].is_undefined() => return Err(undefined_error("day_delta() of an undefined value")),
        None => return Err(type_error("unsupported type for timedelta days component")),
    };
    let format = if a[1].is_undefined() { "%Y-%m-%dT%H:%M:%S.%f%z".to_string() } else { str_arg(&a[1])? };
    let dt = PyDateTime::now().add(&PyDuration::timedelta(micros), false)?;
    Ok(Jv::from(dt.strftime(&format)))
}

fn macro_duration(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("duration", &args, &["datestring"], 1)?;
    if a[0].kind() != ValueKind::String {
        if a[0].is_undefined() {
            return Err(undefined_error("duration() of an undefined value"));
        }
        return Err(type_error(format!("Expecting a string {}", py_str(&a[0]))));
    }
    let p = datetime::parse_duration_parts(a[0].as_str().unwrap_or_default()).map_err(value_error)?;
    Ok(PyDuration { years: p.years, months: p.months, micros: p.duration.total_micros(), is_timedelta: p.is_timedelta }
        .into_value())
}

fn macro_format_datetime(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("format_datetime", &args, &["dt", "format", "input_format"], 2)?;
    let (dt, format) = (&a[0], str_arg(&a[1])?);
    if let Some(d) = dt.downcast_object_ref::<PyDateTime>() {
        // A datetime goes straight to strftime (so `%s` is libc's, `%ms` is minutes-then-s).
        return Ok(Jv::from(d.strftime(&format)));
    }
    let input_format = if is_absent(&a[2]) { None } else { Some(str_arg(&a[2])?) };
    let parsed = match (num(dt), dt.kind()) {
        (_, ValueKind::Undefined) => return Err(undefined_error("format_datetime() of an undefined value")),
        (Some(Num::Int(i)), _) => {
            datetime::parse_with_offset(&i.to_string(), input_format.as_deref().unwrap_or("%s")).map_err(value_error)?
        }
        // The CDK refuses floats; epoch seconds with a fraction are the obvious reading.
        (Some(Num::Float(f)), _) => {
            datetime::parse_with_offset(&datetime::py_float_repr(f), input_format.as_deref().unwrap_or("%s_as_float"))
                .map_err(value_error)?
        }
        (None, ValueKind::String) => {
            let s = dt.as_str().unwrap_or_default();
            match &input_format {
                Some(f) => datetime::parse_with_offset(s, f).map_err(value_error)?,
                None => datetime::parse_iso(s).map_err(value_error)?.fixed_offset(),
            }
        }
        _ => return Err(type_error(format!("format_datetime() cannot read a '{}'", py_type_name(dt)))),
    };
    Ok(Jv::from(datetime::format_with_offset(&parsed, &format)))
}

fn camel_to_snake(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c);
    }
    out.to_lowercase()
}

/// A version 4 UUID from the hasher's per-process random keys and the clock (not for secrets).
fn uuid4() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let state = std::collections::hash_map::RandomState::new();
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_u64(COUNTER.fetch_add(1, AtomicOrdering::Relaxed));
        h.write_u128(Utc::now().timestamp_nanos_opt().unwrap_or_default() as u128);
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

// =============================================================================================
// The CDK's filters (filters.py)

fn filter_hash(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    use sha2::Digest;
    let a = bind("hash", &args, &["hash_type", "salt"], 0)?;
    let hash_type = if a[0].is_undefined() { "md5".to_string() } else { str_arg(&a[0])? };
    let mut data = py_str(&value).into_bytes();
    if a[1].is_true() {
        data.extend(py_str(&a[1]).into_bytes());
    }
    let digest: Vec<u8> = match hash_type.as_str() {
        "md5" => md5::Md5::digest(&data).to_vec(),
        "sha1" => sha1::Sha1::digest(&data).to_vec(),
        "sha224" => sha2::Sha224::digest(&data).to_vec(),
        "sha256" => sha2::Sha256::digest(&data).to_vec(),
        "sha384" => sha2::Sha384::digest(&data).to_vec(),
        "sha512" => sha2::Sha512::digest(&data).to_vec(),
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("ValueError: No hashing function named {other}"),
            ));
        }
    };
    Ok(Jv::from(hex(&digest)))
}

fn filter_hmac(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    use hmac::Mac;
    let a = bind("hmac", &args, &["key", "hash_type"], 1)?;
    let hash_type = if a[1].is_undefined() { "sha256".to_string() } else { str_arg(&a[1])? };
    if hash_type != "sha256" {
        return Err(value_error(format!("Hash type '{hash_type}' is not allowed. Allowed types: sha256")));
    }
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(py_str(&a[0]).as_bytes()).map_err(|e| value_error(e.to_string()))?;
    mac.update(py_str(&value).as_bytes());
    Ok(Jv::from(hex(&mac.finalize().into_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Python's `base64.b64decode` (not validating): characters outside the alphabet are skipped,
/// the padding must be complete.
fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let filtered: String = s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')).collect();
    let data: String = filtered.split('=').next().unwrap_or_default().to_string();
    let pads = filtered[data.len()..].chars().filter(|c| *c == '=').count();
    let needed = match data.len() % 4 {
        0 => 0,
        1 => {
            return Err(
                "Invalid base64-encoded string: number of data characters cannot be 1 more than a multiple of 4".into(),
            );
        }
        r => 4 - r,
    };
    if pads < needed {
        return Err("Incorrect padding".into());
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
            .with_decode_allow_trailing_bits(true),
    );
    engine.decode(data.as_bytes()).map_err(|e| e.to_string())
}

fn filter_string(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("string", &args, &[], 0)?;
    if value.kind() == ValueKind::String {
        return Ok(value);
    }
    let mut s = String::from("\"\"\"");
    py_json(&value, false, None, 0, &mut s)?;
    s.push_str("\"\"\"");
    Ok(Jv::from(s))
}

thread_local! {
    static REGEX_CACHE: crate::datetime::RegexCache = crate::datetime::RegexCache::new();
}

/// A Python regular expression, as far as regex-lite reads the same syntax (no look-around or
/// back-references).
fn py_regex(pattern: &str) -> Result<Rc<regex_lite::Regex>, Error> {
    REGEX_CACHE.with(|cache| {
        cache.get(pattern, || {
            let translated = pattern.replace("\\Z", "\\z");
            regex_lite::Regex::new(&translated).map_err(|e| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!("ValueError: unsupported regular expression {pattern:?}: {e}"),
                )
            })
        })
    })
}

fn text_operand(v: &Jv, what: &str) -> Result<String, Error> {
    match v.kind() {
        ValueKind::String => Ok(v.as_str().unwrap_or_default().to_string()),
        _ => Err(type_error(format!("{what}: expected string or bytes-like object, got '{}'", py_type_name(v)))),
    }
}

fn filter_regex_search(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("regex_search", &args, &["regex"], 1)?;
    let text = text_operand(&value, "regex_search")?;
    let re = py_regex(&str_arg(&a[0])?)?;
    Ok(match re.captures(&text) {
        Some(c) if c.len() > 1 => match c.get(1) {
            Some(m) => Jv::from(m.as_str()),
            // Python's match.group(1) of a group that took no part.
            None => Jv::from(()),
        },
        _ => Jv::from(""),
    })
}

fn filter_regex_replace(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("regex_replace", &args, &["regex", "replacement"], 2)?;
    let text = text_operand(&value, "regex_replace")?;
    let re = py_regex(&str_arg(&a[0])?)?;
    let template = str_arg(&a[1])?;
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for caps in re.captures_iter(&text) {
        let m = caps.get(0).unwrap();
        out.push_str(&text[last..m.start()]);
        expand_py_replacement(&template, &caps, &re, &mut out)?;
        last = m.end();
    }
    out.push_str(&text[last..]);
    Ok(Jv::from(out))
}

/// `re.sub`'s replacement template: `\1`, `\g<1>`, `\g<name>`, and the character escapes.
fn expand_py_replacement(
    t: &str,
    caps: &regex_lite::Captures,
    re: &regex_lite::Regex,
    out: &mut String,
) -> Result<(), Error> {
    let bad = |m: &str| value_error(format!("bad replacement {t:?}: {m}"));
    let group = |i: usize, out: &mut String| -> Result<(), Error> {
        if i >= caps.len() {
            return Err(bad(&format!("invalid group reference {i}")));
        }
        out.push_str(caps.get(i).map_or("", |m| m.as_str()));
        Ok(())
    };
    let chars: Vec<char> = t.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&n) = chars.get(i + 1) else { return Err(bad("bad escape (end of pattern)")) };
        i += 2;
        match n {
            'g' => {
                if chars.get(i) != Some(&'<') {
                    return Err(bad("missing <"));
                }
                let end = chars[i..].iter().position(|c| *c == '>').ok_or_else(|| bad("missing >"))? + i;
                let name: String = chars[i + 1..end].iter().collect();
                i = end + 1;
                match name.parse::<usize>() {
                    Ok(idx) => group(idx, out)?,
                    Err(_) => {
                        let idx = re.capture_names().position(|n| n == Some(name.as_str()));
                        group(idx.ok_or_else(|| bad(&format!("unknown group name '{name}'")))?, out)?;
                    }
                }
            }
            '0' => {
                // \0 and up to two more octal digits: a character.
                let mut oct = String::from("0");
                while oct.len() < 3 && chars.get(i).is_some_and(|c| ('0'..='7').contains(c)) {
                    oct.push(chars[i]);
                    i += 1;
                }
                out.push(char::from_u32(u32::from_str_radix(&oct, 8).unwrap_or(0)).unwrap_or('\0'));
            }
            '1'..='9' => {
                let mut digits = n.to_string();
                if chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
                    digits.push(chars[i]);
                    i += 1;
                }
                group(digits.parse().unwrap_or(0), out)?;
            }
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' => out.push('\\'),
            c if c.is_ascii_alphabetic() => return Err(bad(&format!("bad escape \\{c}"))),
            c => {
                out.push('\\');
                out.push(c);
            }
        }
    }
    Ok(())
}

// =============================================================================================
// jinja2's filters where minijinja's differ

fn filter_int(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

fn filter_float(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

fn filter_join(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("join", &args, &["d", "attribute"], 0)?;
    let sep = if a[0].is_undefined() { String::new() } else { py_str(&a[0]) };
    let mut parts = Vec::new();
    for item in iterate(&value, "join")? {
        let item = if a[1].is_undefined() { item } else { item.get_attr(&py_str(&a[1])).unwrap_or_default() };
        parts.push(py_str(&item));
    }
    Ok(Jv::from(parts.join(&sep)))
}

fn filter_tojson(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

fn filter_round(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

fn filter_urlencode(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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
fn quote(s: &str, safe: &str, plus: bool) -> String {
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

fn filter_length(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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
fn filter_unique(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

fn num_value(n: Num) -> Jv {
    match n {
        Num::Int(i) => int_value(i),
        Num::Float(f) => Jv::from(f),
    }
}

fn filter_format(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    let fmt = str_arg(&value)?;
    let args: Vec<Jv> = args.iter().filter(|a| !a.is_kwargs()).cloned().collect();
    minijinja::format_filter(minijinja::FormatStyle::Printf, &fmt, &args)
        .map(Jv::from)
        .map_err(|e| type_error(e.detail().unwrap_or("not all arguments converted during string formatting")))
}

// =============================================================================================
// ast.literal_eval and the values it gives

/// A Python literal value.
#[derive(Clone, Debug, PartialEq)]
enum Py {
    None,
    Bool(bool),
    Int(i128),
    /// An integer beyond i128, as decimal digits.
    BigInt(String),
    Float(f64),
    Complex(f64, f64),
    Str(String),
    Bytes(Vec<u8>),
    Ellipsis,
    List(Vec<Py>),
    Tuple(Vec<Py>),
    Set(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

impl Py {
    fn from_json(v: &Value) -> Py {
        match v {
            Value::Null => Py::None,
            Value::Bool(b) => Py::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Py::Int(i as i128),
                (_, Some(u)) => Py::Int(u as i128),
                _ => match n.to_string().parse::<i128>() {
                    Ok(i) => Py::Int(i),
                    Err(_) => Py::Float(n.as_f64().unwrap_or(f64::NAN)),
                },
            },
            Value::String(s) => Py::Str(s.clone()),
            Value::Array(items) => Py::List(items.iter().map(Py::from_json).collect()),
            Value::Object(m) => Py::Dict(m.iter().map(|(k, v)| (Py::Str(k.clone()), Py::from_json(v))).collect()),
        }
    }

    fn is_instance(&self, t: PyType) -> bool {
        matches!(
            (self, t),
            (Py::Str(_), PyType::Str)
                | (Py::Int(_) | Py::BigInt(_) | Py::Bool(_), PyType::Int)
                | (Py::Float(_), PyType::Float)
                | (Py::Bool(_), PyType::Bool)
                | (Py::List(_), PyType::List)
                | (Py::Dict(_), PyType::Dict)
        )
    }

    /// `value in FALSE_VALUES` (interpolated_boolean.py), compared with Python's `==`.
    fn is_cdk_false(&self) -> bool {
        match self {
            Py::Str(s) => matches!(s.as_str(), "False" | "false" | "{}" | "[]" | "()" | "" | "0" | "0.0"),
            Py::Bool(b) => !b,
            Py::Int(i) => *i == 0,
            Py::Float(f) => *f == 0.0,
            Py::Complex(r, i) => *r == 0.0 && *i == 0.0,
            Py::Dict(v) => v.is_empty(),
            Py::List(v) | Py::Tuple(v) | Py::Set(v) => v.is_empty(),
            _ => false,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Py::None => Value::Null,
            Py::Bool(b) => Value::Bool(*b),
            Py::Int(i) => match (i64::try_from(*i), u64::try_from(*i)) {
                (Ok(v), _) => Value::from(v),
                (_, Ok(v)) => Value::from(v),
                _ => big_number(&i.to_string()),
            },
            Py::BigInt(s) => big_number(s),
            Py::Float(f) => {
                serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or_else(|| Value::from(self.py_str()))
            }
            Py::Complex(..) | Py::Ellipsis => Value::from(self.py_str()),
            Py::Str(s) => Value::from(s.as_str()),
            Py::Bytes(b) => Value::from(String::from_utf8_lossy(b).into_owned()),
            Py::List(v) | Py::Tuple(v) | Py::Set(v) => Value::Array(v.iter().map(Py::to_json).collect()),
            Py::Dict(pairs) => Value::Object(pairs.iter().map(|(k, v)| (k.json_key(), v.to_json())).collect()),
        }
    }

    /// A dict key as `json.dumps` writes it.
    fn json_key(&self) -> String {
        match self {
            Py::Str(s) => s.clone(),
            Py::None => "null".into(),
            Py::Bool(b) => if *b { "true" } else { "false" }.into(),
            other => other.py_str(),
        }
    }

    fn py_str(&self) -> String {
        match self {
            Py::Str(s) => s.clone(),
            other => {
                let mut s = String::new();
                other.repr(&mut s);
                s
            }
        }
    }

    fn repr(&self, out: &mut String) {
        let seq = |out: &mut String, items: &[Py], open: &str, close: &str, one_comma: bool| {
            out.push_str(open);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                item.repr(out);
            }
            if one_comma && items.len() == 1 {
                out.push(',');
            }
            out.push_str(close);
        };
        match self {
            Py::None => out.push_str("None"),
            Py::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Py::Int(i) => out.push_str(&i.to_string()),
            Py::BigInt(s) => out.push_str(s),
            Py::Float(f) => out.push_str(&datetime::py_float_repr(*f)),
            Py::Complex(r, i) => {
                let imag = |f: f64| {
                    let s = datetime::py_float_repr(f);
                    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
                };
                if *r == 0.0 && r.is_sign_positive() {
                    out.push_str(&format!("{}j", imag(*i)));
                } else {
                    let sign = if *i < 0.0 || (*i == 0.0 && i.is_sign_negative()) { "-" } else { "+" };
                    out.push_str(&format!("({}{sign}{}j)", imag(*r), imag(i.abs())));
                }
            }
            Py::Str(s) => py_repr_str(s, out),
            Py::Bytes(b) => {
                out.push('b');
                py_repr_bytes(b, out);
            }
            Py::Ellipsis => out.push_str("Ellipsis"),
            Py::List(v) => seq(out, v, "[", "]", false),
            Py::Tuple(v) => seq(out, v, "(", ")", true),
            Py::Set(v) if v.is_empty() => out.push_str("set()"),
            Py::Set(v) => seq(out, v, "{", "}", false),
            Py::Dict(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.repr(out);
                    out.push_str(": ");
                    v.repr(out);
                }
                out.push('}');
            }
        }
    }

    fn is_hashable(&self) -> bool {
        match self {
            Py::List(_) | Py::Dict(_) | Py::Set(_) => false,
            Py::Tuple(v) => v.iter().all(Py::is_hashable),
            _ => true,
        }
    }

    /// Python's `==` between hashable literals (1 == 1.0 == True).
    fn key_eq(&self, other: &Py) -> bool {
        let as_num = |p: &Py| -> Option<(f64, f64, Option<i128>)> {
            match p {
                Py::Bool(b) => Some((*b as i32 as f64, 0.0, Some(*b as i128))),
                Py::Int(i) => Some((*i as f64, 0.0, Some(*i))),
                Py::Float(f) => Some((*f, 0.0, None)),
                Py::Complex(r, i) => Some((*r, *i, None)),
                _ => None,
            }
        };
        match (as_num(self), as_num(other)) {
            (Some((_, _, Some(a))), Some((_, _, Some(b)))) => a == b,
            (Some((ar, ai, _)), Some((br, bi, _))) => ar == br && ai == bi,
            _ => match (self, other) {
                (Py::Tuple(a), Py::Tuple(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.key_eq(y)),
                _ => self == other,
            },
        }
    }
}

fn big_number(digits: &str) -> Value {
    // Exact only with serde_json's arbitrary_precision; otherwise keep the digits as text.
    match serde_json::from_str::<serde_json::Number>(digits) {
        Ok(n) if n.to_string() == digits => Value::Number(n),
        _ => Value::from(digits),
    }
}

/// The CDK's `_literal_eval`: the literal when the text is one (and, with `valid`, of a valid
/// type; a complex number only when asked for), else the text itself.
fn literal_eval_typed(text: &str, valid: &[PyType]) -> Py {
    match literal_eval(text) {
        Some(v) if valid.is_empty() && !matches!(v, Py::Complex(..)) => v,
        Some(v) if valid.iter().any(|t| v.is_instance(*t)) => v,
        _ => Py::Str(text.to_string()),
    }
}

/// The deepest nesting of brackets `literal_eval` takes (Python's own tokenizer stops at 200):
/// the parser recurses once per level, and the text is the API's to choose. 32 levels parse on a
/// 256 KiB stack even unoptimised (the guest has 512 KiB); past them the text stays a string.
const MAX_LITERAL_DEPTH: usize = 32;

/// Python's `ast.literal_eval(text)`; `None` where it raises (ValueError, SyntaxError, TypeError).
fn literal_eval(text: &str) -> Option<Py> {
    let text = text.trim_start_matches([' ', '\t']);
    if text.contains('\0') {
        return None;
    }
    let mut p = LitParser { s: text, pos: 0, depth: 0 };
    p.skip_leading_lines()?;
    let node = p.tuple_expr(true)?;
    p.finish()?;
    node.into_value()
}

/// A parsed expression, with what literal_eval needs to know of its shape.
enum Node {
    /// A single constant: a number, string(s), True/False/None or `...` (parentheses vanish).
    Const(Py),
    /// `-x`/`+x` of a numeric constant.
    Signed(Py),
    /// `real ± imaginary`.
    Complex(Py),
    Value(Py),
}

impl Node {
    fn into_value(self) -> Option<Py> {
        match self {
            Node::Const(v) | Node::Signed(v) | Node::Complex(v) | Node::Value(v) => Some(v),
        }
    }
}

struct LitParser<'a> {
    s: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> LitParser<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Blank and comment-only lines before the expression; its own line may not be indented.
    fn skip_leading_lines(&mut self) -> Option<()> {
        loop {
            let rest = self.rest();
            let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
            let line = &rest[..line_end];
            let content = line.trim_start_matches([' ', '\t', '\x0c']);
            if line_end < rest.len() && (content.is_empty() || content.starts_with('#')) {
                let skip = if rest[line_end..].starts_with("\r\n") { 2 } else { 1 };
                self.pos += line_end + skip;
                continue;
            }
            if self.pos > 0 && content.len() != line.len() && !line.starts_with('\x0c') {
                return None; // unexpected indent
            }
            return Some(());
        }
    }

    /// Whitespace, comments, and line continuations; line breaks too inside brackets.
    fn skip_trivia(&mut self) -> Option<()> {
        loop {
            let rest = self.rest();
            let mut chars = rest.chars();
            match chars.next() {
                Some(' ' | '\t' | '\x0c') => self.pos += 1,
                Some('\n' | '\r') if self.depth > 0 => self.pos += 1,
                Some('#') => self.pos += rest.find(['\n', '\r']).unwrap_or(rest.len()),
                Some('\\') => {
                    let after = &rest[1..];
                    let skip = if after.starts_with("\r\n") {
                        2
                    } else if after.starts_with(['\n', '\r']) {
                        1
                    } else {
                        return Some(());
                    };
                    self.pos += 1 + skip;
                    if self.rest().is_empty() {
                        return None; // unexpected EOF after a continuation
                    }
                }
                _ => return Some(()),
            }
        }
    }

    /// After the expression: only blank and comment lines.
    fn finish(&mut self) -> Option<()> {
        self.skip_trivia()?;
        let rest = self.rest();
        if rest.is_empty() {
            return Some(());
        }
        if !rest.starts_with(['\n', '\r']) {
            return None;
        }
        for line in rest.split(['\n', '\r']).skip(1) {
            let content = line.trim_start_matches([' ', '\t', '\x0c']);
            if !(content.is_empty() || content.starts_with('#')) {
                return None;
            }
        }
        // A last line of only whitespace is an unexpected indent.
        let last = rest.rsplit(['\n', '\r']).next().unwrap_or("");
        if !last.is_empty() && last.trim_start_matches([' ', '\t', '\x0c']).is_empty() {
            return None;
        }
        Some(())
    }

    fn eat(&mut self, c: char) -> Option<bool> {
        self.skip_trivia()?;
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            return Some(true);
        }
        Some(false)
    }

    /// `a, b, ...`: a tuple when there is a comma (`allow_tuple`), else the one expression.
    fn tuple_expr(&mut self, allow_tuple: bool) -> Option<Node> {
        let first = self.test()?;
        if !allow_tuple || !self.eat(',')? {
            return Some(first);
        }
        let mut items = vec![first.into_value()?];
        loop {
            self.skip_trivia()?;
            if self.at_expr_end() {
                break;
            }
            items.push(self.test()?.into_value()?);
            if !self.eat(',')? {
                break;
            }
        }
        Some(Node::Value(Py::Tuple(items)))
    }

    fn at_expr_end(&self) -> bool {
        matches!(self.peek(), None | Some(')' | ']' | '}' | '\n' | '\r' | ':'))
    }

    /// A sum of at most two terms: literal_eval allows only `real ± imaginary`.
    fn test(&mut self) -> Option<Node> {
        let left = self.factor()?;
        self.skip_trivia()?;
        let op = match self.peek() {
            Some(c @ ('+' | '-')) => c,
            _ => return Some(left),
        };
        self.pos += 1;
        let right = self.factor()?;
        self.skip_trivia()?;
        if matches!(self.peek(), Some('+' | '-')) {
            return None;
        }
        let real = match &left {
            Node::Const(Py::Int(i)) | Node::Signed(Py::Int(i)) => *i as f64,
            Node::Const(Py::Float(f)) | Node::Signed(Py::Float(f)) => *f,
            _ => return None,
        };
        let Node::Const(Py::Complex(_, imag)) = right else { return None };
        let imag = if op == '-' { -imag } else { imag };
        Some(Node::Complex(Py::Complex(real, imag)))
    }

    fn factor(&mut self) -> Option<Node> {
        self.skip_trivia()?;
        match self.peek() {
            Some(c @ ('+' | '-')) => {
                self.pos += 1;
                // Signs nest as brackets do (`----1` recursed once per sign, without end).
                self.enter()?;
                let inner = self.factor();
                self.depth -= 1;
                match inner? {
                    Node::Const(v @ (Py::Int(_) | Py::Float(_) | Py::Complex(..))) if c == '+' => Some(Node::Signed(v)),
                    Node::Const(Py::Int(i)) => Some(Node::Signed(Py::Int(-i))),
                    Node::Const(Py::Float(f)) => Some(Node::Signed(Py::Float(-f))),
                    Node::Const(Py::Complex(r, i)) => Some(Node::Signed(Py::Complex(-r, -i))),
                    _ => None,
                }
            }
            _ => {
                let atom = self.atom()?;
                // Calls, subscripts and attributes are not literals.
                self.skip_trivia()?;
                if matches!(self.peek(), Some('(' | '[' | '.')) {
                    return None;
                }
                Some(atom)
            }
        }
    }

    /// One bracket deeper, refused past [`MAX_LITERAL_DEPTH`].
    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_LITERAL_DEPTH).then_some(())
    }

    fn atom(&mut self) -> Option<Node> {
        self.skip_trivia()?;
        let c = self.peek()?;
        match c {
            '(' => {
                self.pos += 1;
                self.enter()?;
                let node = if self.eat(')')? {
                    Node::Value(Py::Tuple(Vec::new()))
                } else {
                    let n = self.tuple_expr(true)?;
                    if !self.eat(')')? {
                        return None;
                    }
                    n
                };
                self.depth -= 1;
                Some(node)
            }
            '[' => {
                self.pos += 1;
                self.enter()?;
                let mut items = Vec::new();
                loop {
                    if self.eat(']')? {
                        break;
                    }
                    items.push(self.test()?.into_value()?);
                    if !self.eat(',')? {
                        if !self.eat(']')? {
                            return None;
                        }
                        break;
                    }
                }
                self.depth -= 1;
                Some(Node::Value(Py::List(items)))
            }
            '{' => {
                self.pos += 1;
                self.enter()?;
                let v = self.dict_or_set()?;
                self.depth -= 1;
                Some(Node::Value(v))
            }
            '.' if self.rest().starts_with("...") => {
                self.pos += 3;
                Some(Node::Const(Py::Ellipsis))
            }
            '0'..='9' | '.' => self.number().map(Node::Const),
            '\'' | '"' => self.strings(None).map(Node::Const),
            c if c.is_alphabetic() || c == '_' => {
                let len = self.rest().find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(self.rest().len());
                let word = &self.rest()[..len];
                if self.rest()[len..].starts_with(['\'', '"']) && is_string_prefix(word) {
                    self.pos += len;
                    return self.strings(Some(word)).map(Node::Const);
                }
                self.pos += len;
                match word {
                    "True" => Some(Node::Const(Py::Bool(true))),
                    "False" => Some(Node::Const(Py::Bool(false))),
                    "None" => Some(Node::Const(Py::None)),
                    // set() is the one call literal_eval accepts.
                    "set" => {
                        self.depth += 1;
                        let ok = self.eat('(')? && self.eat(')')?;
                        self.depth -= 1;
                        ok.then_some(Node::Value(Py::Set(Vec::new())))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn dict_or_set(&mut self) -> Option<Py> {
        if self.eat('}')? {
            return Some(Py::Dict(Vec::new()));
        }
        let first = self.test()?.into_value()?;
        if self.eat(':')? {
            let mut pairs: Vec<(Py, Py)> = Vec::new();
            let mut key = first;
            loop {
                let value = self.test()?.into_value()?;
                if !key.is_hashable() {
                    return None; // TypeError: unhashable type
                }
                match pairs.iter_mut().find(|(k, _)| k.key_eq(&key)) {
                    Some(pair) => pair.1 = value,
                    None => pairs.push((key, value)),
                }
                if !self.eat(',')? {
                    break;
                }
                self.skip_trivia()?;
                if self.peek() == Some('}') {
                    break;
                }
                key = self.test()?.into_value()?;
                if !self.eat(':')? {
                    return None;
                }
            }
            if !self.eat('}')? {
                return None;
            }
            return Some(Py::Dict(pairs));
        }
        let mut items: Vec<Py> = Vec::new();
        let mut next = Some(first);
        while let Some(item) = next.take() {
            if !item.is_hashable() {
                return None;
            }
            if !items.iter().any(|i| i.key_eq(&item)) {
                items.push(item);
            }
            if !self.eat(',')? {
                break;
            }
            self.skip_trivia()?;
            if self.peek() != Some('}') {
                next = Some(self.test()?.into_value()?);
            }
        }
        if !self.eat('}')? {
            return None;
        }
        Some(Py::Set(items))
    }

    fn number(&mut self) -> Option<Py> {
        let rest = self.rest();
        let b = rest.as_bytes();
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        // Digits with single underscores between them.
        let digitpart = |from: usize, ok: &dyn Fn(u8) -> bool| -> Option<usize> {
            let mut i = from;
            if i >= b.len() || !ok(b[i]) {
                return None;
            }
            while i < b.len() {
                if ok(b[i]) {
                    i += 1;
                } else if b[i] == b'_' && i + 1 < b.len() && ok(b[i + 1]) {
                    i += 2;
                } else {
                    break;
                }
            }
            Some(i)
        };
        if b[0] == b'0' && b.len() > 1 && matches!(b[1] | 0x20, b'x' | b'o' | b'b') {
            let (radix, ok): (u32, &dyn Fn(u8) -> bool) = match b[1] | 0x20 {
                b'x' => (16, &|c: u8| c.is_ascii_hexdigit()),
                b'o' => (8, &|c: u8| (b'0'..=b'7').contains(&c)),
                _ => (2, &|c: u8| c == b'0' || c == b'1'),
            };
            let start = if b.get(2) == Some(&b'_') { 3 } else { 2 };
            let end = digitpart(start, ok)?;
            if end < b.len() && (ident(b[end]) || b[end] == b'.') {
                return None;
            }
            let v = i128::from_str_radix(&rest[start..end].replace('_', ""), radix).ok()?;
            self.pos += end;
            return Some(Py::Int(v));
        }
        let digit = |c: u8| c.is_ascii_digit();
        let mut i = 0;
        let mut is_float = false;
        if b[0] != b'.' {
            i = digitpart(0, &digit)?;
        }
        if i < b.len() && b[i] == b'.' {
            if b[0] == b'.' && !b.get(1).is_some_and(|c| c.is_ascii_digit()) {
                return None;
            }
            is_float = true;
            i += 1;
            if i < b.len() && digit(b[i]) {
                i = digitpart(i, &digit)?;
            }
        }
        if i < b.len() && (b[i] | 0x20) == b'e' {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            i = digitpart(j, &digit)?;
            is_float = true;
        }
        let imaginary = i < b.len() && (b[i] | 0x20) == b'j';
        if imaginary {
            i += 1;
        }
        if i < b.len() && ident(b[i]) {
            return None;
        }
        let text = rest[..if imaginary { i - 1 } else { i }].replace('_', "");
        self.pos += i;
        if imaginary {
            return Some(Py::Complex(0.0, text.parse().ok()?));
        }
        if is_float {
            return text.parse().ok().map(Py::Float);
        }
        // Leading zeros are only allowed for zero itself.
        if text.len() > 1 && text.starts_with('0') && text.bytes().any(|c| c != b'0') {
            return None;
        }
        if text.len() > 4300 {
            return None;
        }
        Some(match text.parse::<i128>() {
            Ok(v) => Py::Int(v),
            Err(_) => Py::BigInt(text.trim_start_matches('0').to_string()),
        })
    }

    /// One or more adjacent string literals, concatenated.
    fn strings(&mut self, first_prefix: Option<&str>) -> Option<Py> {
        let mut text = String::new();
        let mut bytes: Option<Vec<u8>> = None;
        let mut prefix = first_prefix.map(str::to_ascii_lowercase).unwrap_or_default();
        let mut first = true;
        loop {
            if prefix.contains('f') {
                return None; // an f-string is a JoinedStr, not a constant
            }
            let is_bytes = prefix.contains('b');
            if !first && (bytes.is_some() != is_bytes) {
                return None; // cannot mix bytes and nonbytes literals
            }
            let (s, b) = self.string_literal(prefix.contains('r'), is_bytes)?;
            match b {
                Some(b) => bytes.get_or_insert_with(Vec::new).extend(b),
                None => text.push_str(&s),
            }
            first = false;
            // Another literal may follow, with its own prefix.
            let save = self.pos;
            self.skip_trivia()?;
            let rest = self.rest();
            let len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
            if rest[len..].starts_with(['\'', '"']) && (len == 0 || is_string_prefix(&rest[..len])) {
                prefix = rest[..len].to_ascii_lowercase();
                self.pos += len;
                continue;
            }
            self.pos = save;
            break;
        }
        Some(match bytes {
            Some(b) => Py::Bytes(b),
            None => Py::Str(text),
        })
    }

    fn string_literal(&mut self, raw: bool, is_bytes: bool) -> Option<(String, Option<Vec<u8>>)> {
        let rest = self.rest();
        let q = rest.chars().next()?;
        let triple = rest.starts_with(&format!("{q}{q}{q}"));
        let (open, close): (usize, String) = if triple { (3, format!("{q}{q}{q}")) } else { (1, q.to_string()) };
        let body_start = open;
        let mut i;
        let chars: Vec<(usize, char)> = rest[body_start..].char_indices().map(|(j, c)| (j + body_start, c)).collect();
        let mut k = 0;
        let mut out = String::new();
        let mut out_bytes: Vec<u8> = Vec::new();
        let push = |out: &mut String, out_bytes: &mut Vec<u8>, c: char| -> Option<()> {
            if is_bytes {
                if !c.is_ascii() {
                    return None;
                }
                out_bytes.push(c as u8);
            } else {
                out.push(c);
            }
            Some(())
        };
        loop {
            let &(pos, c) = chars.get(k)?;
            i = pos;
            if rest[pos..].starts_with(close.as_str()) {
                break;
            }
            if !triple && (c == '\n' || c == '\r') {
                return None; // unterminated string literal
            }
            if c != '\\' {
                push(&mut out, &mut out_bytes, c)?;
                k += 1;
                continue;
            }
            let &(_, n) = chars.get(k + 1)?;
            if raw {
                push(&mut out, &mut out_bytes, '\\')?;
                push(&mut out, &mut out_bytes, n)?;
                k += 2;
                continue;
            }
            k += 2;
            let simple = match n {
                '\n' => Some(None),
                '\r' => {
                    if chars.get(k).map(|x| x.1) == Some('\n') {
                        k += 1;
                    }
                    Some(None)
                }
                '\\' => Some(Some('\\')),
                '\'' => Some(Some('\'')),
                '"' => Some(Some('"')),
                'a' => Some(Some('\x07')),
                'b' => Some(Some('\x08')),
                'f' => Some(Some('\x0c')),
                'n' => Some(Some('\n')),
                'r' => Some(Some('\r')),
                't' => Some(Some('\t')),
                'v' => Some(Some('\x0b')),
                _ => None,
            };
            if let Some(ch) = simple {
                if let Some(ch) = ch {
                    push(&mut out, &mut out_bytes, ch)?;
                }
                continue;
            }
            let take_hex = |k: &mut usize, n: usize| -> Option<u32> {
                let s: String = chars.get(*k..*k + n)?.iter().map(|x| x.1).collect();
                if s.len() != n || !s.chars().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                *k += n;
                u32::from_str_radix(&s, 16).ok()
            };
            match n {
                '0'..='7' => {
                    let mut v = n.to_digit(8).unwrap();
                    for _ in 0..2 {
                        match chars.get(k).and_then(|x| x.1.to_digit(8)) {
                            Some(d) => {
                                v = v * 8 + d;
                                k += 1;
                            }
                            None => break,
                        }
                    }
                    if is_bytes {
                        out_bytes.push((v & 0xff) as u8);
                    } else {
                        out.push(char::from_u32(v)?);
                    }
                }
                'x' => {
                    let v = take_hex(&mut k, 2)?;
                    if is_bytes {
                        out_bytes.push(v as u8);
                    } else {
                        out.push(char::from_u32(v)?);
                    }
                }
                'u' | 'U' if !is_bytes => {
                    let mut v = take_hex(&mut k, if n == 'u' { 4 } else { 8 })?;
                    if v > 0x10ffff {
                        return None;
                    }
                    if (0xd800..0xdc00).contains(&v) {
                        // A surrogate pair written as two escapes is one character here.
                        let save = k;
                        let low = (chars.get(k).map(|x| x.1) == Some('\\')
                            && chars.get(k + 1).map(|x| x.1) == Some('u'))
                        .then(|| {
                            k += 2;
                            take_hex(&mut k, 4)
                        })
                        .flatten()
                        .filter(|l| (0xdc00..0xe000).contains(l));
                        match low {
                            Some(l) => v = 0x10000 + ((v - 0xd800) << 10) + (l - 0xdc00),
                            None => k = save,
                        }
                    }
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
                // \N{...} needs the Unicode name table: literal_eval's result is not known here.
                'N' if !is_bytes => return None,
                other => {
                    push(&mut out, &mut out_bytes, '\\')?;
                    push(&mut out, &mut out_bytes, other)?;
                }
            }
        }
        self.pos += i + close.len();
        Some((out, is_bytes.then_some(out_bytes)))
    }
}

fn is_string_prefix(p: &str) -> bool {
    matches!(p.to_ascii_lowercase().as_str(), "r" | "u" | "b" | "br" | "rb" | "f" | "fr" | "rf")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Value {
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
    fn ev(t: &str) -> Value {
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

    // test_macros.py and test_jinja.py: macros
    #[test]
    fn macros() {
        assert_eq!(ev("{{ timestamp(1621439283) }}"), json!(1621439283));
        assert_eq!(ev("{{ timestamp('2021-05-19') }}"), json!(1621382400.0));
        assert_eq!(ev("{{ timestamp('2017-01-01T00:00:00.0Z') }}"), json!(1483228800.0));
        assert_eq!(ev("{{ timestamp('2022-02-28T00:00:00-08:00') }}"), json!(1646035200.0));
        assert_eq!(ev("{{ timestamp('2022-02-28T10:11:12') }}"), json!(1646043072.0));
        assert_eq!(ev("{{ timestamp(100.9) }}"), json!(100));
        assert_eq!(ev("{{ max(1,2) }}"), json!(2));
        assert_eq!(ev("{{ min(1,2) }}"), json!(1));
        assert_eq!(ev("{{ max([2, 3]) }}"), json!(3));
        assert_eq!(ev("{{ min([2, 3]) }}"), json!(2));
        assert_eq!(ev("{{ duration('P1D') }}"), json!("1 day, 0:00:00"));
        assert_eq!(ev("{{ duration('P6DT23H') }}"), json!("6 days, 23:00:00"));
        assert_eq!(ev("{{ duration('P1Y2M3DT4H') }}"), json!("1 years, 2 months, 3 days, 4:00:00"));
        assert_eq!(ev("{{ duration('-P1M') }}"), json!("-1 month, 0:00:00"));
        assert_eq!(ev("{{ duration('P2D').total_seconds() }}"), json!(172800.0));
        assert_eq!(ev("{{ 1 | string }}"), json!("1"));
        assert_eq!(ev("{{ [\"hello\", \"world\"] | string }}"), json!("[\"hello\", \"world\"]"));
        assert_eq!(
            ev("{{ sanitize_url('https://example.com/path?query=value') }}"),
            json!("https%3A%2F%2Fexample.com%2Fpath%3Fquery%3Dvalue")
        );
        assert_eq!(ev("{{ sanitize_url('hello world') }}"), json!("hello+world"));
        assert_eq!(ev("{{ camel_case_to_snake_case('CamelCase_snake_case') }}"), json!("camel_case_snake_case"));
        assert_eq!(ev("{{ str_to_datetime('2022-01-01T13:45:30+05:30') }}"), json!("2022-01-01 08:15:30+00:00"));
        assert_eq!(
            ev("{{ str_to_datetime('2022-01-01T13:45:30.123456Z') }}"),
            json!("2022-01-01 13:45:30.123456+00:00")
        );
        let uuid = ev("{{ generate_uuid() }}");
        let u = uuid.as_str().unwrap();
        assert_eq!((u.len(), &u[14..15]), (36, "4"));
        assert_ne!(uuid, ev("{{ generate_uuid() }}"));
    }

    #[test]
    fn format_datetime_cases() {
        let cases = [
            ("'2022-01-01T01:01:01Z', '%Y-%m-%d'", "2022-01-01"),
            ("'2022-01-01', '%Y-%m-%d'", "2022-01-01"),
            ("'2022-01-01T01:01:01Z', '%Y-%m-%dT%H:%M:%SZ'", "2022-01-01T01:01:01Z"),
            ("'2022-01-01T01:01:01-0800', '%Y-%m-%dT%H:%M:%SZ'", "2022-01-01T09:01:01Z"),
            ("'Sat, 01 Jan 2022 01:01:01 +0000', '%Y-%m-%d', '%a, %d %b %Y %H:%M:%S %z'", "2022-01-01"),
            ("'2022-01-01T01:01:01Z', '%s', '%Y-%m-%dT%H:%M:%SZ'", "1640998861"),
            ("'2022-01-01T01:01:01Z', '%epoch_microseconds', '%Y-%m-%dT%H:%M:%SZ'", "1640998861000000"),
            ("1683729087, '%Y-%m-%dT%H:%M:%SZ'", "2023-05-10T14:31:27Z"),
            ("1640998861000000, '%Y-%m-%dT%H:%M:%SZ', '%epoch_microseconds'", "2022-01-01T01:01:01Z"),
            ("1640998861000, '%Y-%m-%dT%H:%M:%SZ', '%ms'", "2022-01-01T01:01:01Z"),
            ("'2022-01-01T01:01:01+0100', '%Y-%m-%dT%H:%M:%S.%f%z'", "2022-01-01T00:01:01.000000+0000"),
            ("'2022-01-01T01:01:01', '%Y-%m-%dT%H:%M:%S.%f%z'", "2022-01-01T01:01:01.000000+0000"),
            ("'2022-01-01T01:01:01+0100', '%H %z', '%Y-%m-%dT%H:%M:%S%z'", "01 +0100"),
            ("dt='2020-10-01T00:00:00Z', format='%s'", "1601510400"),
            ("str_to_datetime('2022-01-01T01:01:01Z'), '%Y-%m-%dT%H:%M:%SZ'", "2022-01-01T01:01:01Z"),
            ("config.start_date, '%Y/%m/%d'", "2021/01/01"),
        ];
        for (args, want) in cases {
            let t = format!("{{{{ format_datetime({args}) }}}}");
            assert_eq!(Interpolator::new().render(&t, &ctx()).unwrap(), want, "{t}");
        }
    }

    #[test]
    fn datetime_objects_and_arithmetic() {
        let i = Interpolator::new();
        let r = |t: &str| i.render(t, &ctx()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r("{{ (str_to_datetime('2021-09-01') - duration('P1D')).strftime('%Y-%m-%dT%H:%M:%SZ') }}"),
            "2021-08-31T00:00:00Z"
        );
        assert_eq!(r("{{ str_to_datetime('2021-03-31') - duration('P1M') }}"), "2021-02-28 00:00:00+00:00");
        assert_eq!(r("{{ str_to_datetime('2020-02-29') + duration('P1Y') }}"), "2021-02-28 00:00:00+00:00");
        assert_eq!(r("{{ duration('PT1H') + str_to_datetime('2021-01-31') }}"), "2021-01-31 01:00:00+00:00");
        assert_eq!(r("{{ str_to_datetime('2021-01-02') - str_to_datetime('2021-01-01T12:00:00') }}"), "12:00:00");
        assert_eq!(r("{{ (str_to_datetime('2021-01-03') - str_to_datetime('2021-01-01')).days }}"), "2");
        assert_eq!(r("{{ str_to_datetime('2021-01-02') > str_to_datetime('2021-01-01') }}"), "True");
        assert_eq!(
            r("{{ max(str_to_datetime('2021-01-02'), str_to_datetime('2021-01-01')) }}"),
            "2021-01-02 00:00:00+00:00"
        );
        assert_eq!(
            r("{{ str_to_datetime('2021-01-02T03:04:05.123Z').isoformat() }}"),
            "2021-01-02T03:04:05.123000+00:00"
        );
        assert_eq!(r("{{ str_to_datetime('2021-01-02T03:04:05Z').timestamp() }}"), "1609556645.0");
        assert_eq!(r("{{ str_to_datetime('2021-01-02T03:04:05Z').date() }}"), "2021-01-02");
        assert_eq!(r("{{ str_to_datetime('2021-01-02').strftime('%s') }}"), "1609545600");
        assert_eq!(r("{{ str_to_datetime('2021-01-15').replace(day=1).strftime('%Y-%m-%d') }}"), "2021-01-01");
        assert_eq!(r("{{ [str_to_datetime('2021-01-02')] }}"), "[datetime.datetime(2021, 1, 2, 0, 0, tzinfo=<UTC>)]");
        assert_eq!(r("{{ [duration('P1D')] }}"), "[datetime.timedelta(days=1)]");
        // now_utc() and today_utc() print as Python's datetime and date do.
        let now = r("{{ now_utc() }}");
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        assert!(now.starts_with(&today) && now.ends_with("+00:00") && now.as_bytes()[10] == b' ', "{now}");
        assert_eq!(r("{{ today_utc() }}"), today);
        assert_eq!(r("{{ now_utc().strftime('%Y-%m-%d') }}"), today);
        assert_eq!(r("{{ today_utc().strftime('%Y/%m/%d') }}"), today.replace('-', "/"));
        let yesterday = (chrono::Utc::now() - chrono::TimeDelta::days(1)).format("%Y-%m-%d").to_string();
        assert_eq!(r("{{ (now_utc() - duration('P1D')).strftime('%Y-%m-%d') }}"), yesterday);
        assert_eq!(r("{{ today_utc() - duration('P1D') }}"), yesterday);
        assert_eq!(r("{{ day_delta(-1, format='%Y-%m-%d') }}"), yesterday);
        assert!(r("{{ day_delta(1) }}").ends_with("+0000"));
        assert_eq!(r("{{ today_with_timezone('UTC') }}"), today);
        assert!(i.render("{{ today_with_timezone('Pacific/Kiritimati') }}", &ctx()).is_err());
        assert!(i.render("{{ str_to_datetime('invalid-date') }}", &ctx()).is_err());
    }

    // test_filters.py
    #[test]
    fn filters() {
        assert_eq!(ev("{{ 'abcd' | hash('md5') }}"), json!("e2fc714c4727ee9395f324cd2e7f331f"));
        assert_eq!(
            ev("{{ 'test_input_string' | hash('md5', 'test_input_salt') }}"),
            ev("{{ 'test_input_stringtest_input_salt' | hash('md5') }}")
        );
        assert_eq!(
            ev("{{ 'abc' | hash('sha256') }}"),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(ev("{{ 'test_input_client_id' | base64encode }}"), json!("dGVzdF9pbnB1dF9jbGllbnRfaWQ="));
        assert_eq!(ev("{{ '12345' | base64encode }}"), json!("MTIzNDU="));
        assert_eq!(ev("{{ 'aW5wdXRfc3RyaW5n' | base64decode }}"), json!("input_string"));
        assert_eq!(ev("{{ 'YWlyYnl0ZQ==' | base64decode }}"), json!("airbyte"));
        assert_eq!(ev("{{ 'cGFzc3dvcmQ=' | base64decode }}"), json!("password"));
        assert_eq!(
            ev("{{ headers.link | regex_search('<(.*)>; rel=.*') }}"),
            json!("https://this-is-test-link.com/?page=2")
        );
        assert_eq!(ev("{{ headers.link | regex_search('<.*>; rel=.*') }}"), Value::Null);
        assert_eq!(ev("{{ headers.link | regex_search('WATWATWAT') }}"), Value::Null);
        assert_eq!(ev("{{ 'hello world' | regex_replace('world', 'there') }}"), json!("hello there"));
        assert_eq!(ev("{{ 'abc123def456' | regex_replace('[0-9]+', '') }}"), json!("abcdef"));
        assert_eq!(ev("{{ 'aaa bbb aaa' | regex_replace('aaa', 'ccc') }}"), json!("ccc bbb ccc"));
        assert_eq!(ev(r"{{ 'ab' | regex_replace('(?P<x>a)(b)', '\\2\\g<x>') }}"), json!("ba"));
        assert_eq!(
            ev("{{ 'test_message' | hmac('test_secret_key') }}"),
            ev("{{ 'test_message' | hmac('test_secret_key', 'sha256') }}")
        );
        assert_eq!(
            ev("{{ 'what do ya want for nothing?' | hmac('Jefe') }}"),
            json!("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        assert!(Interpolator::new().eval("{{ 'm' | hmac('k', 'md5') }}", &ctx()).is_err());
        for (v, want) in
            [("'hello world'", "hello world"), ("1", "1"), ("1.52", "1.52"), ("True", "true"), ("False", "false")]
        {
            assert_eq!(ev(&format!("{{{{ {v} | string }}}}")), json!(want));
        }
        assert_eq!(ev("{{ config.l | string }}"), json!("[\"a\", \"b\"]"));
        assert_eq!(ev("{{ config.d | string }}"), json!("{\"k\": \"v\"}"));
        assert_eq!(ev("{{ '3.7' | int }}"), json!(3));
        assert_eq!(ev("{{ 'x' | int }}"), json!(0));
        assert_eq!(ev("{{ '0x1A' | int(base=16) }}"), json!(26));
        assert_eq!(ev("{{ 'x' | float }}"), json!(0.0));
        assert_eq!(ev("{{ 2.5 | round }}"), json!(2.0));
        assert_eq!(ev("{{ 2.71828 | round(2) }}"), json!(2.72));
        assert_eq!(ev("{{ {'a': 'b c', 'd': 1} | urlencode }}"), json!("a=b+c&d=1"));
        assert_eq!(ev("{{ 'a/b?c=d&e' | urlencode }}"), json!("a/b%3Fc%3Dd%26e"));
        assert_eq!(ev("{{ record.tags | length }}"), json!(2));
        // `string` wraps non-text in triple quotes, so the joined text reads back as a tuple of texts.
        assert_eq!(ev("{{ [1, 2] | map('string') | join(',') }}"), json!(["1", "2"]));
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
    fn literal_eval_nesting_is_bounded_on_a_small_stack() {
        // 256 KiB: less than the guest's own stack; unbounded recursion overflowed it.
        let result = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let nested = |open: &str, close: &str, n: usize| format!("{}1{}", open.repeat(n), close.repeat(n));
                let ok = [("[", "]"), ("(", ")"), ("{1: ", "}")]
                    .map(|(o, c)| literal_eval(&nested(o, c, MAX_LITERAL_DEPTH)).is_some());
                let refused = [("[", "]"), ("(", ")"), ("{1: ", "}"), ("-(", ")"), ("-", "")]
                    .map(|(o, c)| literal_eval(&nested(o, c, 100_000)).is_none());
                let just_past = literal_eval(&nested("[", "]", MAX_LITERAL_DEPTH + 1)).is_none();
                (ok, refused, just_past)
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(result, ([true; 3], [true; 5], true));
    }

    #[test]
    fn literal_eval_cases() {
        let lit = |s: &str| literal_eval(s).map(|v| v.to_json());
        assert_eq!(lit("1_000"), Some(json!(1000)));
        assert_eq!(lit("0x1f"), Some(json!(31)));
        assert_eq!(lit("01"), None);
        assert_eq!(lit("00"), Some(json!(0)));
        assert_eq!(lit(" \t12  \n"), Some(json!(12)));
        assert_eq!(lit("\n  1"), None);
        assert_eq!(lit("1, 2"), Some(json!([1, 2])));
        assert_eq!(lit("'a' 'b'"), Some(json!("ab")));
        assert_eq!(lit(r"'\x41\u00e9\q'"), Some(json!("Aé\\q")));
        assert_eq!(lit("{'a': 1, 'a': 2}"), Some(json!({"a": 2})));
        assert_eq!(lit("{1: 'a', True: 'b'}"), Some(json!({"1": "b"})));
        assert_eq!(lit("{[1]: 2}"), None);
        assert_eq!(lit("-(1)"), Some(json!(-1)));
        assert_eq!(lit("--1"), None);
        assert_eq!(lit("-True"), None);
        assert_eq!(lit("1+2"), None);
        assert_eq!(lit("1+2j"), Some(json!("(1+2j)")));
        assert_eq!(lit("set()"), Some(json!([])));
        assert_eq!(lit("f'x'"), None);
        assert_eq!(lit("true"), None);
        assert_eq!(lit("2021-01-01"), None);
        assert_eq!(lit("[1, # c\n 2]"), Some(json!([1, 2])));
        assert_eq!(lit("1 \\\n"), None);
        assert_eq!(lit("'''a\nb'''"), Some(json!("a\nb")));
        assert_eq!(lit(r"'\ud83d\ude00'"), Some(json!("😀")));
        assert_eq!(lit("1e400"), Some(json!("inf")));
        // Past 64 bits: text, or the exact number when serde_json keeps arbitrary precision (it
        // does in a workspace build, where the host's features apply).
        let big = lit("123456789012345678901234567890").unwrap();
        assert_eq!(big.to_string().trim_matches('"'), "123456789012345678901234567890", "{big}");
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
