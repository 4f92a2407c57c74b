//! The checks every value from a guest passes before it is written.

use std::borrow::Cow;

/// Checks a record from a guest: valid JSON, an object, within the size cap. Returns it ready
/// to splice into a line: guest bytes go out verbatim only when they cannot break the line (a
/// newline is legal JSON whitespace and could otherwise forge a message), else minified.
/// Deeper records are refused: `max_depth` (the policy's, 64 by default) stays well under what
/// the host's own parser accepts when it reads records back (128, in state and replay) and what
/// consumers' parsers accept (Python's json recurses).
pub fn checked_record(text: &str, max_bytes: usize, max_depth: usize) -> Result<Cow<'_, str>, String> {
    within_size(text, max_bytes)?;
    let raw: &serde_json::value::RawValue =
        serde_json::from_str(text).map_err(|e| format!("a record is not valid JSON ({e}): {}", preview(text)))?;
    let raw = raw.get();
    if !raw.starts_with('{') {
        return Err(format!("a record must be a JSON object, got: {}", preview(raw)));
    }
    finish(raw, max_depth)
}

/// Refuses a record larger than `max_bytes`, before anything is spent on it.
fn within_size(text: &str, max_bytes: usize) -> Result<(), String> {
    match text.len() > max_bytes {
        true => Err(format!("a record of {} bytes exceeds the limit of {max_bytes} bytes", text.len())),
        false => Ok(()),
    }
}

/// The nesting depth check, and the record as it goes out: verbatim unless a newline outside
/// a string could break the line.
fn finish(raw: &str, max_depth: usize) -> Result<Cow<'_, str>, String> {
    let shape = scan(raw, None).expect("a scan for no key always ends");
    shaped(raw, &shape, max_depth)
}

/// [`finish`] of a record scanned already.
fn shaped<'a>(raw: &'a str, shape: &Scan<'_>, max_depth: usize) -> Result<Cow<'a, str>, String> {
    let depth = shape.depth;
    if depth > max_depth {
        return Err(format!("a record nested {depth} levels deep exceeds the limit of {max_depth} levels"));
    }
    if shape.newline { Ok(Cow::Owned(minify(raw))) } else { Ok(Cow::Borrowed(raw)) }
}

/// [`checked_record`] for a record of an incremental stream: also the cursor value at `field`,
/// with the record parsed once.
pub fn checked_record_with_cursor<'a>(
    text: &'a str,
    max_bytes: usize,
    max_depth: usize,
    field: &[String],
) -> Result<(Cow<'a, str>, Option<serde_json::Value>), String> {
    use serde_json::value::RawValue;
    within_size(text, max_bytes)?;
    let Some((first, rest)) = field.split_first() else {
        return Ok((checked_record(text, max_bytes, max_depth)?, None));
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let found = serde::Deserializer::deserialize_map(&mut deserializer, TopField(first))
        .and_then(|found| deserializer.end().map(|()| found));
    let found: Option<&RawValue> = match found {
        Ok(found) => found,
        // Not an object, or invalid: the general path says which.
        Err(_) => {
            let checked = checked_record(text, max_bytes, max_depth)?;
            let cursor = crate::data::state::cursor_in_text(&checked, field);
            return Ok((checked, cursor));
        }
    };
    let cursor = found.and_then(|v| crate::data::state::cursor_in_text(v.get(), rest));
    Ok((finish(json_trim(text), max_depth)?, cursor))
}

/// [`checked_record_with_cursor`] for a record the host took out of an answer itself
/// ([`crate::net::records`]): valid JSON and an object already, as the API wrote it, so it is not
/// parsed again, only scanned once for its depth, its line breaks and the top-level member the
/// cursor is under (a third of the host's CPU under forwarded pages went to parsing them twice).
/// A top-level key written with escapes sends it the general way. `field` empty: no cursor.
pub fn split_record_with_cursor<'a>(
    text: &'a str,
    max_bytes: usize,
    max_depth: usize,
    field: &[String],
) -> Result<(Cow<'a, str>, Option<serde_json::Value>), String> {
    within_size(text, max_bytes)?;
    let Some((first, rest)) = field.split_first() else {
        return Ok((finish(text, max_depth)?, None));
    };
    let scanned = text.starts_with('{').then(|| scan(text, Some(first))).flatten();
    let Some(found) = scanned else {
        return checked_record_with_cursor(text, max_bytes, max_depth, field);
    };
    let out = shaped(text, &found, max_depth)?;
    let cursor = found.member.and_then(|raw| crate::data::state::cursor_in_text(raw, rest));
    Ok((out, cursor))
}

