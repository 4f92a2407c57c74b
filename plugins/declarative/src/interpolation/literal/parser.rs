//! The parser behind [`super::literal_eval`]: Python's tokenizer rules as far as a literal
//! needs them (whitespace, comments, line continuations, brackets spanning lines, no indent) and
//! the grammar `ast.literal_eval` accepts: constants, `+`/`-` of a number, `real ± imaginary`,
//! tuples, lists, dicts, sets and `set()`. Numbers and strings are read in [`super::tokens`].
//! Each function answers `None` where Python raises.

use super::tokens::is_string_prefix;
use super::{MAX_LITERAL_DEPTH, Py};

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

pub(super) struct LitParser<'a> {
    s: &'a str,
    pub(super) pos: usize,
    depth: usize,
}

impl<'a> LitParser<'a> {
    pub(super) fn new(s: &'a str) -> Self {
        LitParser { s, pos: 0, depth: 0 }
    }

    /// The whole text as one expression (a tuple when it has a comma at the top).
    pub(super) fn parse(mut self) -> Option<Py> {
        self.skip_leading_lines()?;
        let node = self.tuple_expr(true)?;
        self.finish()?;
        node.into_value()
    }

    pub(super) fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    pub(super) fn peek(&self) -> Option<char> {
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
    pub(super) fn skip_trivia(&mut self) -> Option<()> {
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
            '(' | '[' | '{' => {
                self.pos += 1;
                self.enter()?;
                let node = match c {
                    '(' => self.parenthesized()?,
                    '[' => Node::Value(Py::List(self.list_items()?)),
                    _ => Node::Value(self.dict_or_set()?),
                };
                self.depth -= 1;
                Some(node)
            }
            '.' if self.rest().starts_with("...") => {
                self.pos += 3;
                Some(Node::Const(Py::Ellipsis))
            }
            '0'..='9' | '.' => self.number().map(Node::Const),
            '\'' | '"' => self.strings(None).map(Node::Const),
            c if c.is_alphabetic() || c == '_' => self.name(),
            _ => None,
        }
    }

    /// After `(`: `()`, or an expression or tuple and `)`.
    fn parenthesized(&mut self) -> Option<Node> {
        if self.eat(')')? {
            return Some(Node::Value(Py::Tuple(Vec::new())));
        }
        let n = self.tuple_expr(true)?;
        if !self.eat(')')? {
            return None;
        }
        Some(n)
    }

    /// After `[`: items separated by commas (one may trail), and `]`.
    fn list_items(&mut self) -> Option<Vec<Py>> {
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
        Some(items)
    }

    /// A name: `True`, `False`, `None`, `set()`, or the prefix of a string (`b'...'`, `r"..."`).
    fn name(&mut self) -> Option<Node> {
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

    /// After `{`: `{}` (a dict), a dict, or a set.
    fn dict_or_set(&mut self) -> Option<Py> {
        if self.eat('}')? {
            return Some(Py::Dict(Vec::new()));
        }
        let first = self.test()?.into_value()?;
        if self.eat(':')? {
            return self.dict_from(first);
        }
        self.set_from(first)
    }

    /// The rest of a dict after its first key and `:`; a repeated key keeps the last value.
    fn dict_from(&mut self, first: Py) -> Option<Py> {
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
        Some(Py::Dict(pairs))
    }

    /// The rest of a set after its first item; equal items kept once.
    fn set_from(&mut self, first: Py) -> Option<Py> {
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
}
