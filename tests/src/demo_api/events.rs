//! `/v2/events`: a small data set the test sets and changes between syncs, for what the computed
//! items cannot show: records that arrive late (written after a sync, with a cursor value
//! before that sync's clock), cursors in epoch seconds or in date-times with offsets, and
//! top-level `null` fields. The differential tests against the Airbyte CDK run both engines on it.
//!
//! Every event is a JSON object with an integer `id` and an integer `created` (epoch seconds);
//! whatever else it carries is served as it is. Listings are in `id` order:
//! - `GET /v2/events?since=S&until=U&account_id=A&page=P&per_page=K`: the events whose `created`
//!   is within `[S, U]` (each bound optional; an integer of epoch seconds, or a date-time, with an
//!   offset, `Z`, or none for UTC, `T` or a space between date and time; a bare date is its
//!   midnight), of account `A` when given; `{"data": [...], "next_page": P + 1 | null}`.
//!   With `since_id=N` only the events whose `id` is at least N (what an IncrementingCountCursor's
//!   `start_value_option` sends).
//!   With `format=xml` the page is XML: `<events next_page="P"><event id="1">` and an element a
//!   field (what the XmlDecoder reads).
//!   With `format=repeated` every key of the page is written twice, a decoy first (`"data":
//!   [{"id": -1, ...}], "next_page": null`), then the page's own: JSON parsers keep the last.
//!   With `order=created` they are in `created` order (then `id`); with `page_limit=N` a page
//!   past the N-th is refused, `400 {"errors": "You cannot access events beyond the N-th page"}`
//!   (as Freshdesk refuses tickets past the 300th page).
//! - `GET /v2/event_accounts?embed=K&since=S&until=U`: `{"data": [{"id": A, "updated": T}, ...]}`,
//!   the accounts the events name, in `id` order, `updated` the newest `created` of the account's
//!   events as an RFC 3339 date-time in UTC (an account is updated when it gets an event: what a
//!   parent stream with its own cursor reads, for `incremental_dependency`); with `since` / `until`
//!   (as for `/v2/events`) only the accounts whose `updated` is within them; with `embed`, each
//!   carries its first page of events as `/v2/events?account_id=A&per_page=K` answers it, under
//!   `events` (what a `lazy_read_pointer` reads, as Stripe embeds an invoice's first lines in the
//!   invoice).
//! - `PUT /v2/events` with a JSON array: the events served from now on (as
//!   [`DemoApi::set_events`](super::DemoApi::set_events), for a server in another process).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::data::parse_rfc3339;
use super::routes::{ApiError, ApiResult, AppState, Params};

pub(super) async fn events(
    State(shared): State<AppState>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q?;
    let (since, until) = (bound(&q, "since")?, bound(&q, "until")?);
    let number =
        |name: &str, default: u64| -> ApiResult<u64> {
            match q.get(name) {
                None => Ok(default),
                Some(v) => v.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    ApiError::new(StatusCode::BAD_REQUEST, format!("{name} must be a positive integer"))
                }),
            }
        };
    let (page, per_page) = (number("page", 1)?, number("per_page", 100)?.min(super::MAX_PAGE_SIZE));
    let account = q.get("account_id").map(|a| a.to_string());
    let since_id =
        match q.get("since_id").map(|v| v.trim()) {
            None => None,
            Some(v) => Some(v.parse::<i64>().map_err(|_| {
                ApiError::new(StatusCode::BAD_REQUEST, format!("since_id must be an integer, not {v:?}"))
            })?),
        };
    let mut matching: Vec<Value> = shared
        .events()
        .into_iter()
        .filter(|e| {
            let created = e["created"].as_i64().unwrap_or(i64::MIN);
            since.is_none_or(|s| created >= s)
                && until.is_none_or(|u| created <= u)
                && account.as_deref().is_none_or(|a| plain(&e["account_id"]) == a)
                && since_id.is_none_or(|n| e["id"].as_i64().is_some_and(|id| id >= n))
        })
        .collect();
    match q.get("order").map(String::as_str) {
        None | Some("id") => matching.sort_by_key(|e| e["id"].as_i64()),
        Some("created") => matching.sort_by_key(|e| (e["created"].as_i64(), e["id"].as_i64())),
        Some(other) => {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, format!("order: {other:?} is not id or created")));
        }
    }
    if let Some(limit) = q.get("page_limit") {
        let limit: u64 = limit
            .parse()
            .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "page_limit must be a positive integer"))?;
        if page > limit {
            return Ok((
                StatusCode::BAD_REQUEST,
                Json(json!({"errors": format!("You cannot access events beyond the {limit}-th page")})),
            )
                .into_response());
        }
    }
    let skip = (page - 1).saturating_mul(per_page) as usize;
    let data: Vec<Value> = matching.iter().skip(skip).take(per_page as usize).cloned().collect();
    let more = matching.len() > skip.saturating_add(per_page as usize);
    let next = if more { json!(page + 1) } else { Value::Null };
    if q.get("format").map(String::as_str) == Some("xml") {
        return Ok(xml_page(&data, &next).into_response());
    }
    if q.get("format").map(String::as_str) == Some("repeated") {
        let decoy = json!([{"id": -1, "created": 0}]);
        let body =
            format!(r#"{{"data": {decoy}, "next_page": null, "data": {}, "next_page": {next}}}"#, Value::from(data));
        return Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response());
    }
    Ok(Json(json!({"data": data, "next_page": next})).into_response())
}

