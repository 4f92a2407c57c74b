//! JSON Schemas a connector hands the host (its spec, a manifest's spec, stream schemas) are
//! untrusted input the host compiles and runs, so they are bounded before anything is built:
//!
//! - **Depth.** Building a validator recurses once per level of nesting and once per `$ref`
//!   followed, and so does validating with it: a chain of 50,000 `$ref`s overflowed the host's
//!   stack (the process aborted). The longest chain of subschemas and `$ref`s a schema can make
//!   the host follow is measured first, without recursion, and refused past
//!   [`MAX_SCHEMA_DEPTH`]. Where `$ref`s form a cycle (a recursive schema), every schema of the
//!   cycle counts, so the measure never falls short of what any order of building follows.
//!   `$ref`s the host cannot follow itself (to other documents or `$id`s) are refused.
//! - **Patterns.** `pattern` and `patternProperties` are compiled by a regular expression
//!   engine that runs in time linear in the text (the `regex` crate: no backtracking, so no
//!   `^(a|a)*\1b$`, whose backtracking took a minute of host CPU); each pattern's compiled size
//!   is capped, and a schema may hold at most [`MAX_PATTERNS`] of them.

use jsonschema::{PatternOptions, Validator};
use serde_json::Value;
use std::collections::HashMap;

/// The longest chain of nested subschemas and `$ref`s followed, counting every JSON object and
/// array on the way. Real specs are a dozen levels deep; 64 builds, and validates a config as
/// deep, on a 256 KiB stack even unoptimised (about 80 did not).
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// `pattern`s and `patternProperties` keys in one schema.
pub const MAX_PATTERNS: usize = 256;
/// The compiled size of one pattern, and of its lazy DFA's cache, bytes.
const PATTERN_SIZE_LIMIT: usize = 256 << 10;

/// A validator for `schema` (formats checked when `formats`), or why the host will not build
/// one: the schema's bounds first, then the schema itself.
pub fn validator(schema: &Value, formats: bool) -> Result<Validator, String> {
    check_bounds(schema)?;
    jsonschema::options()
        .should_validate_formats(formats)
        .with_pattern_options(PatternOptions::regex().size_limit(PATTERN_SIZE_LIMIT).dfa_size_limit(PATTERN_SIZE_LIMIT))
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Refuses a schema deeper than [`MAX_SCHEMA_DEPTH`] (subschemas and `$ref`s followed) or with
/// more than [`MAX_PATTERNS`] patterns, in time and memory linear in its size.
pub fn check_bounds(schema: &Value) -> Result<(), String> {
    let graph = Graph::of(schema)?;
    if graph.patterns > MAX_PATTERNS {
        return Err(format!(
            "the schema has {} patterns, more than the {MAX_PATTERNS} the host compiles for one schema",
            graph.patterns
        ));
    }
    let depth = graph.longest_path();
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "the schema nests {depth} levels deep (subschemas and $refs followed), more than the \
             {MAX_SCHEMA_DEPTH} the host follows"
        ));
    }
    Ok(())
}

/// Every JSON object and array of a schema as a node; edges to what it contains and to what its
/// `$ref`s name.
struct Graph {
    edges: Vec<Vec<usize>>,
    patterns: usize,
}

