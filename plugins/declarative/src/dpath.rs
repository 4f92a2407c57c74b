//! Deleting from a record as the CDK's `RemoveFields` does, through `dpath.delete` (dpath 2.x):
//! the paths are found first, in dpath's walk order (a node's children, then each child's), and
//! deleted in that order: a mapping's key is removed; a list's last item is removed and any other
//! set to `null`, so the indices of the items after it hold.
//!
//! With a `condition`, dpath's filter replaces the glob: every leaf of the record (a string,
//! number, boolean or null, at any depth) the condition holds for is deleted, wherever it is.

use serde_json::Value;

/// One step of a path: a mapping's key or a list's index.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Deletes every path `glob` matches (`*` and the other `fnmatch` patterns per segment, `**` for
/// any number of segments, at most one); nothing when none does, as `RemoveFields` ignores
/// `PathNotFound`.
pub fn delete_glob(record: &mut Value, glob: &[&str]) {
    if glob.iter().filter(|g| **g == "**").count() > 1 {
        return; // dpath's InvalidGlob, which RemoveFields lets through: the CDK's sync fails.
    }
    let mut found = Vec::new();
    let _: Result<(), ()> = collect(record, &mut Vec::new(), &mut |path, _| Ok(matches(path, glob)), &mut found);
    delete_all(record, &found);
}

/// Deletes every leaf `select` takes (dpath's `afilter`, the condition with `property` bound).
pub fn delete_leaves<E>(record: &mut Value, select: &mut dyn FnMut(&Value) -> Result<bool, E>) -> Result<(), E> {
    let mut found = Vec::new();
    collect(
        record,
        &mut Vec::new(),
        &mut |_, value| if is_leaf(value) { select(value) } else { Ok(false) },
        &mut found,
    )?;
    delete_all(record, &found);
    Ok(())
}

fn is_leaf(value: &Value) -> bool {
    !matches!(value, Value::Object(_) | Value::Array(_))
}

type Select<'a, E> = dyn FnMut(&[Step], &Value) -> Result<bool, E> + 'a;

/// The paths `select` takes, in dpath's `walk` order.
fn collect<E>(
    node: &Value,
    path: &mut Vec<Step>,
    select: &mut Select<'_, E>,
    found: &mut Vec<Vec<Step>>,
) -> Result<(), E> {
    let children: Vec<(Step, &Value)> = match node {
        Value::Object(map) => map.iter().map(|(k, v)| (Step::Key(k.clone()), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (Step::Index(i), v)).collect(),
        _ => return Ok(()),
    };
    for (step, child) in &children {
        path.push(step.clone());
        if select(path, child)? {
            found.push(path.clone());
        }
        path.pop();
    }
    for (step, child) in children {
        path.push(step);
        collect(child, path, select, found)?;
        path.pop();
    }
    Ok(())
}

fn delete_all(record: &mut Value, found: &[Vec<Step>]) {
    for path in found {
        let Some((last, parents)) = path.split_last() else { continue };
        let Some(parent) = parents.iter().try_fold(&mut *record, |node, step| child(node, step)) else { continue };
        match (parent, last) {
            (Value::Object(map), Step::Key(key)) => {
                map.shift_remove(key);
            }
            (Value::Array(items), Step::Index(i)) if *i + 1 == items.len() => {
                items.pop();
            }
            (Value::Array(items), Step::Index(i)) if *i < items.len() => items[*i] = Value::Null,
            _ => {}
        }
    }
}

fn child<'a>(node: &'a mut Value, step: &Step) -> Option<&'a mut Value> {
    match (node, step) {
        (Value::Object(map), Step::Key(key)) => map.get_mut(key),
        (Value::Array(items), Step::Index(i)) => items.get_mut(*i),
        _ => None,
    }
}

/// dpath's `segments.match`: `**` stands for as many `*` as make the lengths equal (or for
/// none, when the glob is one segment longer).
fn matches(path: &[Step], glob: &[&str]) -> bool {
    let expanded: Vec<&str> = match glob.iter().position(|g| *g == "**") {
        Some(at) if path.len() >= glob.len() => {
            let stars = std::iter::repeat_n("*", path.len() - glob.len() + 1);
            glob[..at].iter().copied().chain(stars).chain(glob[at + 1..].iter().copied()).collect()
        }
        Some(at) if path.len() + 1 == glob.len() => glob[..at].iter().chain(&glob[at + 1..]).copied().collect(),
        _ => glob.to_vec(),
    };
    path.len() == expanded.len()
        && path.iter().zip(&expanded).all(|(step, pattern)| match step {
            Step::Key(key) => fnmatch(key, pattern),
            Step::Index(i) => match pattern.parse::<i64>() {
                Ok(n) => n == *i as i64,
                Err(_) => fnmatch(&i.to_string(), pattern),
            },
        })
}

