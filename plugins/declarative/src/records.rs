//! From a response to records: decoders (JSON, JSON lines, CSV, XML, gzip), the record selector
//! (DpathExtractor, RecordFilter) and the transformations (AddFields, RemoveFields).

use crate::engine::{Engine, Scope, kind};
use serde_json::{Map, Value, json};
use sluice_guest::{Error, Result};
use std::io::Read;

/// Decompressed bytes a gzip body may grow to: a small bomb must not fill the guest's memory
/// before the sandbox's limit stops it with a less helpful message.
const MAX_INFLATED_BYTES: u64 = 512 << 20;

/// The documents in a body, as the decoder reads them: one for JSON, one a line for JSON lines,
/// one a row for CSV.
pub fn decode(decoder: Option<&Value>, body: &[u8], url: &str) -> Result<Vec<Value>> {
    let name = decoder.map_or("JsonDecoder", kind);
    match name {
        "" | "JsonDecoder" => {
            if body.iter().all(u8::is_ascii_whitespace) {
                return Ok(vec![Value::Object(Map::new())]);
            }
            let doc: Value = serde_json::from_slice(body)
                .map_err(|e| Error::system(format!("{url} answered with a body that is not JSON: {e}")))?;
            // As the CDK's JsonParser: a list is a document per item, and none is one `{}`.
            Ok(match doc {
                Value::Array(items) if items.is_empty() => vec![Value::Object(Map::new())],
                Value::Array(items) => items,
                doc => vec![doc],
            })
        }
        "JsonlDecoder" => {
            let text = std::str::from_utf8(body).map_err(|e| Error::system(format!("{url}: not UTF-8 text: {e}")))?;
            jsonl(text, url)
        }
        "CsvDecoder" => csv(decoder.unwrap_or(&Value::Null), body, url),
        // requests' `iter_lines`: lines split at \n, \r\n and \r, each `{"record": line}`.
        "IterableDecoder" => {
            let text = std::str::from_utf8(body).map_err(|e| Error::system(format!("{url}: not UTF-8 text: {e}")))?;
            let text = text.strip_suffix("\r\n").or_else(|| text.strip_suffix(['\n', '\r'])).unwrap_or(text);
            if text.is_empty() {
                return Ok(Vec::new());
            }
            Ok(text.split("\r\n").flat_map(|l| l.split(['\n', '\r'])).map(|line| json!({"record": line})).collect())
        }
        // As the CDK's: a body that is not XML is one empty document, and a warning.
        "XmlDecoder" => match crate::xml::parse(body) {
            Ok(doc) => Ok(vec![doc]),
            Err(why) => {
                sluice_guest::log::warn(format!("{url} answered with a body that is not XML ({why}): read as {{}}"));
                Ok(vec![Value::Object(Map::new())])
            }
        },
        "GzipDecoder" => {
            let inner = decoder.and_then(|d| d.get("decoder"));
            let looks_gzip = body.starts_with(&[0x1f, 0x8b]);
            if !looks_gzip {
                // The CDK passes a body that is not compressed to the inner decoder as it is.
                return decode(inner, body, url);
            }
            let mut inflated = Vec::new();
            flate2::read::MultiGzDecoder::new(body)
                .take(MAX_INFLATED_BYTES + 1)
                .read_to_end(&mut inflated)
                .map_err(|e| Error::system(format!("{url}: the gzip body does not inflate: {e}")))?;
            if inflated.len() as u64 > MAX_INFLATED_BYTES {
                return Err(Error::system(format!(
                    "{url}: the gzip body inflates to more than {} MiB",
                    MAX_INFLATED_BYTES >> 20
                )));
            }
            decode(inner, &inflated, url)
        }
        other => Err(Error::config(format!("the decoder {other} is not supported"))),
    }
}

pub fn jsonl(text: &str, url: &str) -> Result<Vec<Value>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| Error::system(format!("{url}: line {} is not JSON: {e}", i + 1)))
        })
        .collect()
}

