//! Templates compiled through minijinja's parser and code generator, with the instructions for
//! arithmetic, unary minus, comparisons and `~` rewritten into calls of the Python-semantics
//! functions the environment registers (`__py_add` ..., see [`super::env`]); and the context
//! variables a template needs, as jinja2's `meta.find_undeclared_variables` finds them (the CDK
//! refuses a template naming a variable its context lacks).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use minijinja::Error;
use minijinja::machinery::{self, CodeGenerator, Instruction, Instructions, WhitespaceConfig};

/// A template as compiled once, or why it does not compile.
pub(super) enum Compiled {
    Jinja { instructions: Instructions<'static>, vars: Vec<String> },
    Invalid(String),
}

pub(super) fn has_jinja_syntax(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Jinja2's lexer splits the source on `\r\n`, `\r` and `\n` and joins the lines with `\n`,
/// dropping one trailing line end.
/// (minijinja drops that line end itself, so a template to compile keeps it.)
pub(super) fn normalize_newlines(s: &str, drop_trailing: bool) -> std::borrow::Cow<'_, str> {
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

pub(super) fn compile(template: &str) -> Compiled {
    let source = intern(&normalize_newlines(template, false));
    let ast = match machinery::parse(source, "<template>", Default::default(), WhitespaceConfig::default()) {
        Ok(ast) => ast,
        Err(e) => return Compiled::Invalid(syntax_message(&e)),
    };
    let mut g = CodeGenerator::new("<template>", source);
    g.compile_stmt(&ast);
    let (mut instructions, _blocks) = g.finish();
    rewrite_operators(&mut instructions);
    let vars = context_variables(&instructions);
    Compiled::Jinja { instructions, vars }
}

/// Each operator instruction becomes a call of the function giving it Python's semantics.
fn rewrite_operators(instructions: &mut Instructions<'static>) {
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
}

/// The names the template looks up and never assigns: the context variables it needs (read
/// off the instructions: minijinja's `undeclared_variables` misses sliced expressions).
fn context_variables(instructions: &Instructions<'static>) -> Vec<String> {
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
    vars
}

fn syntax_message(e: &Error) -> String {
    let mut m = format!("{}: {}", e.kind(), e.detail().unwrap_or_default());
    if let Some(line) = e.line() {
        m.push_str(&format!(" (line {line})"));
    }
    m
}
