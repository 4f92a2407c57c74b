//! Python's number and string tokens as `ast.literal_eval` reads them: decimal, hexadecimal,
//! octal and binary integers with `_` between digits (no leading zeros), floats, imaginary
//! numbers, and string and bytes literals with their prefixes (`r`, `b`, `u`; an f-string is not
//! a constant), triple quotes, escapes (octal, `\x`, `\u`, `\U`, surrogate pairs) and the
//! concatenation of adjacent literals.

use super::Py;
use super::parser::LitParser;

impl LitParser<'_> {
    pub(super) fn number(&mut self) -> Option<Py> {
        let b = self.rest().as_bytes();
        if b[0] == b'0' && b.len() > 1 && matches!(b[1] | 0x20, b'x' | b'o' | b'b') {
            return self.radix_int();
        }
        self.decimal()
    }

    /// `0x1f`, `0o17`, `0b101`.
    fn radix_int(&mut self) -> Option<Py> {
        let rest = self.rest();
        let b = rest.as_bytes();
        let (radix, ok): (u32, &dyn Fn(u8) -> bool) = match b[1] | 0x20 {
            b'x' => (16, &|c: u8| c.is_ascii_hexdigit()),
            b'o' => (8, &|c: u8| (b'0'..=b'7').contains(&c)),
            _ => (2, &|c: u8| c == b'0' || c == b'1'),
        };
        let start = if b.get(2) == Some(&b'_') { 3 } else { 2 };
        let end = digit_part(b, start, ok)?;
        if end < b.len() && (is_ident(b[end]) || b[end] == b'.') {
            return None;
        }
        let v = i128::from_str_radix(&rest[start..end].replace('_', ""), radix).ok()?;
        self.pos += end;
        Some(Py::Int(v))
    }

    /// A decimal integer, a float (`1.5`, `.5`, `1e5`) or an imaginary number (`2j`).
    fn decimal(&mut self) -> Option<Py> {
        let rest = self.rest();
        let b = rest.as_bytes();
        let digit = |c: u8| c.is_ascii_digit();
        let mut i = 0;
        let mut is_float = false;
        if b[0] != b'.' {
            i = digit_part(b, 0, &digit)?;
        }
        if i < b.len() && b[i] == b'.' {
            if b[0] == b'.' && !b.get(1).is_some_and(|c| c.is_ascii_digit()) {
                return None;
            }
            is_float = true;
            i += 1;
            if i < b.len() && digit(b[i]) {
                i = digit_part(b, i, &digit)?;
            }
        }
        if i < b.len() && (b[i] | 0x20) == b'e' {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                j += 1;
            }
            i = digit_part(b, j, &digit)?;
            is_float = true;
        }
        let imaginary = i < b.len() && (b[i] | 0x20) == b'j';
        if imaginary {
            i += 1;
        }
        if i < b.len() && is_ident(b[i]) {
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
        decimal_int(&text)
    }

    /// One or more adjacent string literals, concatenated.
    pub(super) fn strings(&mut self, first_prefix: Option<&str>) -> Option<Py> {
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

    /// One string literal (after its prefix): the text, or with `is_bytes` the bytes.
    fn string_literal(&mut self, raw: bool, is_bytes: bool) -> Option<(String, Option<Vec<u8>>)> {
        let rest = self.rest();
        let q = rest.chars().next()?;
        let triple = rest.starts_with(&format!("{q}{q}{q}"));
        let (open, close): (usize, String) = if triple { (3, format!("{q}{q}{q}")) } else { (1, q.to_string()) };
        let chars = rest[open..].char_indices().map(|(j, c)| (j + open, c)).collect();
        let mut body = Body { chars, k: 0, is_bytes, text: String::new(), bytes: Vec::new() };
        let end = loop {
            let &(pos, c) = body.chars.get(body.k)?;
            if rest[pos..].starts_with(close.as_str()) {
                break pos;
            }
            if !triple && (c == '\n' || c == '\r') {
                return None; // unterminated string literal
            }
            if c != '\\' {
                body.push(c)?;
                body.k += 1;
                continue;
            }
            let n = body.at(body.k + 1)?;
            body.k += 2;
            if raw {
                body.push('\\')?;
                body.push(n)?;
            } else {
                body.escape(n)?;
            }
        };
        self.pos += end + close.len();
        Some((body.text, is_bytes.then_some(body.bytes)))
    }
}

