//! The `/v2` endpoints: the pagination, authentication and error shapes that declarative
//! (Airbyte low-code) manifests are written for, over the same items as `/items`, so a test can
//! compare what a manifest read with what `/items` serves.
//!
//! Every listing pages through items in id order: `page` counts from 1 (default 1), `per_page`
//! defaults to 100 and is at most [`MAX_PAGE_SIZE`](super::MAX_PAGE_SIZE); pages past the end are
//! empty.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::data::Item;
use super::routes::{ApiError, ApiResult, AppState, Params, int_param, items, limit_param};

/// `POST /v2/session` credentials.
pub const SESSION_USERNAME: &str = "demo";
pub const SESSION_PASSWORD: &str = "demo-password";
/// The header that carries a session token.
pub const SESSION_TOKEN_HEADER: &str = "X-Session-Token";
/// How long a session token is accepted, in seconds (its `expires_in`).
pub const SESSION_EXPIRES_IN_SECS: u64 = 3600;

/// `POST /v2/oauth/token` credentials; the access tokens' lifetime is
/// [`DemoApiConfig::oauth_expires_in_secs`](super::DemoApiConfig::oauth_expires_in_secs).
pub const OAUTH_CLIENT_ID: &str = "demo-client";
pub const OAUTH_CLIENT_SECRET: &str = "demo-secret";
pub const OAUTH_REFRESH_TOKEN: &str = "demo-refresh";

/// `/v2/keyed/items` wants this key in [`API_KEY_HEADER`] or in the [`API_KEY_PARAM`] query
/// parameter.
pub const API_KEY: &str = "demo-key";
pub const API_KEY_HEADER: &str = "X-Api-Key";
pub const API_KEY_PARAM: &str = "api_key";

/// `/v2/basic/items` credentials; see [`basic_authorization`].
pub const BASIC_USERNAME: &str = "demo";
pub const BASIC_PASSWORD: &str = "demo-password";

/// `/v2/accounts/{id}/items` answers 403 for account ids divisible by this.
pub const SUSPENDED_ACCOUNT_EVERY: u64 = 4;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v2/items", get(offset_items))
        .route("/v2/linked_items", get(linked_items))
        .route("/v2/session", post(create_session))
        .route("/v2/session/items", get(session_items))
        .route("/v2/session/current", get(current_session))
        .route("/v2/oauth/token", post(oauth_token))
        .route("/v2/oauth/items", get(oauth_items))
        .route("/v2/keyed/items", get(keyed_items))
        .route("/v2/basic/items", get(basic_items))
        .route("/v2/throttled_items", get(throttled_items))
        .route("/v2/accounts/{id}/items", get(account_items))
        .route("/v2/events", get(super::events::events).put(super::events::set_events))
        .route("/v2/event_accounts", get(super::events::event_accounts))
        .route("/v2/documents/{name}", get(document))
}

/// `GET /v2/documents/{name}`: the document a test set, or 404.
async fn document(State(shared): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<serde_json::Value>> {
    shared
        .document(&name)
        .map(Json)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no document {name:?}")))
}

/// The `Authorization` value for HTTP basic authentication: `Basic base64(username:password)`.
pub fn basic_authorization(username: &str, password: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("Basic ");
    for chunk in format!("{username}:{password}").as_bytes().chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            let sextet = (n >> (18 - 6 * i)) & 63;
            out.push(if i <= chunk.len() { char::from(ALPHABET[sextet as usize]) } else { '=' });
        }
    }
    out
}

/// The ids `first, first + step, ...` up to `last`: `take` of them after skipping `skip`, and
/// whether more follow. Computed rather than scanned, so any page costs only its size.
fn window(first: u64, step: u64, last: u64, skip: u64, take: u64) -> (Vec<u64>, bool) {
    let Some(start) = skip.checked_mul(step).and_then(|offset| first.checked_add(offset)).filter(|&s| s <= last) else {
        return (Vec::new(), false);
    };
    let available = (last - start) / step + 1;
    let n = take.min(available);
    ((0..n).map(|j| start + j * step).collect(), available > n)
}