fn csv(decoder: &Value, body: &[u8], url: &str) -> Result<Vec<Value>> {
    let delimiter = match decoder.get("delimiter").and_then(Value::as_str) {
        None => b',',
        Some("\\t") => b'\t',
        Some(d) if d.len() == 1 => d.as_bytes()[0],
        Some(d) => return Err(Error::config(format!("a CsvDecoder delimiter must be one character, got {d:?}"))),
    };
    let nulls: Vec<String> = decoder
        .get("set_values_to_none")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let mut reader = ::csv::ReaderBuilder::new().delimiter(delimiter).flexible(true).from_reader(body);
    let headers =
        reader.headers().map_err(|e| Error::system(format!("{url}: the CSV header does not parse: {e}")))?.clone();
    let mut rows = Vec::new();
    for (i, row) in reader.records().enumerate() {
        let row = row.map_err(|e| Error::system(format!("{url}: CSV row {} does not parse: {e}", i + 1)))?;
        let mut record = Map::new();
        for (name, value) in headers.iter().zip(row.iter()) {
            let v = if nulls.iter().any(|n| n == value) { Value::Null } else { Value::from(value) };
            record.insert(name.to_string(), v);
        }
        rows.push(Value::Object(record));
    }
    Ok(rows)
}

/// The records a DpathExtractor finds in a document (`*` matches every element).
pub fn extract(
    engine: &Engine,
    extractor: Option<&Value>,
    doc: Value,
    ctx: &Value,
    out: &mut Vec<Value>,
) -> Result<()> {
    let mut path = Vec::new();
    if let Some(extractor) = extractor {
        if !matches!(kind(extractor), "DpathExtractor" | "") {
            return Err(Error::config(format!("the extractor {} is not supported", kind(extractor))));
        }
        for p in extractor.get("field_path").and_then(Value::as_array).into_iter().flatten() {
            path.push(engine.text(Some(p), ctx)?);
        }
    }
    dig(doc, &path, out);
    Ok(())
}

fn dig(node: Value, path: &[String], out: &mut Vec<Value>) {
    let Some((first, rest)) = path.split_first() else {
        match node {
            Value::Array(items) => out.extend(items),
            // What Python takes as false (`{}`, `""`, `0`) is no record, as in the CDK's extractor.
            other if crate::engine::is_py_false(&other) => {}
            other => out.push(other),
        }
        return;
    };
    match (node, first.as_str()) {
        (Value::Array(items), "*") => items.into_iter().for_each(|v| dig_one(v, rest, out)),
        (Value::Object(map), "*") => map.into_iter().for_each(|(_, v)| dig_one(v, rest, out)),
        (Value::Object(mut map), key) => {
            if let Some(v) = map.remove(key) {
                dig(v, rest, out)
            }
        }
        (Value::Array(mut items), key) => {
            if let Ok(i) = key.parse::<usize>()
                && i < items.len()
            {
                dig(items.swap_remove(i), rest, out)
            }
        }
        _ => {}
    }
}

/// Below a wildcard each match is one record (a list found there is not flattened again).
fn dig_one(node: Value, path: &[String], out: &mut Vec<Value>) {
    if path.is_empty() {
        if !node.is_null() {
            out.push(node);
        }
    } else {
        dig(node, path, out)
    }
}

/// Applies the record filter and the stream's transformations to the page's records.
pub struct Shaper<'a> {
    pub engine: &'a Engine,
    pub filter: Option<&'a Value>,
    pub transformations: &'a [Value],
    /// The record selector's `transform_before_filtering`: the filter sees transformed records.
    pub transform_first: bool,
    /// The schema records are cast by last (`schema_normalization: Default`, see
    /// [`crate::normalize`]).
    pub schema: Option<std::rc::Rc<Value>>,
    /// A custom `schema_normalization` (a TypeTransformer of components.py) that casts them.
    pub normalizer: Option<&'a Value>,
}