/// What one scan of valid JSON text finds: the deepest nesting, whether it has a line break
/// (outside strings: inside them JSON allows none), and the text of the top-level member named
/// the key scanned for (the last, if it repeats, as a parser building a map keeps).
struct Scan<'a> {
    depth: usize,
    newline: bool,
    member: Option<&'a str>,
}

/// Scans valid JSON text for [`Scan`], and for the member `key` of a top-level object; `None`
/// when it looks for one and a top-level key has an escape (it may spell `key` another way).
fn scan<'a>(json: &'a str, key: Option<&str>) -> Option<Scan<'a>> {
    let bytes = json.as_bytes();
    let (mut depth, mut deepest, mut newline) = (0usize, 0usize, false);
    let mut member = None;
    // At the top level: whether the next string is a key, whether the key just read is `key`,
    // and where the value of `key` starts (after its colon).
    let (mut expect_key, mut matched, mut value_start) = (false, false, None);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            // A string: jump from quote or backslash to the next (records are mostly strings).
            b'"' => {
                let start = i + 1;
                let mut escaped = false;
                i += 1;
                while let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    i += at + 1;
                    if bytes[i - 1] == b'"' {
                        break;
                    }
                    escaped = true;
                    i += 1;
                }
                if let Some(key) = key
                    && depth == 1
                    && expect_key
                {
                    if escaped {
                        return None;
                    }
                    expect_key = false;
                    matched = &json[start..i - 1] == key;
                }
                continue;
            }
            b':' if depth == 1 && matched => {
                matched = false;
                value_start = Some(i + 1);
            }
            b',' if depth == 1 => {
                if let Some(start) = value_start.take() {
                    member = Some(json_trim(&json[start..i]));
                }
                expect_key = true;
            }
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
                expect_key = depth == 1;
            }
            b'}' | b']' => {
                if depth == 1
                    && let Some(start) = value_start.take()
                {
                    member = Some(json_trim(&json[start..i]));
                }
                depth = depth.saturating_sub(1);
            }
            b'\n' | b'\r' => newline = true,
            _ => {}
        }
        i += 1;
    }
    Some(Scan { depth: deepest, newline, member })
}

/// `text` without the whitespace JSON allows around a value.
fn json_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\n' || c == '\r')
}

/// Walks a JSON object once, validating all of it and keeping the raw value of one top-level
/// field (the last, if it repeats, as a parser building a map would): no map is built.
struct TopField<'f>(&'f str);

impl<'de> serde::de::Visitor<'de> for TopField<'_> {
    type Value = Option<&'de serde_json::value::RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_field) = map.next_key_seed(IsField(self.0))? {
            if is_field {
                found = Some(map.next_value()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A map key, compared with a field name (escaped keys too) without keeping it.
struct IsField<'f>(&'f str);

impl<'de> serde::de::DeserializeSeed<'de> for IsField<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for IsField<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// Drops whitespace outside strings from valid JSON text.
fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}

