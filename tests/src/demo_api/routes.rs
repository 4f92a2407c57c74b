//! The HTTP surface: router, request accounting middleware and endpoint handlers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::data::{self, Account, Item};
use super::formats::{Compression, ReportFormat, ReportOutput};
use super::state::{InjectedError, JobStatus, Shared};

/// Largest accepted `limit` / `per_page`.
pub const MAX_PAGE_SIZE: u64 = 10_000;
const DEFAULT_PAGE_SIZE: u64 = 100;

/// The stats endpoint: not counted, never delayed, never failed.
const STATS_PATH: &str = "/_stats";
/// `requests_by_path` key for requests that matched no route.
const UNMATCHED_PATH: &str = "<unmatched>";

pub(super) type AppState = Arc<Shared>;
pub(super) type Params = HashMap<String, String>;

pub fn router(shared: AppState) -> Router {
    Router::new()
        .route("/items", get(list_items))
        .route("/items/bounds", get(item_bounds))
        .route("/redirect", get(redirect))
        .route("/echo", get(echo))
        .route("/bytes", get(bytes))
        .route("/empty-records", get(empty_records))
        .route("/stall", get(stall))
        .route("/lines", get(lines))
        .route("/accounts", get(list_accounts))
        .route("/accounts/{id}/items", get(list_account_items))
        .route("/reports", post(create_report))
        .route("/reports/{id}", get(get_report).delete(delete_report))
        .route("/reports/{id}/download", get(download_report))
        .route(STATS_PATH, get(stats))
        .merge(super::v2::router())
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .method_not_allowed_fallback(|| async { ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed") })
        .layer(middleware::from_fn_with_state(shared.clone(), instrument))
        .with_state(shared)
}

/// Counts and logs every request (but the stats endpoint), applies the configured latency (plus
/// `slow_ms` for requests matching `slow_match`), and answers with an injected error instead of
/// running the handler when it is that request's turn, so an injected error never changes any
/// state.
async fn instrument(State(shared): State<AppState>, req: Request, next: Next) -> Response {
    let path = match req.extensions().get::<MatchedPath>() {
        Some(p) if p.as_str() == STATS_PATH => return next.run(req).await,
        Some(p) => p.as_str(),
        None => UNMATCHED_PATH,
    };
    if let Some(key) = &shared.cfg.api_key {
        let sent = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if sent != Some(format!("Bearer {key}").as_str()) {
            return ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong API key").into_response();
        }
    }
    // Path and query only, even if the client sent an absolute URI.
    let uri = req.uri();
    let target = percent_decode(uri.path_and_query().map_or(uri.path(), |pq| pq.as_str()));
    let slow = shared.cfg.slow_match.iter().any(|needle| target.contains(needle.as_str()));
    let delay_ms = shared.cfg.latency_ms.saturating_add(if slow { shared.cfg.slow_ms } else { 0 });
    // Counted on arrival, so the error cadence and the log follow arrival order rather than
    // completion.
    let injected = shared.begin_request(path, target);
    let _in_flight = shared.enter();
    if delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    match injected {
        None => next.run(req).await,
        Some(InjectedError::TooManyRequests) => {
            let retry_after = shared.cfg.retry_after_secs.to_string();
            let err = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "injected error: slow down");
            ([(header::RETRY_AFTER, retry_after)], err).into_response()
        }
        Some(InjectedError::Internal) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "injected error: internal").into_response()
        }
    }
}

/// An error answer: `{"error": message}` with the given status.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into() }
    }

    fn bad_param(name: &str, value: &str, expected: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid parameter `{name}`: expected {expected}, got {value:?}"),
        )
    }

    fn not_found(what: impl std::fmt::Display) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, format!("{what} not found"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message });
        (self.status, Json(body)).into_response()
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, format!("invalid query string: {rejection}"))
    }
}

pub(super) type ApiResult<T> = Result<T, ApiError>;

/// An integer query parameter within `min..=max`, or `default` when absent.
pub(super) fn int_param(q: &Params, name: &str, default: u64, min: u64, max: u64) -> ApiResult<u64> {
    let Some(raw) = q.get(name) else {
        return Ok(default);
    };
    raw.parse()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| ApiError::bad_param(name, raw, &format!("an integer between {min} and {max}")))
}