impl<'a> Shaper<'a> {
    /// A stream's record filter (its retriever's record selector), transformations and
    /// normalization; `name` is the stream's (a dynamic schema is fetched once per stream).
    pub fn of(engine: &'a Engine, stream: &'a Value, name: &str) -> Result<Self> {
        let selector = &stream["retriever"]["record_selector"];
        let filter = selector.get("record_filter").filter(|f| !f.is_null());
        let transformations = stream.get("transformations").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let transform_first = selector.get("transform_before_filtering").and_then(Value::as_bool) == Some(true);
        let schema = engine.normalization(stream, name)?;
        let normalizer = selector.get("schema_normalization").filter(|n| crate::custom::is_custom_node(n));
        Ok(Shaper { engine, filter, transformations, transform_first, schema, normalizer })
    }

    pub fn is_noop(&self) -> bool {
        self.only_normalizes() && self.schema.is_none()
    }

    /// Whether nothing filters or transforms the records.
    fn only_normalizes(&self) -> bool {
        !self.has_custom()
            && self.filter.and_then(|f| f.get("condition")).is_none_or(|c| c.as_str().is_some_and(str::is_empty))
            && self.transformations.is_empty()
    }

    /// The records that pass the filter, transformed; `stream` names the stream in errors.
    pub fn shape(&self, records: Vec<Value>, scope: &Scope, stream: &str) -> Result<Vec<Value>> {
        if self.is_noop() {
            return Ok(records);
        }
        // Normalization alone needs no template context.
        if let (Some(schema), true) = (&self.schema, self.only_normalizes()) {
            let mut records = records;
            records.iter_mut().for_each(|record| crate::normalize::normalize(record, schema));
            return Ok(records);
        }
        if self.has_custom() {
            return self.shape_in_stages(records, scope, stream);
        }
        let base = self.engine.context(&Value::Null, scope, Vec::new());
        let mut kept = Vec::with_capacity(records.len());
        for record in records {
            let mut ctx = base.clone();
            ctx["record"] = record;
            let kept_by_filter = match self.transform_first {
                false => self.passes(&mut ctx)? && self.transform_all(&mut ctx, stream)?,
                true => self.transform_all(&mut ctx, stream)? && self.passes(&mut ctx)?,
            };
            if kept_by_filter {
                let mut record = ctx["record"].take();
                if let Some(schema) = &self.schema {
                    crate::normalize::normalize(&mut record, schema);
                }
                kept.push(record);
            }
        }
        Ok(kept)
    }

    /// Whether the filter or a transformation is a custom component.
    fn has_custom(&self) -> bool {
        self.normalizer.is_some()
            || self.filter.is_some_and(crate::custom::is_custom_node)
            || self.transformations.iter().any(crate::custom::is_custom_node)
    }

    /// [`Shaper::shape`] a stage at a time over the whole page, so that custom code is called
    /// once a page (the CDK's `RecordFilter.filter_records` takes the page; its
    /// `RecordTransformation.transform` takes a record, which the runtime calls in a loop).
    fn shape_in_stages(&self, records: Vec<Value>, scope: &Scope, stream: &str) -> Result<Vec<Value>> {
        let mut records = match self.transform_first {
            false => self.transform_page(self.filter_page(records, scope)?, scope, stream)?,
            true => self.filter_page(self.transform_page(records, scope, stream)?, scope)?,
        };
        match (&self.schema, self.normalizer) {
            (Some(schema), Some(normalizer)) => {
                records = crate::custom::normalize(self.engine, normalizer, records, schema)?;
            }
            (Some(schema), None) => records.iter_mut().for_each(|record| crate::normalize::normalize(record, schema)),
            (None, _) => {}
        }
        Ok(records)
    }

    fn filter_page(&self, records: Vec<Value>, scope: &Scope) -> Result<Vec<Value>> {
        match self.filter {
            None => Ok(records),
            Some(f) if crate::custom::is_custom_node(f) => {
                crate::custom::filter_records(self.engine, f, records, scope)
            }
            Some(_) => {
                let base = self.engine.context(&Value::Null, scope, Vec::new());
                let mut kept = Vec::with_capacity(records.len());
                for record in records {
                    let mut ctx = base.clone();
                    ctx["record"] = record;
                    if self.passes(&mut ctx)? {
                        kept.push(ctx["record"].take());
                    }
                }
                Ok(kept)
            }
        }
    }

