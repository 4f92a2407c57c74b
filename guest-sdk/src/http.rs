//! HTTP through the host. The host enforces the egress grant, timeouts, retries with backoff
//! (429, 5xx, connection errors; `Retry-After` honoured) and size caps, so a connector just sends.

use crate::__private::bindings::sluice::connector::http as wit;
use crate::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A request being built.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    has_query: bool,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

pub fn get(url: impl Into<String>) -> Request {
    Request::new("GET", url)
}
pub fn post(url: impl Into<String>) -> Request {
    Request::new("POST", url)
}
pub fn delete(url: impl Into<String>) -> Request {
    Request::new("DELETE", url)
}

/// GETs `url` and parses a successful JSON answer.
pub fn get_json<T: DeserializeOwned>(url: impl Into<String>) -> Result<T> {
    get(url).send()?.error_for_status()?.json()
}

impl Request {
    pub fn new(method: &str, url: impl Into<String>) -> Self {
        let url = url.into();
        Request { method: method.to_string(), has_query: url.contains('?'), url, headers: Vec::new(), body: None }
    }
    /// Appends a query parameter, percent-encoded.
    pub fn query(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        self.url.push(if self.has_query { '&' } else { '?' });
        self.has_query = true;
        let encoded: String =
            form_urlencoded::Serializer::new(String::new()).append_pair(name, &value.to_string()).finish();
        self.url.push_str(&encoded);
        self
    }
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
    pub fn bearer_auth(self, token: &str) -> Self {
        self.header("authorization", format!("Bearer {token}"))
    }
    pub fn json_body(mut self, body: &impl Serialize) -> Result<Self> {
        self.body = Some(serde_json::to_vec(body)?);
        Ok(self.header("content-type", "application/json"))
    }
    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = Some(body);
        self
    }
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn method(&self) -> &str {
        &self.method
    }

    /// The method and URL (for messages), and the request as the host takes it.
    pub(crate) fn into_wit(self) -> (String, String, wit::Request) {
        let (method, url) = (self.method.clone(), self.url.clone());
        (method, url, wit::Request { method: self.method, url: self.url, headers: self.headers, body: self.body })
    }

    /// Sends the request through the host. Any status is `Ok`; see [`Response::error_for_status`].
    pub fn send(self) -> Result<Response> {
        let (method, url, req) = self.into_wit();
        match wit::send(&req) {
            Ok(r) => Ok(Response { url, status: r.status, headers: r.headers, body: r.body }),
            Err(e) => Err(http_error(&method, &url, e)),
        }
    }

    /// Sends the request, but leaves the body with the host, to be read a piece at a time with
    /// [`Body::read_lines`] or [`Body::read_bytes`]: for downloads too large to hold (a report of
    /// a million rows). Retries, redirects and the egress policy work as for [`Request::send`].
    pub fn open(self) -> Result<StreamedResponse> {
        let (method, url, req) = self.into_wit();
        match wit::open(&req) {
            Ok(r) => Ok(StreamedResponse { url, status: r.status, headers: r.headers, body: Body(r.body) }),
            Err(e) => Err(http_error(&method, &url, e)),
        }
    }
}

impl Request {
    /// Sends the request, and has the host take the records out of a successful JSON answer:
    /// those of the list at `path` (`&["data"]`, `&["result", "items"]`), each as the API wrote
    /// it and never parsed here; the rest of the answer (for pagination) stays JSON text. The
    /// fastest way to pass records on unchanged (contract 0.1.4):
    ///
    /// ```ignore
    /// let (records, rest): (Vec<String>, Next) = request.send_records(&["data"])?.error_for_status()?.parts()?;
    /// ```
    pub fn send_records(self, path: &[&str]) -> Result<RecordsResponse> {
        let (method, url, req) = self.into_wit();
        let keys: Vec<String> = path.iter().map(|k| k.to_string()).collect();
        match wit::send_records(&req, &keys) {
            Ok(r) => Ok(RecordsResponse {
                url,
                path: path.join("."),
                status: r.status,
                headers: r.headers,
                records: r.records,
                rest: r.rest,
            }),
            Err(e) => Err(http_error(&method, &url, e)),
        }
    }