impl Graph {
    fn of(root: &Value) -> Result<Graph, String> {
        // Nodes by address, numbered in a walk without recursion.
        let mut ids: HashMap<*const Value, usize> = HashMap::new();
        let mut nodes: Vec<&Value> = Vec::new();
        let mut anchors: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut recursive_anchors = vec![0];
        let mut patterns = 0;
        let mut has_refs = false;
        let mut nested_resource = false;
        let mut todo = vec![root];
        while let Some(value) = todo.pop() {
            let id = nodes.len();
            ids.insert(value as *const Value, id);
            nodes.push(value);
            match value {
                Value::Object(map) => {
                    for (key, member) in map {
                        match (key.as_str(), member) {
                            ("pattern", Value::String(_)) => patterns += 1,
                            ("patternProperties", Value::Object(p)) => patterns += p.len(),
                            ("$ref" | "$dynamicRef" | "$recursiveRef", Value::String(_)) => has_refs = true,
                            ("$anchor" | "$dynamicAnchor", Value::String(name)) => {
                                anchors.entry(name.as_str()).or_default().push(id)
                            }
                            ("$id" | "id", Value::String(name)) => match name.strip_prefix('#') {
                                Some(anchor) => anchors.entry(anchor).or_default().push(id),
                                None if id != 0 => nested_resource = true,
                                None => {}
                            },
                            ("$recursiveAnchor", Value::Bool(true)) => recursive_anchors.push(id),
                            _ => {}
                        }
                        if member.is_object() || member.is_array() {
                            todo.push(member);
                        }
                    }
                }
                Value::Array(items) => todo.extend(items.iter().filter(|v| v.is_object() || v.is_array())),
                _ => {}
            }
        }
        if has_refs && nested_resource {
            return Err("the schema has $refs and $ids of its own resources: the host follows only $refs \
                        within one document (#/..., or #anchor)"
                .to_string());
        }
        let mut edges = vec![Vec::new(); nodes.len()];
        for (id, value) in nodes.iter().enumerate() {
            let children: Box<dyn Iterator<Item = &Value>> = match value {
                Value::Object(map) => Box::new(map.values()),
                Value::Array(items) => Box::new(items.iter()),
                _ => Box::new(std::iter::empty()),
            };
            edges[id].extend(children.filter_map(|c| ids.get(&(c as *const Value)).copied()));
            let Value::Object(map) = value else { continue };
            for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
                let Some(Value::String(target)) = map.get(key) else { continue };
                let fragment = target.strip_prefix('#').ok_or_else(|| {
                    format!(
                        "the schema's $ref {target:?} names another document: the host follows only $refs within one"
                    )
                })?;
                if fragment.is_empty() {
                    edges[id].push(0);
                    if key == "$recursiveRef" {
                        edges[id].extend(recursive_anchors.iter().copied());
                    }
                    continue;
                }
                if !fragment.starts_with('/') {
                    let named = anchors
                        .get(fragment)
                        .ok_or_else(|| format!("the schema's $ref {target:?} names no anchor of the schema"))?;
                    edges[id].extend(named.iter().copied());
                    continue;
                }
                let pointer = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
                let found = root
                    .pointer(&pointer)
                    .and_then(|t| ids.get(&(t as *const Value)))
                    .ok_or_else(|| format!("the schema's $ref {target:?} points at no subschema"))?;
                edges[id].push(*found);
            }
        }
        Ok(Graph { edges, patterns })
    }

    /// The most nodes on any path, a cycle's nodes counted whole: the longest path through the
    /// graph's strongly connected components (Tarjan's, without recursion), each weighing as
    /// many nodes as it has.
    fn longest_path(&self) -> usize {
        let n = self.edges.len();
        const NONE: usize = usize::MAX;
        let (mut index, mut low, mut on_stack) = (vec![NONE; n], vec![0; n], vec![false; n]);
        let mut component = vec![NONE; n];
        let mut longest: Vec<usize> = Vec::new();
        let (mut stack, mut next) = (Vec::new(), 0);
        for start in 0..n {
            if index[start] != NONE {
                continue;
            }
            // (node, next edge to look at)
            let mut calls = vec![(start, 0)];
            index[start] = next;
            low[start] = next;
            next += 1;
            stack.push(start);
            on_stack[start] = true;
            while let Some(&mut (node, ref mut edge)) = calls.last_mut() {
                if let Some(&to) = self.edges[node].get(*edge) {
                    *edge += 1;
                    if index[to] == NONE {
                        index[to] = next;
                        low[to] = next;
                        next += 1;
                        stack.push(to);
                        on_stack[to] = true;
                        calls.push((to, 0));
                    } else if on_stack[to] {
                        low[node] = low[node].min(index[to]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(parent, _)) = calls.last() {
                    low[parent] = low[parent].min(low[node]);
                }
                if low[node] == index[node] {
                    // A component, found after every component it reaches.
                    let id = longest.len();
                    let mut members = Vec::new();
                    loop {
                        let member = stack.pop().expect("the component's nodes are on the stack");
                        on_stack[member] = false;
                        component[member] = id;
                        members.push(member);
                        if member == node {
                            break;
                        }
                    }
                    let below = members
                        .iter()
                        .flat_map(|m| &self.edges[*m])
                        .filter(|to| component[**to] != id)
                        .map(|to| longest[component[*to]])
                        .max()
                        .unwrap_or(0);
                    longest.push(members.len() + below);
                }
            }
        }
        longest.iter().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A chain of `$ref`s `d0 → d1 → … → dN`.
    fn chain(n: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..n {
            defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}));
        }
        defs.insert(format!("d{n}"), json!({"type": "string"}));
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs})
    }

    /// Runs `f` on a 256 KiB stack, as an embedder's small thread would: a stack overflow aborts
    /// the test process instead of returning.
    fn on_a_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new().stack_size(256 << 10).spawn(f).unwrap().join().expect("no panic")
    }

    /// 50,000 `$ref`s in a chain overflowed the stack building the config validator (exit 134,
    /// no error line): refused before anything is built, on a small stack.
    #[test]
    fn a_deep_ref_chain_is_refused_before_it_is_built() {
        let error = on_a_small_stack(|| validator(&chain(50_000), true).err());
        let error = error.expect("refused");
        assert!(error.contains("levels deep") && error.contains(&MAX_SCHEMA_DEPTH.to_string()), "{error}");
    }

    /// What passes the bound builds and validates on a 256 KiB stack: a chain just under it, and
    /// JSON nested just under it.
    #[test]
    fn what_passes_the_bound_builds_and_validates_on_a_small_stack() {
        on_a_small_stack(|| {
            // The chain, and the 4 levels around it (the root, properties, a, $defs).
            let schema = chain(MAX_SCHEMA_DEPTH - 4);
            assert_eq!(check_bounds(&schema), Ok(()));
            let v = validator(&schema, true).unwrap();
            assert!(v.is_valid(&json!({"a": "x"})) && !v.is_valid(&json!({"a": 1})));
            assert!(check_bounds(&chain(MAX_SCHEMA_DEPTH)).is_err());
            // Nested objects: two levels each (the schema and its properties).
            let levels = (MAX_SCHEMA_DEPTH - 1) / 2;
            let (mut nested, mut config) = (json!({"type": "string"}), json!(1));
            for _ in 0..levels {
                nested = json!({"properties": {"x": nested}});
                config = json!({"x": config});
            }
            assert_eq!(check_bounds(&nested), Ok(()));
            let v = validator(&nested, true).unwrap();
            assert_eq!(v.iter_errors(&config).count(), 1, "the innermost value is no string");
            assert!(!v.is_valid(&config));
            assert!(check_bounds(&json!({"properties": {"y": nested}})).is_err(), "one level more");
        });
    }

    /// A recursive schema is fine; a cycle counts all of its schemas, so entering it from
    /// anywhere cannot go deeper than measured.
    #[test]
    fn recursion_counts_each_cycle_whole() {
        let tree = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}
        });
        assert_eq!(check_bounds(&tree), Ok(()));
        let v = validator(&tree, true).unwrap();
        assert!(v.is_valid(&json!({"name": "a", "children": [{"name": "b", "children": []}]})));
        // A long cycle d0 → … → dN → d0 is as deep as a chain of its length.
        let mut cycle = chain(10_000);
        cycle["$defs"]["d10000"] = json!({"$ref": "#/$defs/d0"});
        assert!(check_bounds(&cycle).unwrap_err().contains("levels deep"));
        // Anchors are followed too.
        let mut defs = serde_json::Map::new();
        for i in 0..1000 {
            defs.insert(format!("d{i}"), json!({"$anchor": format!("a{i}"), "$ref": format!("#a{}", i + 1)}));
        }
        defs.insert("d1000".into(), json!({"$anchor": "a1000"}));
        assert!(check_bounds(&json!({"$ref": "#a0", "$defs": defs})).unwrap_err().contains("levels deep"));
    }

    #[test]
    fn refs_the_host_cannot_follow_are_refused() {
        for schema in [
            json!({"$ref": "other.json#/a"}),
            json!({"$ref": "#/$defs/missing"}),
            json!({"$ref": "#nowhere"}),
            json!({"$defs": {"a": {"$id": "http://x/a", "$ref": "#/b"}}}),
        ] {
            assert!(check_bounds(&schema).is_err(), "{schema}");
        }
        let escaped = json!({"$ref": "#/$defs/a~1b%20c", "$defs": {"a/b c": {"type": "string"}}});
        assert_eq!(check_bounds(&escaped), Ok(()));
    }

    /// 1,500 copies of `^(a|a)*\1b$` took 52 s of host CPU against `"a"×42+"!"` with a
    /// backtracking engine. The linear engine refuses backreferences (the schema is not usable)
    /// and runs every other pattern in linear time; a schema holds a bounded number of them.
    #[test]
    fn patterns_run_in_linear_time_and_are_bounded_in_number() {
        let evil = |n: usize| json!({"allOf": vec![json!({"pattern": "^(a|a)*\\1b$"}); n]});
        assert!(validator(&evil(10), true).is_err(), "a backreference is no linear-time pattern");
        let error = validator(&evil(MAX_PATTERNS + 1), true).unwrap_err();
        assert!(error.contains("patterns"), "{error}");
        let nested = json!({"allOf": vec![json!({"pattern": "^(a|aa)*(a|a)*b$"}); MAX_PATTERNS]});
        let v = validator(&nested, true).unwrap();
        let started = std::time::Instant::now();
        assert!(!v.is_valid(&json!(format!("{}!", "a".repeat(10_000)))));
        // Linear: well under a second for 256 patterns over 10,000 characters (a backtracking
        // engine takes longer than the age of the universe).
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
        let props = json!({"patternProperties": {"^x(y|y)*$": {"type": "string"}}});
        assert!(validator(&props, true).unwrap().is_valid(&json!({"xyy": "s"})));
    }
}