    fn transform_page(&self, mut records: Vec<Value>, scope: &Scope, stream: &str) -> Result<Vec<Value>> {
        let base = self.engine.context(&Value::Null, scope, Vec::new());
        for t in self.transformations {
            if crate::custom::is_custom_node(t) {
                records = crate::custom::transform(self.engine, t, records, scope)?;
                continue;
            }
            for record in &mut records {
                let mut ctx = base.clone();
                ctx["record"] = std::mem::take(record);
                ctx["parameters"] = params(t);
                self.transform(t, &mut ctx, stream)?;
                *record = ctx["record"].take();
            }
        }
        Ok(records)
    }

    /// Whether `ctx["record"]` passes the record filter.
    fn passes(&self, ctx: &mut Value) -> Result<bool> {
        let Some(f) = self.filter else { return Ok(true) };
        ctx["parameters"] = params(f);
        self.engine.condition(f.get("condition"), ctx)
    }

    /// Applies every transformation whose condition holds; always true (for chaining).
    fn transform_all(&self, ctx: &mut Value, stream: &str) -> Result<bool> {
        for t in self.transformations {
            ctx["parameters"] = params(t);
            self.transform(t, ctx, stream)?;
        }
        Ok(true)
    }

    /// The records that pass, transformed, as the JSON text a page carries; each must be an
    /// object.
    pub fn texts(&self, records: Vec<Value>, scope: &Scope, stream: &str) -> Result<Vec<String>> {
        let shaped = self.shape(records, scope, stream)?;
        let mut texts = Vec::with_capacity(shaped.len());
        for record in shaped {
            if !record.is_object() {
                return Err(Error::system(format!("stream {stream}: a record is not a JSON object: {record}")));
            }
            texts.push(serde_json::to_string(&record)?);
        }
        Ok(texts)
    }

    /// An `AddFields` condition for one field, with `value` and `path` bound as the CDK binds them.
    fn field_condition(&self, t: &Value, ctx: &mut Value, value: &Value, path: &[String]) -> Result<bool> {
        let condition = t.get("condition");
        if condition.is_none_or(|c| c.is_null() || c.as_str() == Some("")) {
            return Ok(true);
        }
        ctx["value"] = value.clone();
        ctx["path"] = path.iter().cloned().map(Value::String).collect();
        let holds = self.engine.condition(condition, ctx);
        if let Value::Object(map) = ctx {
            map.shift_remove("value");
            map.shift_remove("path");
        }
        holds
    }