    /// As [`Request::send_records`], but the records never come into the connector: the host
    /// keeps them and puts them at the start of the page this `read_page` (or job result read)
    /// returns, before the page's own records. `records` is how many were kept. Only in those
    /// calls; the records count against the limit of records per page.
    ///
    /// ```ignore
    /// let (_, rest): (u32, Next) = request.forward_records(&["data"])?.error_for_status()?.parts()?;
    /// Ok(Page::default().next(rest.next_cursor))
    /// ```
    pub fn forward_records(self, path: &[&str]) -> Result<RecordsResponse<u32>> {
        let (method, url, req) = self.into_wit();
        let keys: Vec<String> = path.iter().map(|k| k.to_string()).collect();
        match wit::forward_records(&req, &keys) {
            Ok(r) => Ok(RecordsResponse {
                url,
                path: path.join("."),
                status: r.status,
                headers: r.headers,
                records: r.forwarded,
                rest: r.rest,
            }),
            Err(e) => Err(http_error(&method, &url, e)),
        }
    }
}

/// An HTTP answer whose records the host took out (see [`Request::send_records`]): `R` is the
/// records, or for [`Request::forward_records`] how many the host kept.
#[derive(Debug, Clone)]
pub struct RecordsResponse<R = Vec<String>> {
    pub url: String,
    /// The path asked for, dotted, for messages.
    pub path: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The records, each as the API wrote it; `None` when the answer was not a success or held
    /// no list of objects at the path (then `rest` is the whole body).
    pub records: Option<R>,
    /// The answer without the records, as JSON text; or the whole body, without them.
    pub rest: Vec<u8>,
}

impl<R> RecordsResponse<R> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
    /// As [`Response::error_for_status`], the body being `rest`.
    pub fn error_for_status(self) -> Result<Self> {
        if self.is_success() {
            return Ok(self);
        }
        let answer = Response { url: self.url, status: self.status, headers: self.headers, body: self.rest };
        answer.error_for_status().map(|_| unreachable!("the status is not a success"))
    }
    /// The records and the rest of the answer parsed as `T`; a system error naming the URL and
    /// the path when the answer had no list of records there.
    pub fn parts<T: DeserializeOwned>(self) -> Result<(R, T)> {
        let Some(records) = self.records else {
            let start = String::from_utf8_lossy(&self.rest[..self.rest.len().min(200)]).into_owned();
            return Err(Error::System(format!(
                "{} answered {} without a list of records at `{}`: {start}",
                self.url, self.status, self.path
            )));
        };
        let rest = serde_json::from_slice(&self.rest)
            .map_err(|e| Error::System(format!("{} answered {} with unexpected JSON: {e}", self.url, self.status)))?;
        Ok((records, rest))
    }
}

pub(crate) fn http_error(method: &str, url: &str, e: wit::HttpError) -> Error {
    match e {
        wit::HttpError::Denied(m) => Error::Config(format!("{method} {url} denied: {m}")),
        wit::HttpError::Timeout(m) => Error::Transient(format!("{method} {url} timed out: {m}")),
        wit::HttpError::Connection(m) => Error::Transient(format!("{method} {url} failed: {m}")),
        wit::HttpError::TooLarge(m) => Error::System(format!("{method} {url}: response too large: {m}")),
        wit::HttpError::InvalidRequest(m) => Error::System(format!("{method} {url}: invalid request: {m}")),
    }
}

/// An HTTP answer whose body is still with the host (see [`Request::open`]).
#[derive(Debug)]
pub struct StreamedResponse {
    pub url: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl StreamedResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// As [`Response::error_for_status`]; the message quotes the start of the body, and the body
    /// is closed.
    pub fn error_for_status(self) -> Result<Self> {
        if self.is_success() {
            return Ok(self);
        }
        let start = self.body.read_bytes(500).ok().flatten().unwrap_or_default();
        self.body.close();
        let answer = Response { url: self.url, status: self.status, headers: self.headers, body: start };
        answer.error_for_status().map(|_| unreachable!("the status is not a success"))
    }
}

/// An open response body, held by the host for as long as it reads the partition that opened
/// it. Its handle may go into a page token ([`Body::handle`], [`Body::from_handle`]) so that the
/// next `read_page` or `read_result` call of the partition goes on reading where this one
/// stopped; a body read to its end is closed by the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Body(u32);

/// Lines of a body, as one text, and whether it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lines {
    /// `count` complete lines, each with its line ending as sent (the body's last line may have
    /// none): split it with [`Lines::lines`], or hand it to a CSV reader as it is.
    pub text: String,
    pub count: u32,
    /// The body has no more: it is closed.
    pub end: bool,
}

