//! HttpRequester: builds a request from the manifest (URL, method, parameters, headers, body,
//! authentication, the paginator's and the slicers' request options), sends it through the host,
//! and lets the manifest's error handler decide what an answer means.
//!
//! Waiting belongs to the host: it retries 429 and 5xx answers (and connection failures) with
//! backoff and `Retry-After` before the engine sees them. The error handler then decides which
//! of the answers it gets are records, ignored, retried or fatal.

use crate::auth;
use crate::engine::{Engine, Inputs, Scope, kind, plain};
use serde_json::{Map, Value, json};
use sluice_guest::http::{self, Response};
use sluice_guest::{Error, Result};

/// Where request options go.
#[derive(Default, Debug, Clone)]
pub struct Options {
    pub params: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body_json: Map<String, Value>,
    pub body_data: Vec<(String, String)>,
    /// A full URL or path replacing the requester's (RequestPath pagination).
    pub path: Option<String>,
}

impl Options {
    /// Injects `value` as a RequestOption (`inject_into` and `field_name`/`field_path`) says.
    pub fn inject(&mut self, engine: &Engine, option: &Value, value: &Value, ctx: &Value) -> Result<()> {
        if kind(option) == "RequestPath" {
            self.path = Some(plain(value));
            return Ok(());
        }
        let into = option.get("inject_into").and_then(Value::as_str).unwrap_or("request_parameter");
        if let Some(Value::Array(path)) = option.get("field_path") {
            let mut keys = Vec::new();
            for k in path {
                keys.push(engine.text(Some(k), ctx)?);
            }
            if into != "body_json" {
                return Err(Error::config("a RequestOption's field_path is for body_json only"));
            }
            let (last, parents) = keys.split_last().ok_or_else(|| Error::config("an empty field_path"))?;
            let mut node = &mut self.body_json;
            for k in parents {
                node = node
                    .entry(k.clone())
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .ok_or_else(|| Error::config(format!("field_path {k:?} is not an object")))?;
            }
            node.insert(last.clone(), value.clone());
            return Ok(());
        }
        let name = engine.text(option.get("field_name"), ctx)?;
        if name.is_empty() {
            return Err(Error::config("a RequestOption needs field_name (or field_path)"));
        }
        match into {
            "request_parameter" => self.params.push((name, plain(value))),
            "header" => self.headers.push((name, plain(value))),
            "body_json" => {
                self.body_json.insert(name, value.clone());
            }
            "body_data" => self.body_data.push((name, plain(value))),
            other => {
                return Err(Error::config(format!(
                    "inject_into {other:?} is not one of request_parameter, header, body_json, body_data"
                )));
            }
        }
        Ok(())
    }
}

/// The URL the requester points at (without options): `url`, or `url_base` joined with `path`.
pub fn base_url(engine: &Engine, requester: &Value, ctx: &Value) -> Result<String> {
    if let Some(url) = requester.get("url").filter(|u| !u.is_null()) {
        return engine.text(Some(url), ctx);
    }
    let base = engine.text(requester.get("url_base"), ctx)?;
    let path = engine.text(requester.get("path"), ctx)?;
    Ok(join(&base, &path))
}

/// `url_base` and `path` as the CDK joins them: one slash between, a full URL path wins.
pub fn join(base: &str, path: &str) -> String {
    if path.starts_with("http://") || path.starts_with("https://") {
        return path.to_string();
    }
    if path.is_empty() {
        return base.to_string();
    }
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// `urllib.parse.urljoin(base, reference)` for the references a paginator hands out: a full URL
/// as it is, `//host...` with the base's scheme, `/path` after the base's origin, `?query` after
/// the base's path, anything else after the base's last `/` (dot segments resolved).
pub fn urljoin(base: &str, reference: &str) -> String {
    if reference.is_empty() {
        return base.to_string();
    }
    let scheme_end = base.find("://").map(|i| i + 3);
    let has_scheme = |r: &str| {
        r.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
    };
    if has_scheme(reference) {
        return reference.to_string();
    }
    let Some(authority_start) = scheme_end else { return format!("{base}{reference}") };
    if let Some(rest) = reference.strip_prefix("//") {
        return format!("{}{rest}", &base[..authority_start]);
    }
    let path_start = base[authority_start..].find(['/', '?', '#']).map_or(base.len(), |i| authority_start + i);
    let origin = &base[..path_start];
    let base_path = base[path_start..].split(['?', '#']).next().unwrap_or_default();
    let joined = match reference.chars().next() {
        Some('/') => reference.to_string(),
        Some('?') => format!("{base_path}{reference}"),
        _ => format!("{}{reference}", &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)]),
    };
    let (path, rest) = match joined.find(['?', '#']) {
        Some(i) => (&joined[..i], &joined[i..]),
        None => (joined.as_str(), ""),
    };
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/').skip(1) {
        match segment {
            "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let last_is_dir = path.ends_with("/.") || path.ends_with("/..");
    let mut path = format!("/{}", segments.join("/"));
    if last_is_dir && !path.ends_with('/') {
        path.push('/');
    }
    format!("{origin}{path}{rest}")
}