pub(super) fn limit_param(q: &Params, name: &str) -> ApiResult<u64> {
    int_param(q, name, DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
}

/// Cursors are opaque to clients: "c" followed by the last id served.
fn encode_cursor(last_id: u64) -> String {
    format!("c{last_id}")
}

/// The id to continue after; 0 (the start) when the cursor is absent or empty.
fn cursor_param(q: &Params, records: u64) -> ApiResult<u64> {
    match q.get("cursor").map(String::as_str) {
        None | Some("") => Ok(0),
        Some(raw) => raw
            .strip_prefix('c')
            .and_then(|id| id.parse().ok())
            .filter(|id| (1..=records).contains(id))
            .ok_or_else(|| ApiError::bad_param("cursor", raw, "a cursor returned by this server")),
    }
}

fn timestamp_param(name: &str, raw: &str) -> ApiResult<i64> {
    data::parse_rfc3339(raw)
        .ok_or_else(|| ApiError::bad_param(name, raw, "an RFC 3339 timestamp such as 2024-01-01T00:00:00Z"))
}

pub(super) fn items(ids: &[u64], cfg: &super::DemoApiConfig) -> Vec<Item> {
    let make = if cfg.rich_records { data::rich_item } else { data::item };
    ids.iter().map(|&id| make(id, cfg.accounts)).collect()
}

/// An optional timestamp query parameter.
fn optional_timestamp_param(q: &Params, name: &str) -> ApiResult<Option<i64>> {
    q.get(name).map(|raw| timestamp_param(name, raw)).transpose()
}

#[derive(Serialize)]
struct ItemsPage {
    data: Vec<Item>,
    next_cursor: Option<String>,
}

/// `GET /items?updated_after=TS&updated_until=TS&limit=N&cursor=C`: cursor pagination over the
/// items with `updated_after < updated_at <= updated_until` (each bound optional). The cursor
/// carries no filter: clients repeat the filters on every page.
async fn list_items(
    State(shared): State<AppState>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<ItemsPage>> {
    let Query(q) = q?;
    let updated_after = optional_timestamp_param(&q, "updated_after")?;
    let updated_until = optional_timestamp_param(&q, "updated_until")?;
    let limit = limit_param(&q, "limit")?;
    let after = cursor_param(&q, shared.cfg.records)?;
    let (ids, more) = shared.filter(None, updated_after, updated_until).page(after, limit);
    let next_cursor = more.then(|| encode_cursor(*ids.last().expect("more implies a last id")));
    Ok(Json(ItemsPage { data: items(&ids, &shared.cfg), next_cursor }))
}

#[derive(Serialize)]
struct ItemBounds {
    count: u64,
    first_updated_at: Option<String>,
    last_updated_at: Option<String>,
}

/// `GET /items/bounds`: how many items there are and the `updated_at` of the first and last
/// (which are also the earliest and latest).
#[derive(Deserialize)]
struct RedirectQuery {
    to: String,
}

/// `GET /redirect?to=URL`: 302 to any URL, for testing that clients re-check redirects.
async fn redirect(Query(q): Query<RedirectQuery>) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, q.to)]).into_response()
}

/// `GET /echo`: the request's headers as `{"headers": {name: value}}` (names lower case,
/// repeated headers joined with ", "), for tests of what a client forwards.
async fn echo(req: Request) -> Json<serde_json::Value> {
    let mut headers = serde_json::Map::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(serde_json::Value::String(seen)) => *seen = format!("{seen}, {value}"),
            _ => {
                headers.insert(name.as_str().to_string(), value.into());
            }
        }
    }
    Json(serde_json::json!({"headers": headers}))
}

/// `GET /bytes?n=N`: a body of `N` bytes (`x`), for response-size tests.
async fn bytes(Query(params): Query<Params>) -> ApiResult<Vec<u8>> {
    let n = params.get("n").map(|v| v.parse::<usize>().map_err(|_| ApiError::bad_param("n", v, "a byte count")));
    Ok(vec![b'x'; n.transpose()?.unwrap_or(0).min(1 << 30)])
}

/// `GET /empty-records?n=N`: `{"data": [{}, {}, ...]}` with `N` empty records (at most 2^26),
/// made as it is sent: the most records an answer of its size can hold, for tests of splitting.
async fn empty_records(Query(params): Query<Params>) -> ApiResult<Response> {
    let n = params.get("n").map(|v| v.parse::<usize>().map_err(|_| ApiError::bad_param("n", v, "a count")));
    let mut left = n.transpose()?.unwrap_or(0).min(1 << 26);
    let mut state = 0u8;
    let chunks = futures_util::stream::poll_fn(move |_| {
        let chunk = match state {
            0 => {
                state = 1;
                Bytes::from_static(b"{\"data\":[")
            }
            1 if left > 0 => {
                let count = left.min(65_536);
                left -= count;
                let mut piece = "{},".repeat(count);
                if left == 0 {
                    piece.pop();
                }
                Bytes::from(piece)
            }
            1 => {
                state = 2;
                Bytes::from_static(b"]}")
            }
            _ => return std::task::Poll::Ready(None),
        };
        std::task::Poll::Ready(Some(Ok::<_, std::io::Error>(chunk)))
    });
    Ok(axum::body::Body::from_stream(chunks).into_response())
}