/// The start of a value, for error messages.
pub fn preview(text: &str) -> String {
    const MAX: usize = 120;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn the_cursor_comes_with_the_checked_record() {
        let field = vec!["updated_at".to_string()];
        for text in [
            "{\"id\":1,\"updated_at\":\"2024\"}",
            " {\"id\":1,\n \"updated_at\": 5}\n",
            "{\"a\\\"b\":1,\"updated_at\":\"x\"}",
            "{\"id\":2}",
            "{\"updated_at\":1,\"updated_at\":2}",
            "{\"updated\\u005fat\":3,\"x\":[1,{\"updated_at\":9}]}",
            "{\"s\":\"a\\\\\",\"updated_at\":\"q\\\"\\\\\"}",
        ] {
            let (checked, cursor) = checked_record_with_cursor(text, 100, 64, &field).unwrap();
            assert_eq!(checked, checked_record(text, 100, 64).unwrap(), "{text}");
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(cursor, crate::data::state::cursor_of(&value, &field), "{text}");
        }
        for bad in ["[1]", "{\"id\":", "\"x\""] {
            assert_eq!(
                checked_record_with_cursor(bad, 100, 64, &field).unwrap_err(),
                checked_record(bad, 100, 64).unwrap_err()
            );
        }
    }

    /// Records the host split out of an answer are scanned, not parsed: the record as it goes
    /// out, the cursor and the refusals are the general path's, for records of every shape
    /// (nested members of the cursor's name, repeated keys, escapes and brackets in strings,
    /// line breaks between members, keys spelled with escapes, which take the general path).
    #[test]
    fn split_records_are_checked_as_guests_records_are() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let fields: [&[&str]; 5] = [&[], &["updated_at"], &["meta", "ts"], &["a\"b"], &["x{"]];
        for _ in 0..4000 {
            let text = random_object(&mut next, 0);
            serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            // As the host splits it: the record's own text, no whitespace around it.
            let text = json_trim(&text);
            for field in fields {
                let field: Vec<String> = field.iter().map(|f| f.to_string()).collect();
                for (max_bytes, max_depth) in [(1 << 20, 64), (1 << 20, 2), (40, 64)] {
                    let split = split_record_with_cursor(text, max_bytes, max_depth, &field);
                    let checked = match field.is_empty() {
                        true => checked_record(text, max_bytes, max_depth).map(|c| (c, None)),
                        false => checked_record_with_cursor(text, max_bytes, max_depth, &field),
                    };
                    assert_eq!(split, checked, "{text} {field:?} {max_bytes} {max_depth}");
                }
            }
        }
    }

    /// A JSON object with members that make a scan's life hard, written with random whitespace.
    fn random_object(next: &mut impl FnMut(usize) -> usize, depth: usize) -> String {
        // As written between the quotes: `a\"b` is the key a"b, `updated\u005fat` is updated_at.
        const KEYS: [&str; 8] = ["updated_at", "meta", "ts", "id", "a\\\"b", "updated\\u005fat", "x{", "q:\\\\"];
        let space = |next: &mut dyn FnMut(usize) -> usize| [" ", "", "\n", "\t", "\r\n "][next(5)];
        let members = next(5);
        let mut text = format!("{}{{", space(next));
        for m in 0..members {
            if m > 0 {
                text.push(',');
            }
            let key = KEYS[next(KEYS.len())];
            text += &format!("{}\"{key}\"{}:{}", space(next), space(next), space(next));
            text += &random_value(next, depth + 1);
            text += space(next);
        }
        text + "}" + space(next)
    }

    fn random_value(next: &mut impl FnMut(usize) -> usize, depth: usize) -> String {
        match next(if depth > 4 { 4 } else { 7 }) {
            0 => next(100_000).to_string(),
            1 => ["\"2024-01-01\"", "\"a}b]\\\"c,\"", "\"\\\\\"", "\"x\\ny\""][next(4)].to_string(),
            2 => ["true", "null", "-1.5e3"][next(3)].to_string(),
            3 => "\"\"".to_string(),
            4 | 5 => random_object(next, depth),
            _ => {
                let items: Vec<String> = (0..next(4)).map(|_| random_value(next, depth + 1)).collect();
                format!("[{}]", items.join(" , "))
            }
        }
    }

    #[test]
    fn records_must_be_objects() {
        assert_eq!(checked_record(r#"{"id":1}"#, 100, 64).unwrap(), r#"{"id":1}"#);
        assert!(checked_record("[1]", 100, 64).unwrap_err().contains("must be a JSON object"));
        assert!(checked_record("{\"id\":", 100, 64).unwrap_err().contains("not valid JSON"));
        assert!(checked_record(r#"{"a":"0123456789"}"#, 10, 64).unwrap_err().contains("exceeds the limit"));
    }

    #[test]
    fn records_nested_too_deep_are_refused() {
        let nested = |depth: usize| format!("{{\"a\":{}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
        assert!(checked_record(&nested(64), 1 << 20, 64).is_ok());
        let err = checked_record(&nested(65), 1 << 20, 64).unwrap_err();
        assert!(err.contains("nested 65 levels deep exceeds the limit of 64"), "{err}");
        let field = vec!["a".to_string()];
        assert!(checked_record_with_cursor(&nested(65), 1 << 20, 64, &field).is_err());
        // Brackets inside strings are text, not nesting.
        assert!(checked_record(&format!("{{\"a\":\"{}\\\"[\"}}", "[".repeat(100)), 1 << 20, 64).is_ok());
    }

    #[test]
    fn newlines_cannot_forge_lines() {
        let hostile = "{\"a\":1,\n\"b\":\"x \\\" \\n {\\\"type\\\":\\\"STATE\\\"}\"\r\n}";
        let checked = checked_record(hostile, 1000, 64).unwrap();
        assert!(!checked.contains('\n') && !checked.contains('\r'));
        let back: Value = serde_json::from_str(&checked).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(hostile).unwrap());
    }
}