/// An answer and what the error handler made of it.
pub enum Answer<R = Response> {
    Ok(R),
    /// IGNORE: no records, and no next page.
    Ignored,
    /// RESET_PAGINATION: read the slice again from its first page (see `pagination_reset`); the
    /// error is the answer's, for when no reset is allowed.
    ResetPagination(Error),
}

/// Sends the request the requester describes with these options, applying its authenticator
/// and error handler.
pub fn send(
    engine: &Engine,
    requester: &Value,
    scope: &Scope,
    options: &Options,
    path: &str,
    more: &[(&str, Value)],
) -> Result<Answer> {
    let call = Call { engine, requester, scope, options, path, more };
    Ok(send_with(call, |request| Ok((request.send()?, ())))?.map(|(response, ())| response))
}

/// As [`send`], with the records at `records_at` (when given) taken out of a successful JSON
/// answer by the host (`send-records`): then the response's body is the rest of the answer,
/// what the error handler and the paginator read, and the records come beside it (`None` when
/// the answer held no list of objects there: its body is whole, for the engine to read).
pub fn send_taking(
    engine: &Engine,
    requester: &Value,
    scope: &Scope,
    options: &Options,
    path: &str,
    records_at: Option<&[String]>,
) -> Result<Answer<(Response, Option<Vec<String>>)>> {
    let call = Call { engine, requester, scope, options, path, more: &[] };
    let Some(at) = records_at else {
        return Ok(send_with(call, |request| Ok((request.send()?, ())))?.map(|(response, ())| (response, None)));
    };
    let at: Vec<&str> = at.iter().map(String::as_str).collect();
    send_with(call, |request| {
        let answer = request.send_records(&at)?;
        let response = Response { url: answer.url, status: answer.status, headers: answer.headers, body: answer.rest };
        Ok((response, answer.records))
    })
}

impl<R> Answer<R> {
    fn map<S>(self, f: impl FnOnce(R) -> S) -> Answer<S> {
        match self {
            Answer::Ok(r) => Answer::Ok(f(r)),
            Answer::Ignored => Answer::Ignored,
            Answer::ResetPagination(e) => Answer::ResetPagination(e),
        }
    }
}

/// What a request is made of: the requester, the scope its templates see, the options the
/// paginator and routers add, where it is in the manifest, and more template variables.
struct Call<'a> {
    engine: &'a Engine,
    requester: &'a Value,
    scope: &'a Scope,
    options: &'a Options,
    path: &'a str,
    more: &'a [(&'a str, Value)],
}

/// The request built, sent by `sender` and its answer judged by the error handler, re-sent as
/// the handler says.
fn send_with<T>(
    call: Call<'_>,
    mut sender: impl FnMut(http::Request) -> Result<(Response, T)>,
) -> Result<Answer<(Response, T)>> {
    let Call { engine, requester, scope, options, path, more } = call;
    let ctx = engine.context(requester, scope, more.to_vec());
    let request = build(engine, requester, scope, options, &ctx, path)?;
    let handler = requester.get("error_handler");
    let max_retries = handler.map_or(Ok(5), |h| max_retries(engine, h, &ctx))?;
    let mut attempt = 0;
    loop {
        let (response, taken) = sender(request.clone())?;
        match decide(engine, handler, &response, scope)? {
            Action::Success => return Ok(Answer::Ok((response, taken))),
            Action::Ignore => return Ok(Answer::Ignored),
            Action::Reset(error) => return Ok(Answer::ResetPagination(error)),
            Action::Fail(error) => return Err(error),
            // The host already waited out 429s and 5xxs; what is left is re-sent at once, a
            // bounded number of times.
            Action::Retry(error) if attempt >= max_retries => return Err(error),
            Action::Retry(_) => attempt += 1,
        }
    }
}