    /// Applies one transformation to `ctx["record"]`.
    fn transform(&self, t: &Value, ctx: &mut Value, stream: &str) -> Result<()> {
        match kind(t) {
            "AddFields" => {
                for field in t.get("fields").and_then(Value::as_array).into_iter().flatten() {
                    let value = cast(
                        self.engine.value(field.get("value"), ctx)?,
                        field.get("value_type").and_then(Value::as_str),
                    )?;
                    let mut path = Vec::new();
                    for p in field.get("path").and_then(Value::as_array).into_iter().flatten() {
                        path.push(self.engine.text(Some(p), ctx)?);
                    }
                    // The CDK's condition is asked per field, with its value and path.
                    if !self.field_condition(t, ctx, &value, &path)? {
                        continue;
                    }
                    set_path(&mut ctx["record"], &path, value)
                        .map_err(|e| Error::system(format!("stream {stream}: AddFields: {e}")))?;
                }
            }
            "RemoveFields" => {
                let condition = t.get("condition").filter(|c| !c.is_null() && c.as_str() != Some(""));
                for pointer in t.get("field_pointers").and_then(Value::as_array).into_iter().flatten() {
                    let glob: Vec<&str> =
                        pointer.as_array().map(|p| p.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
                    match condition {
                        None => crate::dpath::delete_glob(&mut ctx["record"], &glob),
                        // As the CDK's: dpath's filter, which looks at every leaf, not at the
                        // glob, with the leaf as `property`.
                        Some(condition) => {
                            let mut record = ctx["record"].take();
                            let outcome = crate::dpath::delete_leaves(&mut record, &mut |leaf| {
                                ctx["property"] = leaf.clone();
                                self.engine.condition(Some(condition), ctx)
                            });
                            if let Value::Object(map) = ctx {
                                map.shift_remove("property");
                            }
                            ctx["record"] = record;
                            outcome?;
                        }
                    }
                }
            }
            "KeysToLower" => {
                if let Value::Object(map) = &mut ctx["record"] {
                    *map = std::mem::take(map).into_iter().map(|(k, v)| (k.to_lowercase(), v)).collect();
                }
            }
            "KeysToSnakeCase" => {
                let record = ctx["record"].take();
                ctx["record"] = keys::to_snake_case(record);
            }
            "KeysReplace" => {
                let old = self.engine.text(t.get("old"), ctx)?;
                let new = self.engine.text(t.get("new"), ctx)?;
                let record = ctx["record"].take();
                ctx["record"] = keys::replace(record, &old, &new);
            }
            "FlattenFields" => {
                let lists = t.get("flatten_lists").and_then(Value::as_bool).unwrap_or(true);
                let record = ctx["record"].take();
                ctx["record"] = keys::flatten(record, lists);
            }
            "DpathFlattenFields" => self.dpath_flatten(t, ctx)?,
            other => return Err(Error::config(format!("the transformation {other} is not supported"))),
        }
        Ok(())
    }

    /// DpathFlattenFields: the object at `field_path` merged into the record (unless a key
    /// clashes), or made the record (`replace_record`), keys prefixed or suffixed as asked.
    fn dpath_flatten(&self, t: &Value, ctx: &mut Value) -> Result<()> {
        let mut path = Vec::new();
        for p in t.get("field_path").and_then(Value::as_array).into_iter().flatten() {
            path.push(self.engine.text(Some(p), ctx)?);
        }
        let extracted = match path.iter().any(|p| p == "*") {
            true => {
                let mut found = Vec::new();
                dig(ctx["record"].clone(), &path, &mut found);
                found.into_iter().next()
            }
            false => path.iter().try_fold(&ctx["record"], |node, k| node.get(k)).cloned(),
        };
        let Some(Value::Object(mut extracted)) = extracted else { return Ok(()) };
        if let Some(kt) = t.get("key_transformation").filter(|k| k.is_object()) {
            let prefix = self.engine.text(kt.get("prefix"), ctx)?;
            let suffix = self.engine.text(kt.get("suffix"), ctx)?;
            extracted = extracted.into_iter().map(|(k, v)| (format!("{prefix}{k}{suffix}"), v)).collect();
        }
        let flag = |name: &str| t.get(name).and_then(Value::as_bool) == Some(true);
        let Value::Object(record) = &mut ctx["record"] else { return Ok(()) };
        if flag("replace_record") && !extracted.is_empty() {
            *record = extracted;
        } else if !extracted.keys().any(|k| record.contains_key(k)) {
            if flag("delete_origin_value") {
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                crate::dpath::delete_glob(&mut ctx["record"], &path);
            }
            if let Value::Object(record) = &mut ctx["record"] {
                record.extend(extracted);
            }
        }
        Ok(())
    }
}

/// Key transformations, as the CDK's KeysToSnakeCase, KeysReplace and FlattenFields make them.
mod keys {
    use serde_json::{Map, Value};

