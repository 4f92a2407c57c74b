//! The CDK's filters (airbyte_cdk/sources/declarative/interpolation/filters.py): `hash`,
//! `hmac`, `base64encode`, `base64decode`, `base64binascii_decode`, `string`, `regex_search` and
//! `regex_replace`, with Python's hashlib, base64 and `re` behaviour (`re.sub`'s replacement
//! template included).

use std::rc::Rc;

use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value as Jv};

use super::python::{bind, py_type_name, str_arg};
use super::repr::{py_json, py_str};
use super::{type_error, value_error};

pub(super) fn hash(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

pub(super) fn hmac(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

pub(super) fn base64encode(v: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("base64encode", &args, &[], 0)?;
    Ok(Jv::from(base64_encode(str_arg(&v)?.as_bytes())))
}

pub(super) fn base64decode(v: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("base64decode", &args, &[], 0)?;
    let bytes = base64_decode(&str_arg(&v)?).map_err(value_error)?;
    String::from_utf8(bytes).map(Jv::from).map_err(|_| value_error("'utf-8' codec can't decode the decoded bytes"))
}

pub(super) fn base64binascii_decode(v: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
    bind("base64binascii_decode", &args, &[], 0)?;
    let s = str_arg(&v)?;
    if !s.is_ascii() {
        return Err(value_error("'ascii' codec can't encode the value"));
    }
    Ok(Jv::from(base64_encode(s.as_bytes())))
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

pub(super) fn string(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

pub(super) fn regex_search(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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

pub(super) fn regex_replace(value: Jv, args: Rest<Jv>) -> Result<Jv, Error> {
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
    let r = Replacement { t, caps, re };
    let chars: Vec<char> = t.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&n) = chars.get(i + 1) else { return Err(r.bad("bad escape (end of pattern)")) };
        i += 2;
        match n {
            'g' => i = r.group_reference(&chars, i, out)?,
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
                r.group(digits.parse().unwrap_or(0), out)?;
            }
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' => out.push('\\'),
            c if c.is_ascii_alphabetic() => return Err(r.bad(&format!("bad escape \\{c}"))),
            c => {
                out.push('\\');
                out.push(c);
            }
        }
    }
    Ok(())
}

/// A replacement template applied to one match.
struct Replacement<'a, 'h> {
    t: &'a str,
    caps: &'a regex_lite::Captures<'h>,
    re: &'a regex_lite::Regex,
}

impl Replacement<'_, '_> {
    fn bad(&self, m: &str) -> Error {
        value_error(format!("bad replacement {:?}: {m}", self.t))
    }

    /// The text group `i` matched (nothing for a group that took no part).
    fn group(&self, i: usize, out: &mut String) -> Result<(), Error> {
        if i >= self.caps.len() {
            return Err(self.bad(&format!("invalid group reference {i}")));
        }
        out.push_str(self.caps.get(i).map_or("", |m| m.as_str()));
        Ok(())
    }

    /// `\g<1>` or `\g<name>`, read from `i` (after the `g`): where the reference ends.
    fn group_reference(&self, chars: &[char], i: usize, out: &mut String) -> Result<usize, Error> {
        if chars.get(i) != Some(&'<') {
            return Err(self.bad("missing <"));
        }
        let end = chars[i..].iter().position(|c| *c == '>').ok_or_else(|| self.bad("missing >"))? + i;
        let name: String = chars[i + 1..end].iter().collect();
        match name.parse::<usize>() {
            Ok(idx) => self.group(idx, out)?,
            Err(_) => {
                let idx = self.re.capture_names().position(|n| n == Some(name.as_str()));
                self.group(idx.ok_or_else(|| self.bad(&format!("unknown group name '{name}'")))?, out)?;
            }
        }
        Ok(end + 1)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::interpolation::Interpolator;
    use crate::interpolation::tests::{ctx, ev};

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
}