/// Sends the request but leaves the body with the host, to be read a piece at a time (a report
/// download of any size in bounded memory). An answer that is not a success is read (its first
/// bytes) and failed as `status_error` says; the error handler's filters are for `send`.
pub fn open(
    engine: &Engine,
    requester: &Value,
    scope: &Scope,
    path: &str,
    more: &[(&str, Value)],
) -> Result<http::StreamedResponse> {
    let ctx = engine.context(requester, scope, more.to_vec());
    let answer = build(engine, requester, scope, &Options::default(), &ctx, path)?.open()?;
    if answer.is_success() {
        return Ok(answer);
    }
    let (url, status) = (answer.url.clone(), answer.status);
    let start = answer.body.read_bytes(300)?.unwrap_or_default();
    let message = format!("{url} answered {status}: {}", String::from_utf8_lossy(&start));
    Err(status_error(status, message))
}

fn max_retries(engine: &Engine, handler: &Value, ctx: &Value) -> Result<u32> {
    if kind(handler) == "CompositeErrorHandler" {
        let mut most = 0;
        for h in handler.get("error_handlers").and_then(Value::as_array).into_iter().flatten() {
            most = most.max(max_retries(engine, h, ctx)?);
        }
        return Ok(most);
    }
    match engine.value(handler.get("max_retries"), ctx)? {
        Value::Null => Ok(5),
        v => v
            .as_u64()
            .map(|n| n.min(20) as u32)
            .ok_or_else(|| Error::config(format!("max_retries must be a number, got {v}"))),
    }
}

/// Builds the request: URL with parameters, headers, body, authentication.
pub fn build(
    engine: &Engine,
    requester: &Value,
    _scope: &Scope,
    options: &Options,
    ctx: &Value,
    path: &str,
) -> Result<http::Request> {
    let mut url = match &options.path {
        // A paginator's path (RequestPath): joined as the CDK's `_join_url` joins it, with
        // `urljoin` (a path from the root replaces the base's path), to `url_base`, else `url`.
        Some(replaced) => {
            let base = match engine.text(requester.get("url_base"), ctx)? {
                base if base.is_empty() => engine.text(requester.get("url"), ctx)?,
                base => base,
            };
            let base = if base.ends_with('/') { base } else { format!("{base}/") };
            urljoin(&base, replaced)
        }
        None => base_url(engine, requester, ctx)?,
    };
    if url.is_empty() {
        return Err(Error::config(format!("{path}: the requester has no url (or url_base)")));
    }
    let method = engine.text(requester.get("http_method"), ctx)?;
    let method = if method.is_empty() { "GET".to_string() } else { method.to_ascii_uppercase() };
    let mut params = pairs(engine.inputs(requester.get("request_parameters"), ctx, Inputs::Params)?);
    params.extend(options.params.iter().cloned());
    let mut headers = pairs(engine.inputs(requester.get("request_headers"), ctx, Inputs::Headers)?);
    headers.extend(options.headers.iter().cloned());
    let auth = auth::credentials(engine, requester, ctx, &format!("{path}.authenticator"))?;
    params.extend(auth.params);
    headers.extend(auth.headers);
    // As the CDK's HttpClient (`_dedupe_query_params`): a parameter the URL carries already with
    // the same value (a next-page URL's own `page_size`) is not added again.
    if let Some((_, query)) = url.split_once('?') {
        let present: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
        params.retain(|(k, v)| !present.iter().any(|(pk, pv)| pk == k && pv == v));
    }
    if !params.is_empty() {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &params {
            query.append_pair(k, v);
        }
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&query.finish());
    }
    let mut request = http::Request::new(&method, url);
    for (k, v) in headers {
        request = request.header(&k, v);
    }
    let mut json_body = engine.inputs(requester.get("request_body_json"), ctx, Inputs::Json)?;
    json_body.extend(options.body_json.clone());
    let mut data: Vec<(String, String)> = match requester.get("request_body_data") {
        Some(Value::String(t)) if !t.contains("{{") && !t.contains("{%") => {
            request = request.body(t.clone().into_bytes());
            Vec::new()
        }
        Some(v) => pairs(engine.inputs(Some(v), ctx, Inputs::Params)?),
        None => Vec::new(),
    };
    data.extend(options.body_data.iter().cloned());
    if !json_body.is_empty() {
        request = request.json_body(&json_body)?;
    } else if !data.is_empty() {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &data {
            form.append_pair(k, v);
        }
        request = request.header("content-type", "application/x-www-form-urlencoded").body(form.finish().into_bytes());
    }
    Ok(request)
}