    /// `KeysToSnakeCaseTransformation`: every key of every nested object, transliterated to
    /// ASCII, cut into tokens (`[A-Z]+[a-z]*`, `[a-z]+`, digits; anything else separates),
    /// joined by `_` in lower case.
    pub fn to_snake_case(value: Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (snake_key(&k), if v.is_object() { to_snake_case(v) } else { v }))
                    .collect(),
            ),
            other => other,
        }
    }

    fn snake_key(key: &str) -> String {
        let ascii = deunicode::deunicode(key);
        let b = ascii.as_bytes();
        let mut tokens: Vec<String> = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let start = i;
            let take = |i: &mut usize, f: fn(&u8) -> bool| {
                while *i < b.len() && f(&b[*i]) {
                    *i += 1;
                }
            };
            if b[i].is_ascii_uppercase() {
                take(&mut i, u8::is_ascii_uppercase);
                take(&mut i, u8::is_ascii_lowercase);
            } else if b[i].is_ascii_lowercase() {
                take(&mut i, u8::is_ascii_lowercase);
            } else if b[i].is_ascii_digit() {
                take(&mut i, u8::is_ascii_digit);
            } else {
                take(&mut i, |c| !c.is_ascii_alphanumeric());
                tokens.push(String::new());
                continue;
            }
            tokens.push(ascii[start..i].to_string());
        }
        if tokens.len() >= 3 {
            let last = tokens.pop();
            let mut kept: Vec<String> = tokens.drain(..1).collect();
            kept.extend(tokens.into_iter().filter(|t| !t.is_empty()));
            kept.extend(last);
            tokens = kept;
        }
        if tokens.first().is_some_and(|t| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit())) {
            tokens.insert(0, String::new());
        }
        tokens.iter().map(|t| t.to_lowercase()).collect::<Vec<_>>().join("_")
    }

    /// `KeysReplaceTransformation`: `old` replaced by `new` in every key of every nested object.
    pub fn replace(value: Value, old: &str, new: &str) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let k = if old.is_empty() { python_replace_empty(&k, new) } else { k.replace(old, new) };
                        (k, if v.is_object() { replace(v, old, new) } else { v })
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// Python's `str.replace("", new)`: `new` between every character and at both ends.
    fn python_replace_empty(text: &str, new: &str) -> String {
        let mut out = String::from(new);
        for c in text.chars() {
            out.push(c);
            out.push_str(new);
        }
        out
    }

    /// `FlattenFields`: nested objects (and lists, with `flatten_lists`) lifted to the top level,
    /// a key that is already taken (or a list element's) named by its parent path with `.`, in
    /// the order the CDK visits them (a stack: the last field first).
    pub fn flatten(record: Value, lists: bool) -> Value {
        let mut out = Map::new();
        let mut stack = vec![(record, "_".to_string())];
        let mut with_parent = false;
        while let Some((node, parent)) = stack.pop() {
            match node {
                Value::Object(map) => {
                    for (k, v) in map {
                        let key = if out.contains_key(&k) || with_parent { format!("{parent}.{k}") } else { k };
                        stack.push((v, key));
                    }
                }
                Value::Array(items) if lists => {
                    for (i, item) in items.into_iter().enumerate() {
                        with_parent = true;
                        stack.push((item, format!("{parent}.{i}")));
                    }
                }
                other => {
                    out.insert(parent, other);
                }
            }
        }
        Value::Object(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn snake_case_keys_as_the_cdk_cuts_them() {
            for (key, want) in [
                ("CamelCase", "camel_case"),
                ("camelCase", "camel_case"),
                ("HTTPResponse", "httpresponse"),
                ("user id", "user_id"),
                ("1stPlace", "_1_st_place"),
                ("  leading", "_leading"),
                ("trailing  ", "trailing_"),
                ("Créé le", "cree_le"),
                ("a__b", "a_b"),
            ] {
                assert_eq!(snake_key(key), want, "{key}");
            }
            assert_eq!(to_snake_case(json!({"OuterKey": {"InnerKey": 1}})), json!({"outer_key": {"inner_key": 1}}));
        }

        #[test]
        fn keys_are_replaced_at_every_level() {
            assert_eq!(
                replace(json!({"a b": {"c d": 1}, "e": [{"f g": 2}]}), " ", "_"),
                json!({"a_b": {"c_d": 1}, "e": [{"f g": 2}]})
            );
        }

        #[test]
        fn flattening_names_clashes_by_their_parent() {
            let flat = flatten(json!({"id": 1, "nested": {"id": 2, "x": 3}, "list": [4, 5]}), true);
            assert_eq!(flat, json!({"id": 1, "nested.id": 2, "nested.x": 3, "list.0": 4, "list.1": 5}));
            assert_eq!(flatten(json!({"a": {"b": 1}, "c": 2}), true), json!({"c": 2, "b": 1}));
        }
    }
}