/// `page` and `per_page`.
fn page_params(q: &Params) -> ApiResult<(u64, u64)> {
    Ok((int_param(q, "page", 1, 1, u64::MAX)?, limit_param(q, "per_page")?))
}

/// Page `page` of all items, and whether more follow.
fn items_page(shared: &AppState, page: u64, per_page: u64) -> (Vec<Item>, bool) {
    let skip = (page - 1).saturating_mul(per_page);
    let (ids, more) = window(1, 1, shared.cfg.records, skip, per_page);
    (items(&ids, &shared.cfg), more)
}

/// The credentials of an `Authorization: <scheme> <credentials>` header (scheme matched
/// case-insensitively), if it has that scheme.
fn authorization<'a>(headers: &'a HeaderMap, scheme: &str) -> Option<&'a str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (sent, credentials) = value.split_once(' ')?;
    sent.eq_ignore_ascii_case(scheme).then(|| credentials.trim())
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, message)
}

/// A JSON request body, or a 400 saying why not.
fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))
}

#[derive(Serialize)]
struct OffsetPage {
    results: Vec<Item>,
    total: u64,
}

/// `GET /v2/items?offset=O&limit=L`: offset pagination; the last page is short (empty past the
/// end), and `total` lets a client stop without asking for it.
async fn offset_items(
    State(shared): State<AppState>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<OffsetPage>> {
    let Query(q) = q?;
    let offset = int_param(&q, "offset", 0, 0, u64::MAX)?;
    let limit = limit_param(&q, "limit")?;
    let (ids, _) = window(1, 1, shared.cfg.records, offset, limit);
    Ok(Json(OffsetPage { results: items(&ids, &shared.cfg), total: shared.cfg.records }))
}

/// `GET /v2/linked_items?page=P&per_page=K`: a bare array, the next page's absolute URL in a
/// `Link` header (RFC 8288) while more remain.
async fn linked_items(
    State(shared): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q?;
    let (page, per_page) = page_params(&q)?;
    let (data, more) = items_page(&shared, page, per_page);
    if !more {
        return Ok(Json(data).into_response());
    }
    // Absolute, as real APIs send it: the client must follow it as given, not rebuild it.
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).or_else(|| uri.authority().map(|a| a.as_str()));
    let host = host.ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "a Host header is needed for the Link"))?;
    let next = page + 1;
    let link = format!("<http://{host}/v2/linked_items?page={next}&per_page={per_page}>; rel=\"next\"");
    Ok(([(header::LINK, link)], Json(data)).into_response())
}

#[derive(Deserialize)]
struct Login {
    username: String,
    password: String,
}

#[derive(Serialize)]
struct Session {
    token: String,
    expires_in: u64,
}

/// `POST /v2/session` `{"username", "password"}`: logs in, for a token to send in
/// [`SESSION_TOKEN_HEADER`].
async fn create_session(State(shared): State<AppState>, body: Bytes) -> ApiResult<Json<Session>> {
    let login: Login = json_body(&body)?;
    if login.username != SESSION_USERNAME || login.password != SESSION_PASSWORD {
        return Err(unauthorized("wrong username or password"));
    }
    let token = shared.create_session(Duration::from_secs(SESSION_EXPIRES_IN_SECS));
    Ok(Json(Session { token, expires_in: SESSION_EXPIRES_IN_SECS }))
}

/// `GET /v2/session/current` with a session token: 200 `{"username"}` while the token is valid,
/// else 401 (what a legacy session authenticator validates a given token with).
async fn current_session(State(shared): State<AppState>, headers: HeaderMap) -> ApiResult<Json<serde_json::Value>> {
    let token = headers.get(SESSION_TOKEN_HEADER).and_then(|t| t.to_str().ok());
    if !token.is_some_and(|t| shared.session_valid(t)) {
        return Err(unauthorized("missing or unknown session token: log in at POST /v2/session"));
    }
    Ok(Json(serde_json::json!({"username": SESSION_USERNAME})))
}

#[derive(Serialize)]
struct HasMorePage {
    data: Vec<Item>,
    has_more: bool,
}