/// Evaluated inputs as name-value pairs; a list is the name repeated, as requests sends it.
fn pairs(inputs: Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in inputs {
        match v {
            Value::Array(items) => out.extend(items.iter().map(|i| (k.clone(), plain(i)))),
            other => out.push((k, plain(&other))),
        }
    }
    out
}

enum Action {
    Success,
    Ignore,
    Reset(Error),
    Retry(Error),
    Fail(Error),
}

/// The response as templates see it: its JSON (or `{}`), and its headers with `link` parsed.
pub fn response_context(response: &Response) -> (Value, Value) {
    let body = serde_json::from_slice(&response.body).unwrap_or_else(|_| json!({}));
    (body, headers_value(response))
}

/// Headers as a mapping, with `link` parsed into `{rel: {"url": ..., "rel": ...}}` as requests'
/// `response.links` has it.
pub fn headers_value(response: &Response) -> Value {
    let mut headers = Map::new();
    for (k, v) in &response.headers {
        headers.insert(k.clone(), Value::from(v.clone()));
    }
    let mut links = Map::new();
    if let Some(link) = response.header("link") {
        for part in link.split(',') {
            let mut pieces = part.split(';');
            let Some(url) = pieces.next().map(|u| u.trim().trim_start_matches('<').trim_end_matches('>')) else {
                continue;
            };
            let mut entry = Map::new();
            entry.insert("url".into(), Value::from(url));
            for param in pieces {
                if let Some((k, v)) = param.split_once('=') {
                    entry.insert(k.trim().to_string(), Value::from(v.trim().trim_matches('"')));
                }
            }
            let key = entry.get("rel").and_then(Value::as_str).unwrap_or(url).to_string();
            links.insert(key, Value::Object(entry));
        }
    }
    headers.insert("link".into(), Value::Object(links));
    Value::Object(headers)
}

fn decide(engine: &Engine, handler: Option<&Value>, response: &Response, scope: &Scope) -> Result<Action> {
    let handlers: Vec<&Value> = match handler {
        None => Vec::new(),
        Some(h) if kind(h) == "CompositeErrorHandler" => {
            h.get("error_handlers").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
        }
        Some(h) => vec![h],
    };
    let mut failed = None;
    for handler in handlers {
        if crate::custom::is_custom_node(handler) {
            // As the CDK's CompositeErrorHandler: a resolution that lets the read go on is taken
            // at once, a failure only when no later handler has another.
            match custom_action(engine, handler, response)? {
                Some(Action::Fail(error)) => failed = Some(Action::Fail(error)),
                Some(action) => return Ok(action),
                None => {}
            }
            continue;
        }
        for filter in handler.get("response_filters").and_then(Value::as_array).into_iter().flatten() {
            if let Some(action) = matches(engine, filter, response, scope)? {
                return Ok(action);
            }
        }
    }
    Ok(failed.unwrap_or_else(|| default_action(response)))
}

/// A custom error handler's `interpret_response(response)`, as an action (`None`: it has no
/// resolution).
fn custom_action(engine: &Engine, handler: &Value, response: &Response) -> Result<Option<Action>> {
    let resolution = crate::custom::interpret_response(engine, handler, response)?;
    let text = |k: &str| resolution.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let action = text("response_action");
    if action.is_empty() {
        return Ok(None);
    }
    let message = match text("error_message") {
        m if m.is_empty() => format!(
            "{} answered {}: {}",
            response.url,
            response.status,
            preview(&String::from_utf8_lossy(&response.body))
        ),
        m => format!("{m} ({} answered {})", response.url, response.status),
    };
    let error = match text("failure_type").as_str() {
        "config_error" => Error::config(message),
        "transient_error" => Error::transient(message),
        "system_error" => Error::system(message),
        _ => status_error(response.status, message),
    };
    Ok(Some(match action.as_str() {
        "SUCCESS" => Action::Success,
        "IGNORE" => Action::Ignore,
        "RETRY" | "RATE_LIMITED" => Action::Retry(error),
        "RESET_PAGINATION" => Action::Reset(error),
        _ => Action::Fail(error),
    }))
}