/// `GET /lines?n=N&width=W`: `N` lines of `W` bytes (`l`), sent as they are made, a thousand a
/// chunk, for streamed-body tests.
async fn lines(Query(params): Query<Params>) -> ApiResult<Response> {
    let number = |name: &str, default: usize| -> ApiResult<usize> {
        let value = params.get(name).map(|v| v.parse::<usize>().map_err(|_| ApiError::bad_param(name, v, "a count")));
        Ok(value.transpose()?.unwrap_or(default))
    };
    let (mut left, width) = (number("n", 0)?, number("width", 10)?.min(1 << 20));
    let mut line = vec![b'l'; width];
    line.push(b'\n');
    let chunks = futures_util::stream::poll_fn(move |_| {
        let count = left.min(1000);
        left -= count;
        std::task::Poll::Ready((count > 0).then(|| Ok::<_, std::io::Error>(Bytes::from(line.repeat(count)))))
    });
    Ok(axum::body::Body::from_stream(chunks).into_response())
}

/// `GET /stall?ms=N`: the headers and the first byte of the body at once, the rest only after
/// `N` ms, for read-timeout tests.
async fn stall(Query(params): Query<Params>) -> ApiResult<Response> {
    let ms = params.get("ms").map(|v| v.parse::<u64>().map_err(|_| ApiError::bad_param("ms", v, "milliseconds")));
    let ms = ms.transpose()?.unwrap_or(0);
    let chunks = futures_util::stream::unfold(0, move |n| async move {
        match n {
            0 => Some((Ok::<_, std::io::Error>(Bytes::from_static(b"[")), 1)),
            1 => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Some((Ok(Bytes::from_static(b"]")), 2))
            }
            _ => None,
        }
    });
    Ok(axum::body::Body::from_stream(chunks).into_response())
}

async fn item_bounds(State(shared): State<AppState>) -> Json<ItemBounds> {
    let count = shared.cfg.records;
    let updated_at = |id: u64| (count > 0).then(|| data::format_rfc3339(data::item_updated_at(id)));
    Json(ItemBounds { count, first_updated_at: updated_at(1), last_updated_at: updated_at(count) })
}

#[derive(Serialize)]
struct AccountsPage {
    data: Vec<Account>,
    page: u64,
    per_page: u64,
}

