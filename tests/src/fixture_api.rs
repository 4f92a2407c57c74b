//! A mock API that answers from a list of canned routes, for reading real connectors' manifests
//! (whose APIs the demo API does not speak) in Sluice and in the Airbyte CDK alike.
//!
//! A route matches a request by method, path, a subset of its query parameters (each given
//! value must be the request's, `null` must be absent), a subset of its JSON body (`json`:
//! each field given must be in the body, equal, objects compared field by field the same way;
//! `null` must be absent), of its form-encoded body (`form`: a string is the field's value, a list
//! its values in order, `null` absent) and of its headers (`request_headers`, names in any case,
//! `null` absent); the first route that matches answers,
//! with its status, headers and body (`body`: JSON; `text`: as it is). A request no route
//! matches gets 404 with what was asked, so a test's failure says which answer is missing.
//! Every request is logged, with the route that answered it.

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, mpsc};

/// One canned answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Route {
    #[serde(default = "get")]
    pub method: String,
    pub path: String,
    /// Query parameters the request must have (a string), or must not have (`null`).
    #[serde(default)]
    pub query: Map<String, Value>,
    /// Fields the request's JSON body must have (or, `null`, not have).
    #[serde(default)]
    pub json: Map<String, Value>,
    /// Fields the request's form-encoded body must have (a string, or a list of a repeated
    /// field's values), or must not have (`null`).
    #[serde(default)]
    pub form: Map<String, Value>,
    /// Headers the request must have, or must not have (`null`).
    #[serde(default)]
    pub request_headers: Map<String, Value>,
    #[serde(default = "ok")]
    pub status: u16,
    #[serde(default)]
    pub headers: Map<String, Value>,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(default)]
    pub text: Option<String>,
}

fn get() -> String {
    "GET".into()
}

fn ok() -> u16 {
    200
}

#[derive(Default)]
struct Served {
    routes: Vec<Route>,
    /// `METHOD path?query -> route index or 404`, in order.
    log: Vec<String>,
}

/// A running fixture API on 127.0.0.1, on a thread of its own; stopped when dropped.
pub struct FixtureApi {
    addr: SocketAddr,
    served: Arc<Mutex<Served>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FixtureApi {
    pub fn start(routes: Vec<Route>) -> Result<FixtureApi> {
        let served = Arc::new(Mutex::new(Served { routes, log: Vec::new() }));
        let (started_tx, started_rx) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = served.clone();
        let thread = std::thread::Builder::new().name("fixture-api".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::bind(("127.0.0.1", 0)).await {
                    Ok(listener) => listener,
                    Err(e) => return drop(started_tx.send(Err(e))),
                };
                let _ = started_tx.send(listener.local_addr());
                let app = axum::Router::new().fallback(answer).with_state(state);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        })?;
        let addr = started_rx.recv().context("the fixture API did not start")?.context("binding 127.0.0.1")?;
        Ok(FixtureApi { addr, served, stop: Some(stop), thread: Some(thread) })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The requests served so far, each with the route that answered it.
    pub fn log(&self) -> Vec<String> {
        self.served.lock().unwrap().log.clone()
    }
}

impl Drop for FixtureApi {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The query of a request as pairs, percent-decoded.
fn pairs(query: Option<&str>) -> Vec<(String, String)> {
    serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default()
}

/// Whether `got` has every field of `wanted` (objects compared the same way, a `null` field
/// absent or null).
fn contains(got: &Value, wanted: &Map<String, Value>) -> bool {
    wanted.iter().all(|(k, w)| match (got.get(k), w) {
        (None | Some(Value::Null), Value::Null) => true,
        (Some(Value::Object(_)), Value::Object(inner)) => contains(&got[k], inner),
        (Some(g), w) => g == w,
        (None, _) => false,
    })
}

/// What a request brings for matching.
struct Asked<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a [(String, String)],
    json: &'a Value,
    form: &'a [(String, String)],
    headers: &'a HeaderMap,
}

/// Whether pairs (a query or a form) have each wanted field: a string once among them, a list as
/// all of the field's values in order, `null` none.
fn has_pairs(got: &[(String, String)], wanted: &Map<String, Value>) -> bool {
    wanted.iter().all(|(name, wanted)| {
        let mut values = got.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str());
        match wanted {
            Value::Null => values.next().is_none(),
            Value::String(s) => values.any(|v| v == s),
            Value::Array(list) => values.eq(list.iter().map(|v| v.as_str().unwrap_or_default())),
            other => {
                let other = other.to_string();
                values.any(|v| v == other)
            }
        }
    })
}

fn matches(route: &Route, asked: &Asked) -> bool {
    route.method.eq_ignore_ascii_case(asked.method.as_str())
        && route.path == asked.path
        && contains(asked.json, &route.json)
        && has_pairs(asked.query, &route.query)
        && has_pairs(asked.form, &route.form)
        && route.request_headers.iter().all(|(name, wanted)| {
            let got = asked.headers.get(name.as_str()).and_then(|v| v.to_str().ok());
            match wanted {
                Value::Null => got.is_none(),
                Value::String(s) => got == Some(s.as_str()),
                other => got == Some(other.to_string().as_str()),
            }
        })
}

async fn answer(
    State(served): State<Arc<Mutex<Served>>>,
    method: Method,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let pairs = pairs(query.as_deref());
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let form: Vec<(String, String)> = match body {
        Value::Null => serde_urlencoded::from_bytes(&raw).unwrap_or_default(),
        _ => Vec::new(),
    };
    let asked = Asked { method: &method, path: uri.path(), query: &pairs, json: &body, form: &form, headers: &headers };
    let mut served = served.lock().unwrap();
    let shown = format!("{method} {uri}");
    let found = served.routes.iter().position(|r| matches(r, &asked));
    let body = if form.is_empty() { body } else { json!(form) };
    let Some(index) = found else {
        served.log.push(format!("{shown} {body} -> 404"));
        let asked = json!({"error": "no fixture route matches", "method": method.as_str(), "path": uri.path(), "query": pairs, "json": body});
        return (StatusCode::NOT_FOUND, axum::Json(asked)).into_response();
    };
    served.log.push(format!("{shown} {body} -> route {index}"));
    let route = &served.routes[index];
    let status = StatusCode::from_u16(route.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (body, content_type) = match (&route.text, &route.body) {
        (Some(text), _) => (text.clone(), "text/plain"),
        (None, Some(body)) => (body.to_string(), "application/json"),
        (None, None) => (String::new(), "text/plain"),
    };
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    for (name, value) in &route.headers {
        let value = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value)) {
            headers.insert(name, value);
        }
    }
    response
}