/// A page as XML: `<events next_page="P"><event id="1"><created>..</created>...</event></events>`,
/// a field an element (a null one empty, an object's fields nested, a list's items repeated).
fn xml_page(events: &[Value], next: &Value) -> Response {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<events");
    if !next.is_null() {
        out.push_str(&format!(" next_page=\"{next}\""));
    }
    out.push('>');
    for event in events {
        out.push_str(&format!("<event id=\"{}\">", escape(&plain(&event["id"]))));
        for (key, value) in event.as_object().into_iter().flatten().filter(|(k, _)| *k != "id") {
            xml_element(&mut out, key, value);
        }
        out.push_str("</event>");
    }
    out.push_str("</events>\n");
    ([(header::CONTENT_TYPE, "application/xml")], out).into_response()
}

fn xml_element(out: &mut String, name: &str, value: &Value) {
    match value {
        Value::Null => out.push_str(&format!("<{name}/>")),
        Value::Array(items) => items.iter().for_each(|item| xml_element(out, name, item)),
        Value::Object(fields) => {
            out.push_str(&format!("<{name}>"));
            fields.iter().for_each(|(k, v)| xml_element(out, k, v));
            out.push_str(&format!("</{name}>"));
        }
        other => out.push_str(&format!("<{name}>{}</{name}>", escape(&plain(other)))),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub(super) async fn set_events(State(shared): State<AppState>, body: axum::body::Bytes) -> ApiResult<StatusCode> {
    let events: Vec<Value> = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("a JSON array of events is wanted: {e}")))?;
    shared.set_events(events);
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn event_accounts(
    State(shared): State<AppState>,
    q: Result<Query<Params>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(q) = q?;
    let embed = match q.get("embed") {
        None => None,
        Some(v) => {
            Some(v.parse::<usize>().ok().filter(|n| (1..=super::MAX_PAGE_SIZE as usize).contains(n)).ok_or_else(
                || ApiError::new(StatusCode::BAD_REQUEST, "embed must be a positive integer, a page size"),
            )?)
        }
    };
    let (since, until) = (bound(&q, "since")?, bound(&q, "until")?);
    let events = shared.events();
    // Each account with the newest `created` of its events.
    let mut accounts: Vec<(Value, i64)> = Vec::new();
    for e in &events {
        let id = e["account_id"].clone();
        let created = e["created"].as_i64().unwrap_or(i64::MIN);
        if id.is_null() {
            continue;
        }
        match accounts.iter_mut().find(|(a, _)| *a == id) {
            Some((_, updated)) => *updated = (*updated).max(created),
            None => accounts.push((id, created)),
        }
    }
    accounts.retain(|(_, updated)| since.is_none_or(|s| *updated >= s) && until.is_none_or(|u| *updated <= u));
    accounts.sort_by_key(|(id, _)| id.as_i64());
    let accounts = accounts
        .into_iter()
        .map(|(id, updated)| {
            let mut account = json!({"id": id, "updated": super::data::format_rfc3339(updated)});
            if let Some(per_page) = embed {
                let mut own: Vec<&Value> = events.iter().filter(|e| e["account_id"] == id).collect();
                own.sort_by_key(|e| e["id"].as_i64());
                let next = if own.len() > per_page { json!(2) } else { Value::Null };
                let data: Vec<Value> = own.into_iter().take(per_page).cloned().collect();
                account["events"] = json!({"data": data, "next_page": next});
            }
            account
        })
        .collect::<Vec<_>>();
    Ok(Json(json!({"data": accounts})))
}

/// A `since` / `until` parameter: epoch seconds, from an integer or a date-time.
fn bound(q: &Params, name: &str) -> ApiResult<Option<i64>> {
    match q.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse_instant(v)
            .map(Some)
            .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, format!("{name}: not a date-time or epoch: {v:?}"))),
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Epoch seconds, from an integer or a date-time in the forms real clients send.
pub fn parse_instant(text: &str) -> Option<i64> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(n);
    }
    if let Ok(f) = text.parse::<f64>() {
        return Some(f.floor() as i64);
    }
    let mut t = text.replacen(' ', "T", 1);
    if t.len() == 10 {
        t.push_str("T00:00:00Z");
    }
    // `+0200` as `+02:00`; no offset at all as UTC.
    let b = t.as_bytes();
    let n = b.len();
    if n > 5 && matches!(b[n - 5], b'+' | b'-') && b[n - 4..].iter().all(u8::is_ascii_digit) && n - 5 >= 19 {
        t.insert(n - 2, ':');
    } else if !(t.ends_with('Z') || t.ends_with('z') || (n > 6 && matches!(b[n - 6], b'+' | b'-') && b[n - 3] == b':'))
    {
        t.push('Z');
    }
    parse_rfc3339(&t)
}

#[cfg(test)]
mod tests {
    use super::parse_instant;

    #[test]
    fn instants_in_the_forms_clients_send() {
        let t = 1_741_869_050; // 2025-03-13T12:30:50Z
        assert_eq!(parse_instant("1741869050"), Some(t));
        assert_eq!(parse_instant("2025-03-13T12:30:50Z"), Some(t));
        assert_eq!(parse_instant("2025-03-13T14:30:50+02:00"), Some(t));
        assert_eq!(parse_instant("2025-03-13T14:30:50.868000+0200"), Some(t));
        assert_eq!(parse_instant("2025-03-13 12:30:50"), Some(t));
        assert_eq!(parse_instant("2025-03-13 12:30:50+00:00"), Some(t));
        assert_eq!(parse_instant("2025-03-13"), Some(t - 12 * 3600 - 30 * 60 - 50));
        assert_eq!(parse_instant("yesterday"), None);
    }
}