/// Python's `fnmatch.fnmatchcase`: `*`, `?`, `[seq]` and `[!seq]` (ranges `a-z`), case kept.
pub fn fnmatch(text: &str, pattern: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    glob_at(&text, &pattern)
}

/// Matching with one backtracking point (the last `*`), as every other token takes one character:
/// time bounded by the product of the lengths, whatever the pattern (a manifest's) and the text
/// (an API's key).
fn glob_at(text: &[char], pattern: &[char]) -> bool {
    let (mut t, mut p) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while t < text.len() {
        if pattern.get(p) == Some(&'*') {
            last_star = Some((p + 1, t));
            p += 1;
            continue;
        }
        if let Some(used) = pattern.get(p).and_then(|_| one(text[t], &pattern[p..])) {
            t += 1;
            p += used;
            continue;
        }
        match last_star {
            Some((after, from)) => {
                (p, t) = (after, from + 1);
                last_star = Some((after, from + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// How many pattern characters match `c` at the start of `pattern` (not a `*`), if they do.
fn one(c: char, pattern: &[char]) -> Option<usize> {
    match pattern[0] {
        '?' => Some(1),
        '[' => match class(&pattern[1..]) {
            Some(Class { ranges, negated, used }) => {
                (ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != negated).then_some(1 + used)
            }
            // An unclosed `[` is a literal, as fnmatch translates it.
            None => (c == '[').then_some(1),
        },
        literal => (c == literal).then_some(1),
    }
}

/// A `[...]` class of a pattern: its ranges, whether it is negated (`[!...]`), and how many
/// characters it took after its `[` (the closing `]` included).
struct Class {
    ranges: Vec<(char, char)>,
    negated: bool,
    used: usize,
}

fn class(pattern: &[char]) -> Option<Class> {
    let negated = pattern.first() == Some(&'!');
    let mut i = usize::from(negated);
    let mut set = Vec::new();
    let mut first = true;
    while i < pattern.len() {
        let c = pattern[i];
        if c == ']' && !first {
            return Some(Class { ranges: set, negated, used: i + 1 });
        }
        first = false;
        if pattern.get(i + 1) == Some(&'-') && pattern.get(i + 2).is_some_and(|end| *end != ']') {
            set.push((c, pattern[i + 2]));
            i += 3;
        } else {
            set.push((c, c));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What dpath 2.x (under the CDK 7.39.1's RemoveFields) made of these records.
    #[test]
    fn deletes_as_dpath_deletes() {
        let mut r = json!({"a": "", "b": {"c": "", "d": 1, "e": ["x", "", ""]}, "f": ["", "y", ""], "g": null,
                           "h": [{"i": ""}], "j": {"k": ""}, "l": 0, "m": false});
        delete_leaves::<()>(&mut r, &mut |v| Ok(v == &json!(""))).unwrap();
        assert_eq!(
            r,
            json!({"b": {"d": 1, "e": ["x", null]}, "f": [null, "y"], "g": null, "h": [{}], "j": {}, "l": 0, "m": false})
        );
        let mut r = json!({"a": {"b": 2, "c": 3}, "d": [{"e": 1, "f": 2}, {"e": 3}], "g": 1});
        delete_glob(&mut r, &["a", "b"]);
        delete_glob(&mut r, &["d", "*", "e"]);
        assert_eq!(r, json!({"a": {"c": 3}, "d": [{"f": 2}, {}], "g": 1}));
        let mut r = json!({"a": {"b": 2}, "c": [1, 2, 3]});
        delete_glob(&mut r, &["**"]);
        assert_eq!(r, json!({}));
        let mut r = json!({"a": {"b": 2}, "x": 1});
        delete_glob(&mut r, &["a", "**"]);
        assert_eq!(r, json!({"x": 1}), "** may stand for no segment");
        let mut r = json!({"list": [1, 2, 3], "field_a": 1, "field_b": 2, "other": 3});
        delete_glob(&mut r, &["list", "0"]);
        delete_glob(&mut r, &["field_[ab]"]);
        assert_eq!(r, json!({"list": [null, 2, 3], "other": 3}));
    }

    #[test]
    fn fnmatch_as_python() {
        assert!(fnmatch("created_at", "*_at"));
        assert!(fnmatch("a1", "a?"));
        assert!(!fnmatch("A1", "a?"));
        assert!(fnmatch("b", "[!a]"));
        assert!(fnmatch("[x", "[x"));
        assert!(fnmatch("]", "[]]"));
        assert!(fnmatch("abcabd", "*ab?"));
        assert!(!fnmatch("abc", "*b"));
        assert!(fnmatch("", "**"));
        // Many stars against a long text that does not match: no exponential backtracking.
        assert!(!fnmatch(&"a".repeat(5000), &format!("{}b", "a*".repeat(100))));
    }
}