/// `GET /v2/session/items?page=P&per_page=K` with a session token: `has_more` says whether to
/// ask for the next page.
async fn session_items(
    State(shared): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<HasMorePage>> {
    let token = headers.get(SESSION_TOKEN_HEADER).and_then(|t| t.to_str().ok());
    if !token.is_some_and(|t| shared.session_valid(t)) {
        return Err(unauthorized("missing or unknown session token: log in at POST /v2/session"));
    }
    let Query(q) = q?;
    let (page, per_page) = page_params(&q)?;
    let (data, has_more) = items_page(&shared, page, per_page);
    Ok(Json(HasMorePage { data, has_more }))
}

#[derive(Serialize)]
struct AccessToken {
    access_token: String,
    expires_in: u64,
    token_type: &'static str,
}

/// `POST /v2/oauth/token`: the refresh-token grant (RFC 6749 section 6), client credentials in
/// the body. Errors carry the RFC's error code first.
async fn oauth_token(State(shared): State<AppState>, headers: HeaderMap, body: Bytes) -> ApiResult<Json<AccessToken>> {
    let fields = token_request_fields(&headers, &body)?;
    let field = |name: &str| fields.get(name).map(String::as_str);
    let bad_request = |message: &str| ApiError::new(StatusCode::BAD_REQUEST, message);
    match field("grant_type") {
        Some("refresh_token") => {}
        None => return Err(bad_request("invalid_request: grant_type is missing")),
        Some(_) => return Err(bad_request("unsupported_grant_type: only refresh_token is supported")),
    }
    if field("client_id") != Some(OAUTH_CLIENT_ID) || field("client_secret") != Some(OAUTH_CLIENT_SECRET) {
        return Err(unauthorized("invalid_client: wrong client_id or client_secret"));
    }
    if field("refresh_token") != Some(OAUTH_REFRESH_TOKEN) {
        return Err(bad_request("invalid_grant: wrong refresh_token"));
    }
    let expires_in = shared.cfg.oauth_expires_in_secs;
    let access_token = shared.issue_access_token(Duration::from_secs(expires_in));
    Ok(Json(AccessToken { access_token, expires_in, token_type: "Bearer" }))
}

/// A token request's fields, from a form-encoded body (what RFC 6749 specifies) or a JSON object
/// of strings (what many APIs accept): by `Content-Type`, or without a known one, by whether the
/// body looks like JSON.
fn token_request_fields(headers: &HeaderMap, body: &[u8]) -> ApiResult<HashMap<String, String>> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let is_json = match essence.as_str() {
        "application/json" => true,
        "application/x-www-form-urlencoded" => false,
        _ => body.trim_ascii_start().starts_with(b"{"),
    };
    if is_json {
        json_body(body)
    } else {
        serde_urlencoded::from_bytes(body)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid form body: {e}")))
    }
}

#[derive(Serialize)]
struct NextPageNumber {
    data: Vec<Item>,
    next_page: Option<u64>,
}