impl Lines {
    /// The lines, without their `\n` or `\r\n`.
    pub fn lines(&self) -> std::str::Lines<'_> {
        self.text.lines()
    }
}

impl Body {
    pub fn handle(self) -> u32 {
        self.0
    }

    pub fn from_handle(handle: u32) -> Body {
        Body(handle)
    }

    /// Up to `max` more lines. `None` when the host holds no such body: it was closed, or the
    /// partition is read by a new instance now (a retry, a resumed run), so open it again
    /// (from a position the token kept, say).
    pub fn read_lines(self, max: u32) -> Result<Option<Lines>> {
        match wit::read_lines(self.0, max) {
            Ok(read) => Ok(Some(Lines { text: read.text, count: read.count, end: read.end })),
            Err(wit::BodyError::UnknownBody) => Ok(None),
            Err(e) => Err(body_error(e)),
        }
    }

    /// Up to `max` more bytes; an empty vector at the end. `None` as for [`Body::read_lines`].
    pub fn read_bytes(self, max: u32) -> Result<Option<Vec<u8>>> {
        match wit::read_bytes(self.0, max) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(wit::BodyError::UnknownBody) => Ok(None),
            Err(e) => Err(body_error(e)),
        }
    }

    /// Closes the body before its end.
    pub fn close(self) {
        wit::close_body(self.0)
    }
}

fn body_error(e: wit::BodyError) -> Error {
    match e {
        wit::BodyError::UnknownBody => Error::System("the body is not open".into()),
        wit::BodyError::Connection(m) => Error::Transient(m),
        wit::BodyError::TooLarge(m) | wit::BodyError::NotText(m) => Error::System(m),
    }
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub url: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
    pub fn text(&self) -> Result<&str> {
        std::str::from_utf8(&self.body).map_err(|e| Error::System(format!("{}: body is not UTF-8: {e}", self.url)))
    }
    /// Parses the body as JSON, naming the URL when it is not.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::System(format!("{} answered {} with unexpected JSON: {e}", self.url, self.status)))
    }
    /// Turns a non-2xx answer into an error of the right kind: 401/403/404 are the config's fault,
    /// 429 and 5xx are passing (the host has already retried them), anything else is a system error.
    pub fn error_for_status(self) -> Result<Self> {
        if self.is_success() {
            return Ok(self);
        }
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(500)]).into_owned();
        let message = format!("{} answered {}: {body}", self.url, self.status);
        Err(match self.status {
            401 | 403 | 404 => Error::Config(message),
            429 | 500..=599 => Error::Transient(message),
            _ => Error::System(message),
        })
    }
}

/// Resolves a link from an API answer (absolute, or a path) against the base URL.
pub fn join(base_url: &str, link: &str) -> String {
    if link.starts_with("http://") || link.starts_with("https://") {
        link.to_string()
    } else {
        format!("{}/{}", base_url.trim_end_matches('/'), link.trim_start_matches('/'))
    }
}