/// `GET /accounts?page=P&per_page=N`: page-number pagination; pages past the end are empty.
async fn list_accounts(
    State(shared): State<AppState>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<AccountsPage>> {
    let Query(q) = q?;
    let page = int_param(&q, "page", 1, 1, u64::MAX)?;
    let per_page = limit_param(&q, "per_page")?;
    let first = (page - 1).saturating_mul(per_page).saturating_add(1);
    let last = first.saturating_add(per_page - 1).min(shared.cfg.accounts);
    Ok(Json(AccountsPage { data: (first..=last).map(data::account).collect(), page, per_page }))
}

#[derive(Serialize)]
struct AccountItemsPage {
    data: Vec<Item>,
    next: Option<String>,
}

/// `GET /accounts/{id}/items?updated_after=TS&limit=N&cursor=C`: an account's items updated
/// strictly after TS, with a ready-made link to the next page.
async fn list_account_items(
    State(shared): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<AccountItemsPage>> {
    let Query(q) = q?;
    let account_id = id
        .parse()
        .ok()
        .filter(|a| (1..=shared.cfg.accounts).contains(a))
        .ok_or_else(|| ApiError::not_found(format_args!("account {id:?}")))?;
    let updated_after = q.get("updated_after");
    let after_ts = updated_after.map(|ts| timestamp_param("updated_after", ts)).transpose()?;
    let limit = limit_param(&q, "limit")?;
    let after = cursor_param(&q, shared.cfg.records)?;

    let (ids, more) = shared.filter(Some(account_id), after_ts, None).page(after, limit);
    let next = more.then(|| {
        let last = *ids.last().expect("more implies a last id");
        let mut url = format!("/accounts/{account_id}/items?");
        if let Some(ts) = updated_after {
            url += &format!("updated_after={}&", percent_encode(ts));
        }
        url + &format!("limit={limit}&cursor={}", encode_cursor(last))
    });
    Ok(Json(AccountItemsPage { data: items(&ids, &shared.cfg), next }))
}

/// Percent-encodes a query value (notably `+` of a timestamp offset, which would decode as a
/// space).
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:".contains(&b) {
            out.push(char::from(b));
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

/// Decodes the `%XX` escapes of a path and query; a `+` stays a `+`, malformed escapes stay as
/// they are, and bytes that do not form UTF-8 become U+FFFD.
fn percent_decode(s: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes[i..] {
            [b'%', hi, lo, ..] => hex(hi).zip(hex(lo)),
            _ => None,
        };
        match escaped {
            Some((hi, lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Default, Deserialize)]
struct ReportRequest {
    account_id: Option<u64>,
    updated_after: Option<String>,
    /// `"jsonl"` (the default) or `"csv"`.
    format: Option<String>,
    /// `"none"` (the default) or `"gzip"`.
    compression: Option<String>,
}

#[derive(Serialize)]
struct JobView {
    id: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    download_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `POST /reports` with an optional JSON body `{"account_id": A, "updated_after": TS, "format":
/// "jsonl" | "csv", "compression": "none" | "gzip"}` (all optional; an empty body means all
/// items as plain JSON lines): starts a report job.
async fn create_report(State(shared): State<AppState>, body: Bytes) -> ApiResult<(StatusCode, Json<JobView>)> {
    let request: ReportRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ReportRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))?
    };
    if let Some(a) = request.account_id
        && !(1..=shared.cfg.accounts).contains(&a)
    {
        return Err(ApiError::bad_param("account_id", &a.to_string(), "an existing account id"));
    }
    let after_ts = request.updated_after.as_deref().map(|ts| timestamp_param("updated_after", ts)).transpose()?;
    // Checked here rather than by serde so that the error names the field.
    let format = match request.format.as_deref() {
        None => ReportFormat::default(),
        Some(raw) => {
            ReportFormat::parse(raw).ok_or_else(|| ApiError::bad_param("format", raw, r#""jsonl" or "csv""#))?
        }
    };
    let compression = match request.compression.as_deref() {
        None => Compression::default(),
        Some(raw) => {
            Compression::parse(raw).ok_or_else(|| ApiError::bad_param("compression", raw, r#""none" or "gzip""#))?
        }
    };

    let filter = shared.filter(request.account_id, after_ts, None);
    let id = shared.create_job(filter, ReportOutput { format, compression });
    let view = JobView { id, status: JobStatus::Running.as_str(), download_url: None, error: None };
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /reports/{id}`: polls a job; each poll brings it closer to finishing.
async fn get_report(State(shared): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<JobView>> {
    let status = shared.poll_job(&id).ok_or_else(|| ApiError::not_found(format_args!("report {id:?}")))?;
    let download_url = (status == JobStatus::Completed).then(|| format!("/reports/{id}/download"));
    let error = (status == JobStatus::Failed)
        .then(|| format!("report generation failed (every {}th job fails)", shared.cfg.fail_job_every));
    Ok(Json(JobView { id, status: status.as_str(), download_url, error }))
}

/// `GET /reports/{id}/download[?offset=N&limit=M]`: the completed report's items in the format
/// and compression the job was created with (NDJSON by default), all of them or `limit` from the
/// `offset`-th.
async fn download_report(
    State(shared): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<Params>,
) -> ApiResult<Response> {
    let number = |name: &str| -> ApiResult<Option<usize>> {
        params
            .get(name)
            .map(|v| v.parse::<usize>().map_err(|_| ApiError::bad_param(name, v, "a non-negative integer")))
            .transpose()
    };
    let (offset, limit) = (number("offset")?.unwrap_or(0), number("limit")?.unwrap_or(usize::MAX));
    let job = shared.job(&id).ok_or_else(|| ApiError::not_found(format_args!("report {id:?}")))?;
    if job.status != JobStatus::Completed {
        let msg = format!("report {id:?} is {}, not completed", job.status.as_str());
        return Err(ApiError::new(StatusCode::CONFLICT, msg));
    }
    let ids = job.filter.ids_after(0).skip(offset).take(limit);
    let body = job.output.body(ids, shared.cfg.accounts);
    Ok(([(header::CONTENT_TYPE, job.output.content_type())], body).into_response())
}

/// `DELETE /reports/{id}`: forgets a job, aborting it if it is still running.
async fn delete_report(State(shared): State<AppState>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    if shared.delete_job(&id) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format_args!("report {id:?}")))
    }
}

/// `GET /_stats`: the counters.
async fn stats(State(shared): State<AppState>) -> Json<super::Stats> {
    Json(shared.stats())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decode_decodes_escapes_only() {
        assert_eq!(percent_decode("/items?limit=5"), "/items?limit=5");
        assert_eq!(
            percent_decode("/items?updated_after=2024-01-01T01%3A00%3a00Z"),
            "/items?updated_after=2024-01-01T01:00:00Z"
        );
        assert_eq!(percent_decode("a%2B01:00+b%20c"), "a+01:00+b c");
        assert_eq!(percent_decode("%zz%4%"), "%zz%4%");
        assert_eq!(percent_decode("%41%4"), "A%4");
        assert_eq!(percent_decode("%C3%A9%FF"), "é\u{FFFD}");
        for s in ["", "/", "-._~:", "été"] {
            assert_eq!(percent_decode(&percent_encode(s)), s);
        }
    }
}
