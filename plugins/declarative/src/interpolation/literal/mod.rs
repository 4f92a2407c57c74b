//! Python's `ast.literal_eval`, as the CDK's `JinjaInterpolation._literal_eval` applies it to
//! a rendered text (`"5"` → 5, `"['a']"` → a list, `"abc"` stays text), and [`Py`], the values
//! it gives, with what the CDK does with them: `isinstance` checks against `valid_types`,
//! `InterpolatedBoolean`'s false values, Python's `str()` of them, and JSON.

mod parser;
mod tokens;

use serde_json::Value;

use super::PyType;
use super::repr::{py_repr_bytes, py_repr_str};
use crate::datetime;

/// A Python literal value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Py {
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
    pub(super) fn from_json(v: &Value) -> Py {
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
    pub(super) fn is_cdk_false(&self) -> bool {
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

    pub(super) fn to_json(&self) -> Value {
        match self {
            Py::None => Value::Null,
            Py::Bool(b) => Value::Bool(*b),
            Py::Int(i) => match (i64::try_from(*i), u64::try_from(*i)) {
                (Ok(v), _) => Value::from(v),
                (_, Ok(v)) => Value::from(v),
                _ => big_number(&i.to_string()),
            },
            Py::BigInt(s) => big_number(s),
            // JSON has no infinity: the CDK's record writer (orjson) writes `inf` as null.
            Py::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Py::Complex(..) | Py::Ellipsis => Value::from(self.py_str()),
            Py::Str(s) => Value::from(s.as_str()),
            Py::Bytes(b) => Value::from(String::from_utf8_lossy(b).into_owned()),
            Py::List(v) | Py::Tuple(v) | Py::Set(v) => Value::Array(v.iter().map(Py::to_json).collect()),
            Py::Dict(pairs) => Value::Object(pairs.iter().map(|(k, v)| (k.json_key(), v.to_json())).collect()),
        }
    }

    /// A dict key as `json.dumps` writes it.
    pub(super) fn json_key(&self) -> String {
        match self {
            Py::Str(s) => s.clone(),
            Py::None => "null".into(),
            Py::Bool(b) => if *b { "true" } else { "false" }.into(),
            other => other.py_str(),
        }
    }

    pub(super) fn py_str(&self) -> String {
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
pub(super) fn literal_eval_typed(text: &str, valid: &[PyType]) -> Py {
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
    parser::LitParser::new(text).parse()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        assert_eq!(lit("1e400"), Some(Value::Null));
        assert_eq!(lit("-1e400"), Some(Value::Null));
        // Past 64 bits: text, or the exact number when serde_json keeps arbitrary precision (it
        // does in a workspace build, where the host's features apply).
        let big = lit("123456789012345678901234567890").unwrap();
        assert_eq!(big.to_string().trim_matches('"'), "123456789012345678901234567890", "{big}");
    }
}