/// `GET /v2/oauth/items?page=P&per_page=K` with an unexpired access token: `next_page` is the
/// number to ask for next, null on the last page.
async fn oauth_items(
    State(shared): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<NextPageNumber>> {
    if !authorization(&headers, "Bearer").is_some_and(|t| shared.access_token_valid(t)) {
        return Err(unauthorized("missing, unknown or expired access token: refresh at POST /v2/oauth/token"));
    }
    let Query(q) = q?;
    let (page, per_page) = page_params(&q)?;
    let (data, more) = items_page(&shared, page, per_page);
    Ok(Json(NextPageNumber { data, next_page: more.then_some(page + 1) }))
}

/// A page without any hint of what follows: clients stop at a short (or empty) page.
#[derive(Serialize)]
struct DataPage {
    data: Vec<Item>,
}

/// `GET /v2/keyed/items?page=P&per_page=K` with the API key in a header or the query.
async fn keyed_items(
    State(shared): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<DataPage>> {
    let Query(q) = q?;
    let in_header = headers.get(API_KEY_HEADER).is_some_and(|k| k.as_bytes() == API_KEY.as_bytes());
    let in_query = q.get(API_KEY_PARAM).is_some_and(|k| k == API_KEY);
    if !(in_header || in_query) {
        return Err(unauthorized("missing or wrong API key"));
    }
    let (page, per_page) = page_params(&q)?;
    Ok(Json(DataPage { data: items_page(&shared, page, per_page).0 }))
}

/// `GET /v2/basic/items?page=P&per_page=K` with HTTP basic authentication.
async fn basic_items(
    State(shared): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<DataPage>> {
    let expected = basic_authorization(BASIC_USERNAME, BASIC_PASSWORD);
    let expected = expected.strip_prefix("Basic ").expect("a basic authorization");
    if authorization(&headers, "Basic") != Some(expected) {
        return Err(unauthorized("missing or wrong basic credentials"));
    }
    let Query(q) = q?;
    let (page, per_page) = page_params(&q)?;
    Ok(Json(DataPage { data: items_page(&shared, page, per_page).0 }))
}

/// `GET /v2/throttled_items?page=P&per_page=K`: the first request for each page is a 429 with
/// `Retry-After`, so a client must wait and retry once per page.
async fn throttled_items(
    State(shared): State<AppState>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q?;
    let (page, per_page) = page_params(&q)?;
    if shared.throttle_once(page) {
        let secs = shared.cfg.retry_after_secs;
        let err = ApiError::new(StatusCode::TOO_MANY_REQUESTS, format!("page {page} is throttled: retry in {secs} s"));
        return Ok(([(header::RETRY_AFTER, secs.to_string())], err).into_response());
    }
    Ok(Json(DataPage { data: items_page(&shared, page, per_page).0 }).into_response())
}

/// `GET /v2/accounts/{id}/items?page=P&per_page=K`: an account's items, with declared errors a
/// manifest can filter: 404 for unknown accounts, 403 for suspended ones.
async fn account_items(
    State(shared): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<DataPage>> {
    let Query(q) = q?;
    let accounts = shared.cfg.accounts;
    let account_id = id
        .parse::<u64>()
        .ok()
        .filter(|a| (1..=accounts).contains(a))
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such account"))?;
    if account_id.is_multiple_of(SUSPENDED_ACCOUNT_EVERY) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "account suspended"));
    }
    let (page, per_page) = page_params(&q)?;
    // An account's items are every `accounts`-th id, from the account's id.
    let skip = (page - 1).saturating_mul(per_page);
    let (ids, _) = window(account_id, accounts, shared.cfg.records, skip, per_page);
    Ok(Json(DataPage { data: items(&ids, &shared.cfg) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_authorization_is_standard_base64() {
        assert_eq!(basic_authorization(BASIC_USERNAME, BASIC_PASSWORD), "Basic ZGVtbzpkZW1vLXBhc3N3b3Jk");
        // RFC 4648 test vectors, with an empty password (so "user:" is what gets encoded).
        assert_eq!(basic_authorization("", ""), "Basic Og==");
        assert_eq!(basic_authorization("f", ""), "Basic Zjo=");
        assert_eq!(basic_authorization("fo", ""), "Basic Zm86");
        assert_eq!(basic_authorization("Aladdin", "open sesame"), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }

    #[test]
    fn window_pages_arithmetic_sequences() {
        assert_eq!(window(1, 1, 10, 0, 4), (vec![1, 2, 3, 4], true));
        assert_eq!(window(1, 1, 10, 8, 4), (vec![9, 10], false));
        assert_eq!(window(1, 1, 10, 6, 4), (vec![7, 8, 9, 10], false));
        assert_eq!(window(1, 1, 10, 10, 4), (vec![], false));
        assert_eq!(window(1, 1, 0, 0, 4), (vec![], false));
        assert_eq!(window(2, 3, 20, 1, 3), (vec![5, 8, 11], true));
        assert_eq!(window(2, 3, 20, 5, 3), (vec![17, 20], false));
        assert_eq!(window(1, 1, 10, u64::MAX, 4), (vec![], false));
        assert_eq!(window(2, 3, u64::MAX, u64::MAX / 2, 1), (vec![], false));
    }
}