/// The `host:port` of a URL, as [`crate::Source::hosts`] wants it: prefixed with `http://` when
/// the URL is plain http, which the operator must grant explicitly.
pub fn host_port(url: &str) -> Result<String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| Error::Config(format!("not an absolute URL: {url}")))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(Error::Config(format!("URL has no host: {url}")));
    }
    let has_port = authority.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
    let (prefix, default_port) = match scheme {
        "https" => ("", 443),
        "http" => ("http://", 80),
        other => return Err(Error::Config(format!("unsupported URL scheme {other:?} in {url}"))),
    };
    Ok(if has_port { format!("{prefix}{authority}") } else { format!("{prefix}{authority}:{default_port}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table every SDK's tests run (guest-sdk/cases).
    #[test]
    fn host_port_answers_the_shared_cases() {
        let cases: Vec<serde_json::Value> = serde_json::from_str(include_str!("../cases/host_port.json")).unwrap();
        for case in cases {
            let url = case["url"].as_str().unwrap();
            match case.get("error") {
                Some(kind) => {
                    let e = host_port(url).expect_err(url);
                    assert!(matches!(e, Error::Config(_)), "{url}: {e:?}");
                    assert_eq!(kind, "config");
                }
                None => assert_eq!(host_port(url).unwrap(), case["host_port"].as_str().unwrap(), "{url}"),
            }
        }
    }

    /// The table every SDK's tests run (guest-sdk/cases).
    #[test]
    fn error_for_status_answers_the_shared_cases() {
        let table: serde_json::Value = serde_json::from_str(include_str!("../cases/status_errors.json")).unwrap();
        let url = table["url"].as_str().unwrap().to_string();
        let answer = |status: u64, body: Vec<u8>| Response {
            url: url.clone(),
            status: status as u16,
            headers: Vec::new(),
            body,
        };
        for case in table["statuses"].as_array().unwrap() {
            let status = case["status"].as_u64().unwrap();
            let result = answer(status, b"oops".to_vec()).error_for_status();
            let kind = match &result {
                Ok(_) => serde_json::Value::Null,
                Err(Error::Config(_)) => "config".into(),
                Err(Error::Transient(_)) => "transient".into(),
                Err(Error::System(_)) => "system".into(),
            };
            assert_eq!(kind, case["kind"], "{status}");
        }
        let repeat = |spec: &serde_json::Value, prefix: &str| {
            format!("{prefix}{}", spec[0].as_str().unwrap().repeat(spec[1].as_u64().unwrap() as usize))
        };
        for case in table["messages"].as_array().unwrap() {
            let body = match case.get("body_repeat") {
                Some(spec) => repeat(spec, ""),
                None => case["body"].as_str().unwrap().to_string(),
            };
            let expected = match case.get("message_repeat") {
                Some(spec) => repeat(&serde_json::json!([spec[1], spec[2]]), spec[0].as_str().unwrap()),
                None => case["message"].as_str().unwrap().to_string(),
            };
            let error = answer(case["status"].as_u64().unwrap(), body.into_bytes()).error_for_status().unwrap_err();
            let (Error::Config(m) | Error::Transient(m) | Error::System(m)) = error;
            assert_eq!(m, expected);
        }
    }

    /// The table every SDK's tests run (guest-sdk/cases).
    #[test]
    fn requests_are_built_as_the_shared_cases_say() {
        let table: serde_json::Value = serde_json::from_str(include_str!("../cases/requests.json")).unwrap();
        for case in table["requests"].as_array().unwrap() {
            let mut request = get(case["url"].as_str().unwrap());
            for pair in case["query"].as_array().into_iter().flatten() {
                let value = match &pair[1] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                request = request.query(pair[0].as_str().unwrap(), value);
            }
            if let Some(token) = case["bearer"].as_str() {
                request = request.bearer_auth(token);
            }
            if let Some(body) = case.get("json_body") {
                request = request.json_body(body).unwrap();
            }
            assert_eq!(request.url(), case["expect_url"].as_str().unwrap(), "{case}");
            let headers: Vec<serde_json::Value> =
                request.headers.iter().map(|(k, v)| serde_json::json!([k, v])).collect();
            assert_eq!(
                serde_json::Value::from(headers),
                case.get("expect_headers").cloned().unwrap_or(serde_json::json!([])),
                "{case}"
            );
            let body = request.body.as_deref().map(|b| String::from_utf8(b.to_vec()).unwrap());
            assert_eq!(body.as_deref(), case["expect_body"].as_str(), "{case}");
        }
    }

    #[test]
    fn host_port_fills_default_ports() {
        assert_eq!(host_port("http://127.0.0.1:8080/x").unwrap(), "http://127.0.0.1:8080");
        assert_eq!(host_port("https://api.example.com/v1?a=b").unwrap(), "api.example.com:443");
        assert_eq!(host_port("http://[::1]/").unwrap(), "http://[::1]:80");
        assert_eq!(host_port("https://[::1]:9000").unwrap(), "[::1]:9000");
        assert!(host_port("example.com").is_err());
    }

    #[test]
    fn query_is_encoded_and_appended() {
        let r = get("http://h/p").query("a", "x y&z").query("b", 2);
        assert_eq!(r.url(), "http://h/p?a=x+y%26z&b=2");
        let r = get("http://h/p?c=1").query("a", 1);
        assert_eq!(r.url(), "http://h/p?c=1&a=1");
    }

    #[test]
    fn join_links() {
        assert_eq!(join("http://h:1/", "/next?p=2"), "http://h:1/next?p=2");
        assert_eq!(join("http://h:1", "https://other/x"), "https://other/x");
    }
}