pub(super) fn is_string_prefix(p: &str) -> bool {
    matches!(p.to_ascii_lowercase().as_str(), "r" | "u" | "b" | "br" | "rb" | "f" | "fr" | "rf")
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// Digits (those `ok` accepts) with single underscores between them, from `from`: where they
/// end; `None` when there is no digit there.
fn digit_part(b: &[u8], from: usize, ok: &dyn Fn(u8) -> bool) -> Option<usize> {
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
}

/// A decimal integer's digits (underscores taken out); big ones kept as digits.
fn decimal_int(text: &str) -> Option<Py> {
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

/// The body of one string literal as it is read: its characters after the opening quote (with
/// their offsets from there), how far the reading is, and what it has made.
struct Body {
    chars: Vec<(usize, char)>,
    k: usize,
    is_bytes: bool,
    text: String,
    bytes: Vec<u8>,
}

impl Body {
    fn at(&self, k: usize) -> Option<char> {
        self.chars.get(k).map(|x| x.1)
    }

    /// A character as written; a bytes literal takes only ASCII.
    fn push(&mut self, c: char) -> Option<()> {
        if self.is_bytes {
            if !c.is_ascii() {
                return None;
            }
            self.bytes.push(c as u8);
        } else {
            self.text.push(c);
        }
        Some(())
    }

    /// A character by its code (an octal or `\x` escape); in a bytes literal, the byte.
    fn push_code(&mut self, v: u32) -> Option<()> {
        if self.is_bytes {
            self.bytes.push((v & 0xff) as u8);
        } else {
            self.text.push(char::from_u32(v)?);
        }
        Some(())
    }

    /// The escape `\n` (the backslash and `n` already read).
    fn escape(&mut self, n: char) -> Option<()> {
        let c = match n {
            // A line continuation.
            '\n' => return Some(()),
            '\r' => {
                if self.at(self.k) == Some('\n') {
                    self.k += 1;
                }
                return Some(());
            }
            '\\' | '\'' | '"' => n,
            'a' => '\x07',
            'b' => '\x08',
            'f' => '\x0c',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\x0b',
            '0'..='7' => return self.octal(n),
            'x' => {
                let v = self.take_hex(2)?;
                return self.push_code(v);
            }
            'u' | 'U' if !self.is_bytes => return self.unicode(n),
            // \N{...} needs the Unicode name table: literal_eval's result is not known here.
            'N' if !self.is_bytes => return None,
            other => {
                self.push('\\')?;
                return self.push(other);
            }
        };
        self.push(c)
    }

    /// Up to three octal digits, the first already read.
    fn octal(&mut self, first: char) -> Option<()> {
        let mut v = first.to_digit(8).unwrap();
        for _ in 0..2 {
            match self.at(self.k).and_then(|c| c.to_digit(8)) {
                Some(d) => {
                    v = v * 8 + d;
                    self.k += 1;
                }
                None => break,
            }
        }
        self.push_code(v)
    }

    /// `\uXXXX` or `\UXXXXXXXX`; a surrogate pair written as two escapes is one character here.
    fn unicode(&mut self, n: char) -> Option<()> {
        let mut v = self.take_hex(if n == 'u' { 4 } else { 8 })?;
        if v > 0x10ffff {
            return None;
        }
        if (0xd800..0xdc00).contains(&v) {
            let save = self.k;
            let low = (self.at(self.k) == Some('\\') && self.at(self.k + 1) == Some('u'))
                .then(|| {
                    self.k += 2;
                    self.take_hex(4)
                })
                .flatten()
                .filter(|l| (0xdc00..0xe000).contains(l));
            match low {
                Some(l) => v = 0x10000 + ((v - 0xd800) << 10) + (l - 0xdc00),
                None => self.k = save,
            }
        }
        self.text.push(char::from_u32(v).unwrap_or('\u{fffd}'));
        Some(())
    }

    /// `n` hexadecimal digits.
    fn take_hex(&mut self, n: usize) -> Option<u32> {
        let s: String = self.chars.get(self.k..self.k + n)?.iter().map(|x| x.1).collect();
        if s.len() != n || !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.k += n;
        u32::from_str_radix(&s, 16).ok()
    }
}