/// A response filter's action when it matches the response.
fn matches(engine: &Engine, filter: &Value, response: &Response, scope: &Scope) -> Result<Option<Action>> {
    let codes = filter.get("http_codes").and_then(Value::as_array);
    let by_code = codes.is_some_and(|c| c.iter().any(|c| c.as_u64() == Some(u64::from(response.status))));
    let body = || String::from_utf8_lossy(&response.body);
    let by_message = match filter.get("error_message_contains").and_then(Value::as_str) {
        Some(needle) if !needle.is_empty() => body().contains(needle),
        _ => false,
    };
    // The answer is parsed for the templates only when a template looks at it.
    let context = || {
        let (json_body, headers) = response_context(response);
        engine.context(filter, scope, vec![("response", json_body), ("headers", headers)])
    };
    let mut ctx = None;
    let by_predicate = match filter.get("predicate").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => engine.condition(Some(&Value::from(p)), ctx.get_or_insert_with(context))?,
        _ => false,
    };
    if !(by_code || by_message || by_predicate) {
        return Ok(None);
    }
    let ctx = ctx.unwrap_or_else(context);
    let action = filter.get("action").and_then(Value::as_str).unwrap_or("FAIL");
    let message = match engine.text(filter.get("error_message"), &ctx)? {
        m if m.is_empty() => format!("{} answered {}: {}", response.url, response.status, preview(&body())),
        m => format!("{m} ({} answered {})", response.url, response.status),
    };
    let error = match filter.get("failure_type").and_then(Value::as_str) {
        Some("config_error") => Error::config(message),
        Some("transient_error") => Error::transient(message),
        Some(_) => Error::system(message),
        None => status_error(response.status, message),
    };
    Ok(Some(match action {
        "SUCCESS" => Action::Success,
        "IGNORE" => Action::Ignore,
        "RETRY" | "RATE_LIMITED" => Action::Retry(error),
        "FAIL" => Action::Fail(error),
        "RESET_PAGINATION" => Action::Reset(error),
        other => {
            return Err(Error::config(format!(
                "an HttpResponseFilter action {other:?} is not one of SUCCESS, IGNORE, RETRY, RATE_LIMITED, FAIL, \
                 RESET_PAGINATION"
            )));
        }
    }))
}

/// The CDK's default: 2xx are records; 429 and 5xx (still failing after the host's retries)
/// are passing faults; 401 and 403 are the config's; anything else fails.
fn default_action(response: &Response) -> Action {
    if response.is_success() {
        return Action::Success;
    }
    let message =
        format!("{} answered {}: {}", response.url, response.status, preview(&String::from_utf8_lossy(&response.body)));
    Action::Fail(status_error(response.status, message))
}

fn status_error(status: u16, message: String) -> Error {
    match status {
        401 | 403 => Error::config(message),
        429 | 500..=599 => Error::transient(message),
        _ => Error::system(message),
    }
}

fn preview(body: &str) -> &str {
    let mut end = body.len().min(300);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    &body[..end]
}

#[cfg(test)]
mod tests {
    use super::urljoin;

    /// The paths a paginator hands out, joined as Python's `urljoin` joins them (the CDK's
    /// `_join_url`).
    #[test]
    fn paths_join_as_python_urljoin_joins_them() {
        let base = "https://api.example.com/api/v2/channels/voice/";
        assert_eq!(urljoin(base, "ivr?page=2"), "https://api.example.com/api/v2/channels/voice/ivr?page=2");
        assert_eq!(
            urljoin(base, "/api/v2/channels/voice/ivr?page=2"),
            "https://api.example.com/api/v2/channels/voice/ivr?page=2"
        );
        assert_eq!(
            urljoin("https://h.example/", "/2010-04-01/Accounts.json?Page=1"),
            "https://h.example/2010-04-01/Accounts.json?Page=1"
        );
        assert_eq!(urljoin(base, "https://other.example/x"), "https://other.example/x");
        assert_eq!(urljoin(base, "//cdn.example/x"), "https://cdn.example/x");
        assert_eq!(urljoin(base, "?page=3"), "https://api.example.com/api/v2/channels/voice/?page=3");
        assert_eq!(urljoin(base, "../text/calls"), "https://api.example.com/api/v2/channels/text/calls");
        assert_eq!(urljoin("http://127.0.0.1:8080/", "/v2/items?page=2"), "http://127.0.0.1:8080/v2/items?page=2");
    }
}