fn params(component: &Value) -> Value {
    component.get("$parameters").cloned().unwrap_or_else(|| Value::Object(Map::new()))
}

/// AddFields' `value_type`: the evaluated value made that type.
fn cast(value: Value, to: Option<&str>) -> Result<Value> {
    let bad = |v: &Value, t: &str| Error::system(format!("AddFields: {v} cannot be made a {t}"));
    Ok(match to {
        None => value,
        Some("string") => match value {
            Value::String(_) => value,
            other => Value::from(crate::engine::plain(&other)),
        },
        Some("integer") => match &value {
            Value::Number(n) if n.is_i64() || n.is_u64() => value,
            Value::Number(n) => Value::from(n.as_f64().unwrap_or_default() as i64),
            Value::String(s) => s.trim().parse::<i64>().map(Value::from).map_err(|_| bad(&value, "integer"))?,
            _ => return Err(bad(&value, "integer")),
        },
        Some("number") => match &value {
            Value::Number(_) => value,
            Value::String(s) => s.trim().parse::<f64>().map(Value::from).map_err(|_| bad(&value, "number"))?,
            _ => return Err(bad(&value, "number")),
        },
        Some("boolean") => match &value {
            Value::Bool(_) => value,
            Value::String(s) if s.eq_ignore_ascii_case("true") => Value::Bool(true),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Value::Bool(false),
            _ => return Err(bad(&value, "boolean")),
        },
        Some(other) => return Err(Error::config(format!("AddFields value_type {other:?} is not supported"))),
    })
}

fn set_path(record: &mut Value, path: &[String], value: Value) -> std::result::Result<(), String> {
    let (last, parents) = path.split_last().ok_or("an empty path")?;
    let mut node = record;
    for key in parents {
        let map = node.as_object_mut().ok_or_else(|| format!("{key:?} is not inside an object"))?;
        node = map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
    }
    node.as_object_mut().ok_or_else(|| format!("{last:?} is not inside an object"))?.insert(last.clone(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dug(doc: Value, path: &[&str]) -> Vec<Value> {
        let mut out = Vec::new();
        dig(doc, &path.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &mut out);
        out
    }

    #[test]
    fn dpath_extracts_lists_objects_and_wildcards() {
        assert_eq!(dug(json!({"data": [{"a": 1}, {"a": 2}]}), &["data"]), vec![json!({"a": 1}), json!({"a": 2})]);
        assert_eq!(dug(json!({"data": {"a": 1}}), &["data"]), vec![json!({"a": 1})]);
        assert_eq!(dug(json!([{"a": 1}]), &[]), vec![json!({"a": 1})]);
        assert!(dug(json!({"other": []}), &["data"]).is_empty());
        assert_eq!(
            dug(json!({"groups": [{"items": {"x": 1}}, {"items": {"x": 2}}]}), &["groups", "*", "items"]),
            vec![json!({"x": 1}), json!({"x": 2})]
        );
    }

    /// As the CDK's JsonParser and DpathExtractor: a list body is a document per item (none: one
    /// `{}`, which the paginator sees as `response`), and what Python takes as false is no record.
    #[test]
    fn json_lists_and_false_values_read_as_in_the_cdk() {
        let docs = |body: &[u8]| decode(None, body, "u").unwrap();
        assert_eq!(docs(b"[{\"a\": 1}, {\"a\": 2}]"), [json!({"a": 1}), json!({"a": 2})]);
        assert_eq!(docs(b"[]"), [json!({})]);
        assert_eq!(docs(b"  "), [json!({})]);
        assert_eq!(docs(b"{\"data\": []}"), [json!({"data": []})]);
        for falsy in [json!({}), json!(""), json!(0), json!(false), json!(null)] {
            assert!(dug(json!({"data": falsy.clone()}), &["data"]).is_empty(), "{falsy}");
            assert!(dug(falsy.clone(), &[]).is_empty(), "{falsy}");
        }
        assert_eq!(dug(json!({"data": [{}, 0]}), &["data"]), [json!({}), json!(0)], "items of a list are all kept");
    }

    #[test]
    fn the_iterable_decoder_gives_a_record_a_line() {
        let lines = |body: &[u8]| decode(Some(&json!({"type": "IterableDecoder"})), body, "u").unwrap();
        assert_eq!(
            lines(b"a\nb\r\n\nc\rd\n"),
            [
                json!({"record": "a"}),
                json!({"record": "b"}),
                json!({"record": ""}),
                json!({"record": "c"}),
                json!({"record": "d"})
            ]
        );
        assert_eq!(lines(b""), Vec::<Value>::new());
        assert_eq!(lines(b"only"), [json!({"record": "only"})]);
    }

    #[test]
    fn decoders_read_jsonl_csv_and_gzip() {
        assert_eq!(decode(Some(&json!({"type": "JsonlDecoder"})), b"{\"a\":1}\n\n{\"a\":2}\n", "u").unwrap().len(), 2);
        let rows = decode(Some(&json!({"type": "CsvDecoder"})), b"id,name\n1,\"a, b\"\n2,c\n", "u").unwrap();
        assert_eq!(rows, vec![json!({"id": "1", "name": "a, b"}), json!({"id": "2", "name": "c"})]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, b"id\n7\n").unwrap();
        let body = gz.finish().unwrap();
        let gzip = json!({"type": "GzipDecoder", "decoder": {"type": "CsvDecoder"}});
        assert_eq!(decode(Some(&gzip), &body, "u").unwrap(), vec![json!({"id": "7"})]);
        assert!(decode(None, b"<html>", "http://x").unwrap_err().message().contains("not JSON"));
    }

    #[test]
    fn paths_set_and_remove() {
        let mut r = json!({"a": {"b": 1, "c": 2}, "d": [{"e": 1, "f": 2}]});
        set_path(&mut r, &["a".into(), "x".into()], json!(3)).unwrap();
        crate::dpath::delete_glob(&mut r, &["a", "b"]);
        crate::dpath::delete_glob(&mut r, &["d", "*", "e"]);
        assert_eq!(r, json!({"a": {"c": 2, "x": 3}, "d": [{"f": 2}]}));
        assert_eq!(cast(json!("12"), Some("integer")).unwrap(), json!(12));
        assert_eq!(cast(json!(12), Some("string")).unwrap(), json!("12"));
    }
}

/// Leaves out the top-level fields whose value is `null`, as the Airbyte CDK writes records
/// (its serializer omits `None`); nested nulls stay. Fields keep their order and their text; a
/// record without the word `null` in it is not looked at.
pub fn omit_top_level_nulls(records: &mut [String]) {
    for record in records.iter_mut() {
        if !record.contains("null") {
            continue;
        }
        let Ok(TopLevel(fields)) = serde_json::from_str::<TopLevel<'_>>(record) else { continue };
        if !fields.iter().any(|(_, v)| v.get() == "null") {
            continue;
        }
        let mut out = String::with_capacity(record.len());
        out.push('{');
        for (key, value) in fields.iter().filter(|(_, v)| v.get() != "null") {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key.as_ref()).unwrap_or_default());
            out.push(':');
            out.push_str(value.get());
        }
        out.push('}');
        *record = out;
    }
}

/// A JSON object's top-level fields in their order, values as they were written.
struct TopLevel<'a>(Vec<(std::borrow::Cow<'a, str>, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    fields.push((key, map.next_value()?));
                }
                Ok(TopLevel(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod null_tests {
    use super::omit_top_level_nulls;

    #[test]
    fn top_level_nulls_are_left_out_and_nothing_else_changes() {
        let mut records = vec![
            r#"{"z":1,"affiliation":null,"a":{"kept":null},"s":"null","e":"\u00e9"}"#.to_string(),
            r#"{"id":2,"name":"x"}"#.to_string(),
            r#"{"only":null}"#.to_string(),
        ];
        omit_top_level_nulls(&mut records);
        assert_eq!(records[0], r#"{"z":1,"a":{"kept":null},"s":"null","e":"\u00e9"}"#);
        assert_eq!(records[1], r#"{"id":2,"name":"x"}"#);
        assert_eq!(records[2], "{}");
    }
}
