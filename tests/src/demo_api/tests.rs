//! Tests over real sockets, with a minimal HTTP/1.1 client so they exercise exactly what goes on
//! the wire.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::data::{format_rfc3339 as ts, item_updated_at};
use super::{DemoApi, DemoApiConfig, Stats};

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("UTF-8 body")
    }
}

/// One request with a JSON content type on a fresh connection (`Connection: close`), read to
/// the end.
async fn request(addr: SocketAddr, method: &str, target: &str, body: &str) -> Response {
    send(addr, method, target, &[("Content-Type", "application/json")], body).await
}

/// Like [`request`], with exactly the given headers (plus `Host: ADDR` unless they have a `Host`,
/// `Connection` and `Content-Length`).
async fn send(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut head = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        head += &format!("Host: {addr}\r\n");
    }
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += &format!("Connection: close\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body.as_bytes()).await.expect("write body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read response");
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Response {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of head");
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status code");
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header line");
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    let mut response = Response { status, headers, body: raw[split + 4..].to_vec() };
    if response.header("transfer-encoding") == Some("chunked") {
        response.body = dechunk(&response.body);
    }
    response
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size_line = std::str::from_utf8(&rest[..eol]).expect("chunk size");
        let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16).expect("hex size");
        rest = &rest[eol + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

async fn get(api: &DemoApi, target: &str) -> Response {
    request(api.addr(), "GET", target, "").await
}

/// GET expecting 200 with a JSON body.
async fn get_ok(api: &DemoApi, target: &str) -> Value {
    let response = get(api, target).await;
    assert_eq!(response.status, 200, "GET {target}: {}", response.text());
    response.json()
}

async fn post(api: &DemoApi, target: &str, body: &str) -> Response {
    request(api.addr(), "POST", target, body).await
}

async fn delete(api: &DemoApi, target: &str) -> Response {
    request(api.addr(), "DELETE", target, "").await
}

async fn start(cfg: DemoApiConfig) -> DemoApi {
    DemoApi::start(cfg).await.expect("start demo api")
}

fn ids(page: &Value) -> Vec<u64> {
    page["data"].as_array().expect("data array").iter().map(|r| r["id"].as_u64().expect("id")).collect()
}

/// Asserts the ids are exactly `expected`, reporting duplicates and gaps legibly.
fn assert_exact_ids(got: &[u64], expected: impl IntoIterator<Item = u64>, context: &str) {
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "{context}: duplicate ids");
    assert_eq!(got, expected.into_iter().collect::<Vec<_>>(), "{context}");
}

/// Follows `next_cursor` from `/items?{query}limit={limit}` (`query` empty or ending in `&`) to
/// the end, checking that only the last page is short and that no page is empty unless it is the
/// only one. Returns the ids and the number of pages.
async fn follow_item_cursors(api: &DemoApi, query: &str, limit: u64) -> (Vec<u64>, u64) {
    let context = format!("{query}limit={limit}");
    let (mut seen, mut pages) = (Vec::new(), 0);
    let mut target = format!("/items?{query}limit={limit}");
    loop {
        let page = get_ok(api, &target).await;
        let page_ids = ids(&page);
        pages += 1;
        assert!(pages == 1 || !page_ids.is_empty(), "{context}: page {pages} is empty");
        seen.extend(&page_ids);
        let Some(cursor) = page["next_cursor"].as_str() else {
            return (seen, pages);
        };
        assert_eq!(page_ids.len() as u64, limit, "{context}: only the last page may be short");
        target = format!("/items?{query}limit={limit}&cursor={cursor}");
    }
}

#[tokio::test]
async fn items_have_the_documented_shape() {
    let api = start(DemoApiConfig { records: 12, accounts: 5, ..Default::default() }).await;
    let page = get_ok(&api, "/items").await;
    assert_eq!(
        page["data"][0],
        json!({"id": 1, "name": "item-1", "account_id": 1, "amount": 7, "updated_at": "2024-01-01T00:01:00Z"})
    );
    assert_eq!(
        page["data"][11],
        json!({"id": 12, "name": "item-12", "account_id": 2, "amount": 84, "updated_at": "2024-01-01T00:12:00Z"})
    );
    assert_eq!(page["next_cursor"], Value::Null);

    let accounts = get_ok(&api, "/accounts").await;
    assert_eq!(accounts["data"][4], json!({"id": 5, "name": "account-5", "created_at": "2023-01-01T00:00:00Z"}));
    assert_eq!((accounts["page"].as_u64(), accounts["per_page"].as_u64()), (Some(1), Some(100)));
}

#[tokio::test]
async fn cursor_pages_cover_every_item_exactly_once() {
    let records = 300;
    let api = start(DemoApiConfig { records, ..Default::default() }).await;
    for limit in [1, 3, 7, 100, 299, 300, 301, 10_000] {
        let mut seen = Vec::new();
        let mut target = format!("/items?limit={limit}");
        let mut pages = 0;
        loop {
            let page = get_ok(&api, &target).await;
            let page_ids = ids(&page);
            pages += 1;
            assert!(!page_ids.is_empty(), "limit {limit}: no page is empty");
            seen.extend(&page_ids);
            let Some(cursor) = page["next_cursor"].as_str() else {
                break;
            };
            assert_eq!(page_ids.len() as u64, limit, "limit {limit}: only the last page may be short");
            target = format!("/items?limit={limit}&cursor={cursor}");
        }
        assert_exact_ids(&seen, 1..=records, &format!("limit {limit}"));
        assert_eq!(pages, records.div_ceil(limit), "limit {limit}: no extra empty page");
    }
}

#[tokio::test]
async fn default_limit_is_100() {
    let api = start(DemoApiConfig { records: 250, ..Default::default() }).await;
    let page = get_ok(&api, "/items").await;
    assert_exact_ids(&ids(&page), 1..=100, "first page");
    let cursor = page["next_cursor"].as_str().unwrap();
    let page = get_ok(&api, &format!("/items?cursor={cursor}")).await;
    assert_exact_ids(&ids(&page), 101..=200, "second page");
}

#[tokio::test]
async fn page_numbers_run_out_with_a_short_then_empty_page() {
    let api = start(DemoApiConfig { records: 10, accounts: 5, ..Default::default() }).await;
    let expected: [&[u64]; 4] = [&[1, 2], &[3, 4], &[5], &[]];
    for (page, want) in (1..).zip(expected) {
        let body = get_ok(&api, &format!("/accounts?page={page}&per_page=2")).await;
        assert_eq!(ids(&body), want, "page {page}");
        assert_eq!((body["page"].as_u64(), body["per_page"].as_u64()), (Some(page), Some(2)));
    }
    let far = get_ok(&api, &format!("/accounts?page={}&per_page=10000", u64::MAX)).await;
    assert_eq!(ids(&far), Vec::<u64>::new());
}

#[tokio::test]
async fn account_items_follow_next_links_to_the_end() {
    let (records, accounts) = (100, 3);
    let api = start(DemoApiConfig { records, accounts, ..Default::default() }).await;
    let after = ts(item_updated_at(40));
    // Account 2 owns ids 2, 5, 8, ...; only those updated after item 40 count.
    let expected: Vec<u64> = (41..=records).filter(|i| (i - 1) % accounts + 1 == 2).collect();

    let mut seen = Vec::new();
    let mut target = format!("/accounts/2/items?updated_after={after}&limit=4");
    loop {
        let page = get_ok(&api, &target).await;
        for item in page["data"].as_array().unwrap() {
            assert_eq!(item["account_id"], 2);
            assert!(item["updated_at"].as_str().unwrap() > after.as_str());
        }
        seen.extend(ids(&page));
        match page["next"].as_str() {
            Some(next) => {
                assert!(next.starts_with("/accounts/2/items?"), "{next}");
                assert!(next.contains(&format!("updated_after={after}")), "{next}");
                assert!(next.contains("limit=4"), "{next}");
                target = next.to_owned();
            }
            None => break,
        }
    }
    assert_exact_ids(&seen, expected, "account 2 after item 40");

    // Without a filter: all of the account's items; a fraction below the next minute still
    // excludes nothing newer, and an offset timestamp survives the round trip through `next`.
    let page = get_ok(&api, "/accounts/3/items?limit=10000").await;
    assert_exact_ids(&ids(&page), (3..=records).step_by(3), "account 3, unfiltered");
    let page = get_ok(&api, "/accounts/1/items?updated_after=2024-01-01T00:39:59.999Z").await;
    assert_eq!(ids(&page).first(), Some(&40));
    let page = get_ok(&api, "/accounts/1/items?updated_after=2024-01-01T01:39:00%2B01:00&limit=1").await;
    assert_eq!(ids(&page), [40]);
    let next = page["next"].as_str().unwrap();
    assert_eq!(ids(&get_ok(&api, next).await), [43]);
}

#[tokio::test]
async fn unknown_accounts_reports_and_paths_are_404_json() {
    let api = start(DemoApiConfig { accounts: 3, ..Default::default() }).await;
    for target in [
        "/accounts/4/items",
        "/accounts/0/items",
        "/accounts/x/items",
        "/reports/job-1",
        "/reports/job-1/download",
        "/nope",
    ] {
        let response = get(&api, target).await;
        assert_eq!(response.status, 404, "{target}");
        assert!(response.json()["error"].is_string(), "{target}");
    }
    assert_eq!(delete(&api, "/reports/job-1").await.status, 404);
    let response = delete(&api, "/items").await;
    assert_eq!(response.status, 405);
    assert!(response.json()["error"].is_string());
}

#[tokio::test]
async fn bad_parameters_are_400_naming_the_parameter() {
    let api = start(DemoApiConfig { records: 50, accounts: 2, ..Default::default() }).await;
    let cases = [
        ("/items?limit=0", "limit"),
        ("/items?limit=10001", "limit"),
        ("/items?limit=ten", "limit"),
        ("/items?cursor=bogus", "cursor"),
        ("/items?cursor=c51", "cursor"),
        ("/items?cursor=c0", "cursor"),
        ("/items?updated_after=yesterday", "updated_after"),
        ("/items?updated_after=", "updated_after"),
        ("/items?updated_until=2024-01-01T00:00:00", "updated_until"),
        ("/items?updated_until=2024-02-30T00:00:00Z&updated_after=2024-01-01T00:00:00Z", "updated_until"),
        ("/items?updated_after=2024-01-01T00:00:00Z&updated_until=soon&limit=5", "updated_until"),
        ("/accounts?page=0", "page"),
        ("/accounts?per_page=0", "per_page"),
        ("/accounts?per_page=10001", "per_page"),
        ("/accounts/1/items?updated_after=yesterday", "updated_after"),
        ("/accounts/1/items?updated_after=2024-01-01T00:00:00", "updated_after"),
        ("/accounts/1/items?limit=-1", "limit"),
        ("/accounts/1/items?cursor=12", "cursor"),
    ];
    for (target, param) in cases {
        let response = get(&api, target).await;
        assert_eq!(response.status, 400, "{target}");
        let message = response.json()["error"].as_str().unwrap().to_owned();
        assert!(message.contains(&format!("`{param}`")), "{target}: {message}");
    }
    for (body, needle) in [
        ("{", "JSON"),
        (r#"{"account_id": "one"}"#, "JSON"),
        (r#"{"account_id": 3}"#, "account_id"),
        (r#"{"updated_after": "soon"}"#, "updated_after"),
    ] {
        let response = post(&api, "/reports", body).await;
        assert_eq!(response.status, 400, "{body}");
        let message = response.json()["error"].as_str().unwrap().to_owned();
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(api.stats().jobs_created, 0);
}

#[tokio::test]
async fn injected_errors_alternate_429_and_500_on_schedule() {
    let api = start(DemoApiConfig { error_every: 3, retry_after_secs: 7, ..Default::default() }).await;
    let mut statuses = Vec::new();
    for n in 1..=12 {
        let response = get(&api, "/items?limit=1").await;
        // Stats requests are not counted, so they must not shift the schedule.
        get_ok(&api, "/_stats").await;
        match response.status {
            429 => assert_eq!(response.header("retry-after"), Some("7"), "request {n}"),
            _ => assert_eq!(response.header("retry-after"), None, "request {n}"),
        }
        if response.status != 200 {
            assert!(response.json()["error"].is_string(), "request {n}");
        }
        statuses.push(response.status);
    }
    assert_eq!(statuses, [200, 200, 429, 200, 200, 500, 200, 200, 429, 200, 200, 500]);

    let stats = api.stats();
    assert_eq!((stats.requests, stats.errors_injected), (12, 4));
    assert_eq!(stats.requests_by_path.get("/items"), Some(&12));
    assert_eq!(stats.requests_by_path.get("/_stats"), None);
    let served: Stats = serde_json::from_value(get_ok(&api, "/_stats").await).unwrap();
    assert_eq!(served, stats);
}

#[tokio::test]
async fn injected_errors_change_no_state() {
    let api = start(DemoApiConfig { error_every: 2, job_polls: 1, ..Default::default() }).await;
    assert_eq!(post(&api, "/reports", "{}").await.status, 201); // request 1
    assert_eq!(post(&api, "/reports", "{}").await.status, 429); // request 2: no job
    let created = post(&api, "/reports", "{}").await; // request 3
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["id"], "job-2");
    assert_eq!(get(&api, "/reports/job-1").await.status, 500); // request 4: not a poll
    assert_eq!(get_ok(&api, "/reports/job-1").await["status"], "completed"); // first real poll
    let stats = api.stats();
    assert_eq!((stats.jobs_created, stats.jobs_running, stats.errors_injected), (2, 1, 2));
}

#[tokio::test]
async fn report_jobs_run_complete_fail_and_delete() {
    let cfg = DemoApiConfig { records: 20, accounts: 4, job_polls: 2, fail_job_every: 2, ..Default::default() };
    let api = start(cfg).await;

    let first = post(&api, "/reports", r#"{"account_id": 3}"#).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.json(), json!({"id": "job-1", "status": "running"}));
    let second = post(&api, "/reports", "").await.json(); // empty body: every item
    assert_eq!(second["id"], "job-2");
    let stats = api.stats();
    assert_eq!((stats.jobs_created, stats.jobs_running, stats.max_jobs_running), (2, 2, 2));

    assert_eq!(get(&api, "/reports/job-1/download").await.status, 409);
    assert_eq!(get_ok(&api, "/reports/job-1").await, json!({"id": "job-1", "status": "running"}));
    assert_eq!(
        get_ok(&api, "/reports/job-1").await,
        json!({"id": "job-1", "status": "completed", "download_url": "/reports/job-1/download"})
    );
    // Finished jobs stay finished; further polls change nothing.
    assert_eq!(get_ok(&api, "/reports/job-1").await["status"], "completed");
    assert_eq!(api.stats().jobs_running, 1);

    let download = get(&api, "/reports/job-1/download").await;
    assert_eq!(download.status, 200);
    assert_eq!(download.header("content-type"), Some("application/x-ndjson"));
    let lines: Vec<Value> = download.text().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().map(|v| v["id"].as_u64().unwrap()).collect::<Vec<_>>(), [3, 7, 11, 15, 19]);
    assert_eq!(lines[0], get_ok(&api, "/items?limit=3").await["data"][2]);

    // Job 2 is the second job, so with fail_job_every = 2 it fails.
    assert_eq!(get_ok(&api, "/reports/job-2").await["status"], "running");
    let failed = get_ok(&api, "/reports/job-2").await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"].is_string() && failed.get("download_url").is_none());
    assert_eq!(get(&api, "/reports/job-2/download").await.status, 409);
    let stats = api.stats();
    assert_eq!((stats.jobs_created, stats.jobs_running, stats.max_jobs_running), (2, 0, 2));

    // Deleting a running job aborts it; deleting twice is a 404.
    let third = post(&api, "/reports", r#"{"updated_after": "2024-01-01T00:15:00Z"}"#).await.json();
    assert_eq!(api.stats().jobs_running, 1);
    assert_eq!(delete(&api, "/reports/job-3").await.status, 204);
    assert_eq!(third["id"], "job-3");
    assert_eq!(api.stats().jobs_running, 0);
    assert_eq!(delete(&api, "/reports/job-3").await.status, 404);
    assert_eq!(get(&api, "/reports/job-3").await.status, 404);
    assert_eq!(delete(&api, "/reports/job-1").await.status, 204);
    assert_eq!(get(&api, "/reports/job-1/download").await.status, 404);
    assert_eq!(api.stats().jobs_running, 0);

    let by_path = api.stats().requests_by_path;
    assert_eq!(by_path.get("/reports"), Some(&3));
    assert_eq!(by_path.get("/reports/{id}"), Some(&9));
    assert_eq!(by_path.get("/reports/{id}/download"), Some(&4));
}

#[tokio::test]
async fn reports_honour_updated_after_and_zero_polls() {
    let api = start(DemoApiConfig { records: 20, accounts: 4, job_polls: 0, ..Default::default() }).await;
    let body = r#"{"account_id": 2, "updated_after": "2024-01-01T00:10:00Z"}"#;
    let id = post(&api, "/reports", body).await.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(get_ok(&api, &format!("/reports/{id}")).await["status"], "completed");
    let download = get(&api, &format!("/reports/{id}/download")).await;
    let got: Vec<u64> =
        download.text().lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_u64().unwrap()).collect();
    assert_eq!(got, [14, 18]);
}

#[tokio::test]
async fn counts_concurrent_requests_exactly() {
    let api = start(DemoApiConfig::default()).await;
    let addr = api.addr();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let target = if i % 2 == 0 { "/items?limit=5" } else { "/accounts/1/items" };
            tokio::spawn(async move { request(addr, "GET", target, "").await.status })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    assert_eq!(get(&api, "/missing").await.status, 404);
    let stats = api.stats();
    assert_eq!(stats.requests, 65);
    assert_eq!(stats.requests_by_path.get("/items"), Some(&32));
    assert_eq!(stats.requests_by_path.get("/accounts/{id}/items"), Some(&32));
    assert_eq!(stats.requests_by_path.get("<unmatched>"), Some(&1));

    // Every request is logged once, whatever order they arrived in; the last one last.
    assert_eq!(stats.recent_requests.len(), 65);
    assert_eq!(stats.recent_requests.last().map(String::as_str), Some("/missing"));
    let count = |target: &str| stats.recent_requests.iter().filter(|t| *t == target).count();
    assert_eq!((count("/items?limit=5"), count("/accounts/1/items")), (32, 32));
}

#[tokio::test]
async fn latency_delays_everything_but_stats() {
    let latency = Duration::from_millis(300);
    let api = start(DemoApiConfig { latency_ms: 300, ..Default::default() }).await;
    let started = Instant::now();
    get_ok(&api, "/items?limit=1").await;
    assert!(started.elapsed() >= latency);
    let started = Instant::now();
    get_ok(&api, "/_stats").await;
    assert!(started.elapsed() < latency);
}

#[tokio::test]
async fn shutdown_and_wait_stops_listening() {
    let api = start(DemoApiConfig::default()).await;
    let addr = api.addr();
    get_ok(&api, "/items?limit=1").await;
    api.shutdown_and_wait().await;
    assert!(TcpStream::connect(addr).await.is_err());
}

#[test]
fn background_server_serves_sync_callers_and_shuts_down() {
    use std::io::{Read, Write};

    let api = DemoApi::start_background(DemoApiConfig { records: 3, ..Default::default() }).unwrap();
    assert_eq!(api.base_url(), format!("http://127.0.0.1:{}", api.addr().port()));
    let addr = api.addr();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET /items HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let response = parse_response(&raw);
    assert_eq!(response.status, 200);
    assert_eq!(ids(&response.json()), [1, 2, 3]);
    assert_eq!(api.stats().requests, 1);

    // An idle keep-alive connection must not hold shutdown up.
    let _idle = std::net::TcpStream::connect(addr).unwrap();
    let started = Instant::now();
    api.shutdown();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[tokio::test]
async fn rejects_items_without_accounts() {
    let cfg = DemoApiConfig { accounts: 0, ..Default::default() };
    assert!(DemoApi::start(cfg).await.is_err());
}

#[tokio::test]
async fn items_filter_by_update_window() {
    let records = 200;
    let api = start(DemoApiConfig { records, accounts: 3, ..Default::default() }).await;
    // Item i was updated at 2024-01-01T00:00:00Z + i minutes: item 40 at 00:40, item 60 at 01:00.
    let (after_40, until_60) = (ts(item_updated_at(40)), ts(item_updated_at(60)));
    assert_eq!((after_40.as_str(), until_60.as_str()), ("2024-01-01T00:40:00Z", "2024-01-01T01:00:00Z"));

    // `updated_after` is exclusive and `updated_until` inclusive, whatever the page size; a page
    // ending exactly at the window's last item has no next cursor, though items follow it.
    let window = format!("updated_after={after_40}&updated_until={until_60}&");
    for limit in [1, 3, 7, 19, 20, 21, 10_000] {
        let (seen, pages) = follow_item_cursors(&api, &window, limit).await;
        assert_exact_ids(&seen, 41..=60, &format!("window, limit {limit}"));
        assert_eq!(pages, 20u64.div_ceil(limit), "window, limit {limit}: no extra empty page");
    }
    // The parameters in either order, with the cursor between them.
    let page = get_ok(&api, &format!("/items?updated_until={until_60}&limit=15&updated_after={after_40}")).await;
    assert_exact_ids(&ids(&page), 41..=55, "reordered parameters");
    let cursor = page["next_cursor"].as_str().unwrap();
    let page = get_ok(&api, &format!("/items?updated_until={until_60}&cursor={cursor}&updated_after={after_40}")).await;
    assert_exact_ids(&ids(&page), 56..=60, "reordered parameters, second page");
    assert_eq!(page["next_cursor"], Value::Null);

    // Each bound on its own.
    let (seen, _) = follow_item_cursors(&api, &format!("updated_after={}&", ts(item_updated_at(190))), 4).await;
    assert_exact_ids(&seen, 191..=200, "updated_after alone");
    let (seen, pages) = follow_item_cursors(&api, &format!("updated_until={}&", ts(item_updated_at(5))), 5).await;
    assert_exact_ids(&seen, 1..=5, "updated_until alone");
    assert_eq!(pages, 1);
    let (seen, _) =
        follow_item_cursors(&api, "updated_after=2023-06-01T00:00:00Z&updated_until=2025-01-01T00:00:00Z&", 64).await;
    assert_exact_ids(&seen, 1..=records, "a window around every item");

    // Edges within the second: fractions are floored, offsets honoured.
    for (query, expected) in [
        ("updated_after=2024-01-01T00:39:59.999Z&updated_until=2024-01-01T00:41:00Z", 40..=41),
        ("updated_after=2024-01-01T00:40:59.999Z&updated_until=2024-01-01T00:42:00Z", 41..=42),
        ("updated_after=2024-01-01T00:40:00Z&updated_until=2024-01-01T00:42:59.999Z", 41..=42),
        ("updated_after=2024-01-01T00:40:00Z&updated_until=2024-01-01T00:42:59Z", 41..=42),
        ("updated_after=2024-01-01T00:40:00Z&updated_until=2024-01-01T00:41:59Z", 41..=41),
        ("updated_after=2024-01-01T01%3A40%3A00%2B01%3A00&updated_until=2024-01-01T00:42:00Z", 41..=42),
        ("updated_after=2024-01-01T00:40:00Z&updated_until=2023-12-31T23:42:00-01:00", 41..=42),
        ("updated_after=2024-01-01T00:40:00Z&updated_until=2024-01-01T01%3A42%3A00%2B01%3A00", 41..=42),
    ] {
        let page = get_ok(&api, &format!("/items?{query}")).await;
        assert_exact_ids(&ids(&page), expected, query);
        assert_eq!(page["next_cursor"], Value::Null, "{query}");
    }

    // Empty windows: a single empty page without a cursor.
    for query in [
        format!("updated_after={until_60}&updated_until={until_60}"),
        format!("updated_after={until_60}&updated_until={after_40}"),
        "updated_until=2024-01-01T00:00:59Z".to_owned(),
        format!("updated_after={}", ts(item_updated_at(records))),
    ] {
        let page = get_ok(&api, &format!("/items?{query}&limit=3")).await;
        assert_eq!(ids(&page), Vec::<u64>::new(), "{query}");
        assert_eq!(page["next_cursor"], Value::Null, "{query}");
    }

    // A cursor from anywhere continues within the window.
    let cases: [(&str, &[u64], Option<&str>); 6] = [
        ("c10", &[41, 42, 43, 44, 45], Some("c45")),
        ("c50", &[51, 52, 53, 54, 55], Some("c55")),
        ("c55", &[56, 57, 58, 59, 60], None),
        ("c56", &[57, 58, 59, 60], None),
        ("c60", &[], None),
        ("c200", &[], None),
    ];
    for (cursor, expected, next) in cases {
        let page = get_ok(&api, &format!("/items?{window}limit=5&cursor={cursor}")).await;
        assert_exact_ids(&ids(&page), expected.iter().copied(), cursor);
        assert_eq!(page["next_cursor"].as_str(), next, "{cursor}");
    }
}

#[tokio::test]
async fn item_bounds_cover_all_items() {
    let api = start(DemoApiConfig { records: 12, accounts: 5, ..Default::default() }).await;
    let bounds = get_ok(&api, "/items/bounds").await;
    assert_eq!(
        bounds,
        json!({"count": 12, "first_updated_at": "2024-01-01T00:01:00Z", "last_updated_at": "2024-01-01T00:12:00Z"})
    );
    let all = get_ok(&api, "/items").await;
    assert_eq!(bounds["first_updated_at"], all["data"][0]["updated_at"]);
    assert_eq!(bounds["last_updated_at"], all["data"][11]["updated_at"]);
    assert_eq!(post(&api, "/items/bounds", "").await.status, 405);
    let stats = api.stats();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.requests_by_path.get("/items/bounds"), Some(&2));

    let empty = start(DemoApiConfig { records: 0, ..Default::default() }).await;
    let bounds = get_ok(&empty, "/items/bounds").await;
    assert_eq!(bounds, json!({"count": 0, "first_updated_at": null, "last_updated_at": null}));
    let page = get_ok(&empty, "/items?updated_after=2024-01-01T00:00:00Z").await;
    assert_eq!((ids(&page), &page["next_cursor"]), (vec![], &Value::Null));
    assert_eq!(empty.stats().requests_by_path.get("/items/bounds"), Some(&1));

    let big = start(DemoApiConfig { records: 3_000_000, ..Default::default() }).await;
    let bounds = get_ok(&big, "/items/bounds").await;
    assert_eq!(bounds["count"], 3_000_000);
    assert_eq!(bounds["last_updated_at"], ts(item_updated_at(3_000_000)));
    let last = get_ok(&big, &format!("/items?updated_after={}", ts(item_updated_at(2_999_999)))).await;
    assert_eq!(last["data"][0]["updated_at"], bounds["last_updated_at"]);
}

#[tokio::test]
async fn slow_match_delays_only_matching_requests() {
    let (latency_ms, slow_ms) = (50, 400);
    let api = start(DemoApiConfig {
        latency_ms,
        slow_ms,
        slow_match: vec!["updated_after=2024-01-01T01:00:00Z".into(), "updated_until=2024-01-01T02:00:00+01:00".into()],
        ..Default::default()
    })
    .await;
    let addr = api.addr();
    // Matched against the percent-decoded target, so escapes in the request do not matter.
    let slow = [
        "/items?updated_after=2024-01-01T01%3A00%3A00Z&limit=1",
        "/items?limit=1&updated_until=2024-01-01T02:00:00%2B01:00",
    ];
    let fast = [
        "/items?updated_after=2024-01-01T02:00:00Z&limit=1",
        "/items?updated_until=2024-01-01T02:00:00Z&limit=1",
        "/items/bounds",
        // The stats endpoint is never delayed, even when it matches.
        "/_stats?updated_after=2024-01-01T01:00:00Z",
    ];
    let started = Instant::now();
    let spawn = |target: &'static str| {
        tokio::spawn(async move {
            let response = request(addr, "GET", target, "").await;
            (response.status, Instant::now())
        })
    };
    // The slow ones go first, so the fast ones can only finish first if they are not delayed.
    let slow_tasks: Vec<_> = slow.into_iter().map(spawn).collect();
    let fast_tasks: Vec<_> = fast.into_iter().map(spawn).collect();
    let mut slow_done = Vec::new();
    for (target, task) in slow.into_iter().zip(slow_tasks) {
        let (status, done) = task.await.unwrap();
        assert_eq!(status, 200, "{target}");
        assert!(done - started >= Duration::from_millis(latency_ms + slow_ms), "{target}: {:?}", done - started);
        slow_done.push(done);
    }
    let first_slow_done = slow_done.into_iter().min().unwrap();
    for (target, task) in fast.into_iter().zip(fast_tasks) {
        let (status, done) = task.await.unwrap();
        assert_eq!(status, 200, "{target}");
        assert!(done < first_slow_done, "{target} finished after a slow request");
    }

    // Sequentially too: latency and the slow delay add up; a non-matching request still waits
    // for the latency.
    let started = Instant::now();
    get_ok(&api, slow[0]).await;
    assert!(started.elapsed() >= Duration::from_millis(latency_ms + slow_ms));
    let started = Instant::now();
    get_ok(&api, fast[0]).await;
    assert!(started.elapsed() >= Duration::from_millis(latency_ms));
}

#[tokio::test]
async fn recent_requests_log_decoded_targets_in_arrival_order() {
    let api = start(DemoApiConfig { records: 20, error_every: 4, ..Default::default() }).await;
    assert_eq!(api.stats().recent_requests, Vec::<String>::new());
    get_ok(&api, "/items?limit=2").await;
    get_ok(&api, "/items?updated_after=2024-01-01T00%3A05%3A00Z&updated_until=2024-01-01T01%3A10%3A00%2B01%3A00").await;
    get_ok(&api, "/_stats").await; // not logged
    assert_eq!(get(&api, "/nope?x=a%20b+c").await.status, 404);
    assert_eq!(post(&api, "/reports", "").await.status, 429); // injected errors are logged too
    get_ok(&api, "/items/bounds").await;
    assert_eq!(get(&api, "/items?limit=0").await.status, 400);
    assert_eq!(delete(&api, "/items").await.status, 405);
    // An absolute-form target is logged by its path and query.
    let absolute = request(api.addr(), "GET", &format!("http://{}/accounts?page=2", api.addr()), "").await;
    assert_eq!(absolute.status, 500);
    assert_eq!(get(&api, "/accounts/1/items?updated_after=%E2%9C%93").await.status, 400);

    let expected = [
        "/items?limit=2",
        "/items?updated_after=2024-01-01T00:05:00Z&updated_until=2024-01-01T01:10:00+01:00",
        "/nope?x=a b+c",
        "/reports",
        "/items/bounds",
        "/items?limit=0",
        "/items",
        "/accounts?page=2",
        "/accounts/1/items?updated_after=✓",
    ];
    let stats = api.stats();
    assert_eq!(stats.recent_requests, expected);
    assert_eq!(stats.requests, expected.len() as u64);
    assert_eq!(stats.errors_injected, 2);
    let served: Stats = serde_json::from_value(get_ok(&api, "/_stats").await).unwrap();
    assert_eq!(served, stats);
}

// The `/v2` endpoints and report formats: each must serve exactly the records `/items` serves.

/// Every item, as `/items` serves them.
async fn all_items(api: &DemoApi) -> Vec<Value> {
    get_ok(api, "/items?limit=10000").await["data"].as_array().expect("data array").clone()
}

/// The records of a JSON array.
fn records(array: &Value) -> Vec<Value> {
    array.as_array().unwrap_or_else(|| panic!("not an array: {array}")).clone()
}

/// Asserts a 401 with a JSON error.
fn assert_unauthorized(response: &Response, context: &str) {
    assert_eq!(response.status, 401, "{context}: {}", response.text());
    assert!(response.json()["error"].is_string(), "{context}");
}

/// Reads `{path}?page=1&per_page={per_page}`, `page=2`, ... (after any query `path` has) with
/// `headers` until a page is short, checking every page's body with `check`; returns the
/// records of the `data` arrays.
async fn read_pages(
    api: &DemoApi,
    path: &str,
    per_page: usize,
    headers: &[(&str, &str)],
    check: impl Fn(u64, &Value),
) -> Vec<Value> {
    let mut seen = Vec::new();
    let separator = if path.contains('?') { '&' } else { '?' };
    for page in 1.. {
        assert!(page <= 1000, "{path}: no short page in sight");
        let target = format!("{path}{separator}page={page}&per_page={per_page}");
        let response = send(api.addr(), "GET", &target, headers, "").await;
        assert_eq!(response.status, 200, "{target}: {}", response.text());
        let body = response.json();
        check(page, &body);
        let data = records(&body["data"]);
        let short = data.len() < per_page;
        seen.extend(data);
        if short {
            break;
        }
    }
    seen
}

#[tokio::test]
async fn v2_offset_pages_serve_the_items_in_order() {
    let records_n = 250;
    let api = start(DemoApiConfig { records: records_n, accounts: 3, ..Default::default() }).await;
    let expected = all_items(&api).await;
    assert_eq!(expected.len(), 250);

    let first = get_ok(&api, "/v2/items").await;
    assert_eq!(first["total"], 250);
    assert_eq!(records(&first["results"]), expected[..100], "default offset 0, limit 100");
    for limit in [1, 7, 100, 249, 250, 251, 10_000] {
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let page = get_ok(&api, &format!("/v2/items?offset={offset}&limit={limit}")).await;
            assert_eq!(page.as_object().unwrap().len(), 2, "only results and total: {page}");
            assert_eq!(page["total"], 250);
            let results = records(&page["results"]);
            let short = (results.len() as u64) < limit;
            offset += results.len();
            seen.extend(results);
            if short {
                break;
            }
        }
        assert_eq!(seen, expected, "limit {limit}");
    }
    let past = get_ok(&api, "/v2/items?offset=250").await;
    assert_eq!((records(&past["results"]).len(), &past["total"]), (0, &json!(250)));
    let far = get_ok(&api, &format!("/v2/items?offset={}&limit=10000", u64::MAX)).await;
    assert_eq!(records(&far["results"]).len(), 0);
    for (target, param) in [
        ("/v2/items?limit=0", "limit"),
        ("/v2/items?limit=10001", "limit"),
        ("/v2/items?offset=-1", "offset"),
        ("/v2/items?offset=x", "offset"),
    ] {
        let response = get(&api, target).await;
        assert_eq!(response.status, 400, "{target}");
        assert!(response.json()["error"].as_str().unwrap().contains(&format!("`{param}`")), "{target}");
    }
}

#[tokio::test]
async fn v2_link_headers_lead_to_the_last_page() {
    let api = start(DemoApiConfig { records: 23, accounts: 4, ..Default::default() }).await;
    let expected = all_items(&api).await;

    let mut seen = Vec::new();
    let mut target = "/v2/linked_items?per_page=5".to_owned();
    let mut pages = 0;
    loop {
        let response = get(&api, &target).await;
        assert_eq!(response.status, 200, "{target}");
        pages += 1;
        seen.extend(records(&response.json()));
        let Some(link) = response.header("link") else {
            break;
        };
        let base = format!("http://{}", api.addr());
        let want = format!("<{base}/v2/linked_items?page={}&per_page=5>; rel=\"next\"", pages + 1);
        assert_eq!(link, want);
        target = link[1..link.find('>').unwrap()].strip_prefix(&base).unwrap().to_owned();
    }
    assert_eq!(pages, 5, "23 items, 5 a page");
    assert_eq!(seen, expected);

    // The link names the host the client asked for, and the page size in effect.
    let response = send(api.addr(), "GET", "/v2/linked_items", &[("Host", "api.example:8443")], "").await;
    assert_eq!(records(&response.json()), expected);
    assert_eq!(response.header("link"), None, "23 items fit the default page");
    let response = send(api.addr(), "GET", "/v2/linked_items?page=2&per_page=10", &[("Host", "api.example")], "").await;
    assert_eq!(records(&response.json()), expected[10..20]);
    assert_eq!(response.header("link"), Some(r#"<http://api.example/v2/linked_items?page=3&per_page=10>; rel="next""#));
    // Exactly at the end: no link, and the page after is an empty array.
    let response = get(&api, "/v2/linked_items?page=1&per_page=23").await;
    assert_eq!((records(&response.json()).len(), response.header("link")), (23, None));
    let response = get(&api, "/v2/linked_items?page=2&per_page=23").await;
    assert_eq!((response.json(), response.header("link")), (json!([]), None));
    assert_eq!(get(&api, "/v2/linked_items?page=0").await.status, 400);
    assert_eq!(api.stats().requests_by_path.get("/v2/linked_items"), Some(&10));
}

#[tokio::test]
async fn v2_session_tokens_come_from_logging_in() {
    use super::v2::{SESSION_EXPIRES_IN_SECS, SESSION_PASSWORD, SESSION_TOKEN_HEADER, SESSION_USERNAME};

    let api = start(DemoApiConfig { records: 12, accounts: 2, ..Default::default() }).await;
    let login = json!({"username": SESSION_USERNAME, "password": SESSION_PASSWORD}).to_string();
    for (body, status) in [
        (json!({"username": SESSION_USERNAME, "password": "guess"}).to_string(), 401),
        (json!({"username": "admin", "password": SESSION_PASSWORD}).to_string(), 401),
        (json!({"username": SESSION_USERNAME}).to_string(), 400),
        ("{".to_owned(), 400),
        (String::new(), 400),
    ] {
        let response = post(&api, "/v2/session", &body).await;
        assert_eq!(response.status, status, "{body}");
        assert!(response.json()["error"].is_string(), "{body}");
    }
    assert_eq!(api.stats().sessions_created, 0);

    let session = post(&api, "/v2/session", &login).await;
    assert_eq!(session.status, 200);
    let session = session.json();
    assert_eq!(session.as_object().unwrap().len(), 2, "{session}");
    assert_eq!(session["expires_in"], SESSION_EXPIRES_IN_SECS);
    let token = session["token"].as_str().unwrap().to_owned();
    let again = post(&api, "/v2/session", &login).await.json()["token"].as_str().unwrap().to_owned();
    assert_ne!(token, again, "every login gets a fresh token");
    assert_eq!(api.stats().sessions_created, 2);

    // Only tokens this server issued are accepted: not a made-up one, nor another server's.
    let other = start(DemoApiConfig::default()).await;
    let foreign = post(&other, "/v2/session", &login).await.json()["token"].as_str().unwrap().to_owned();
    let target = "/v2/session/items";
    assert_unauthorized(&get(&api, target).await, "no token");
    for bad in ["", "session-1", &foreign, &format!("{token}x")] {
        assert_unauthorized(&send(api.addr(), "GET", target, &[(SESSION_TOKEN_HEADER, bad)], "").await, bad);
    }

    let expected = all_items(&api).await;
    for token in [&token, &again] {
        let headers = [(SESSION_TOKEN_HEADER, token.as_str())];
        let seen = read_pages(&api, target, 5, &headers, |page, body| {
            assert_eq!(body.as_object().unwrap().len(), 2, "only data and has_more: {body}");
            assert_eq!(body["has_more"], page < 3, "page {page}");
        })
        .await;
        assert_eq!(seen, expected);
    }
    // A page that ends exactly at the last item has nothing more.
    let headers = [("x-session-token", token.as_str())];
    let last = send(api.addr(), "GET", "/v2/session/items?page=2&per_page=6", &headers, "").await.json();
    assert_eq!((records(&last["data"]), &last["has_more"]), (expected[6..].to_vec(), &json!(false)));
    assert_eq!(api.stats().sessions_created, 2);
}

#[tokio::test]
async fn v2_oauth_refresh_accepts_form_and_json_bodies() {
    use super::v2::{OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_REFRESH_TOKEN};

    let api = start(DemoApiConfig { records: 7, accounts: 2, ..Default::default() }).await;
    let (id, secret, refresh) = (OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_REFRESH_TOKEN);
    let form = format!("grant_type=refresh_token&client_id={id}&client_secret={secret}&refresh_token={refresh}");
    let json_body = json!({
        "grant_type": "refresh_token",
        "client_id": OAUTH_CLIENT_ID,
        "client_secret": OAUTH_CLIENT_SECRET,
        "refresh_token": OAUTH_REFRESH_TOKEN,
    })
    .to_string();
    let form_type = ("Content-Type", "application/x-www-form-urlencoded");
    let json_type = ("Content-Type", "application/json; charset=utf-8");
    let mut tokens = Vec::new();
    for (headers, body) in [
        (&[form_type][..], form.as_str()),
        (&[json_type][..], json_body.as_str()),
        // Without a content type, the body's shape decides.
        (&[][..], form.as_str()),
        (&[][..], json_body.as_str()),
        // Percent-encoded form values decode as they should.
        (&[form_type][..], &form.replace("refresh_token&", "refresh%5Ftoken&").replace("demo-client", "demo%2Dclient")),
    ] {
        let response = send(api.addr(), "POST", "/v2/oauth/token", headers, body).await;
        assert_eq!(response.status, 200, "{body}: {}", response.text());
        let token = response.json();
        assert_eq!(token.as_object().unwrap().len(), 3, "{token}");
        assert_eq!((&token["expires_in"], &token["token_type"]), (&json!(3600), &json!("Bearer")), "{body}");
        tokens.push(token["access_token"].as_str().unwrap().to_owned());
    }
    assert_eq!(tokens.iter().collect::<BTreeSet<_>>().len(), tokens.len(), "every token is fresh");
    assert_eq!(api.stats().tokens_issued, 5);

    let field = |name: &str, value: &str| {
        let pair = form.split('&').find(|p| p.starts_with(&format!("{name}="))).unwrap();
        form.replace(pair, &format!("{name}={value}"))
    };
    for (body, status, code) in [
        (field("grant_type", "client_credentials"), 400, "unsupported_grant_type"),
        (form.replace("grant_type=refresh_token&", ""), 400, "invalid_request"),
        (field("client_id", "someone"), 401, "invalid_client"),
        (field("client_secret", "guess"), 401, "invalid_client"),
        (form.replace(&format!("&client_secret={OAUTH_CLIENT_SECRET}"), ""), 401, "invalid_client"),
        (field("refresh_token", "stale"), 400, "invalid_grant"),
        (String::new(), 400, "invalid_request"),
    ] {
        let response = send(api.addr(), "POST", "/v2/oauth/token", &[form_type], &body).await;
        assert_eq!(response.status, status, "{body}");
        let message = response.json()["error"].as_str().unwrap().to_owned();
        assert!(message.starts_with(code), "{body}: {message}");
    }
    let response = send(api.addr(), "POST", "/v2/oauth/token", &[json_type], r#"{"grant_type": 1}"#).await;
    assert_eq!(response.status, 400);
    assert!(response.json()["error"].as_str().unwrap().contains("JSON"));
    assert_eq!(api.stats().tokens_issued, 5);

    let target = "/v2/oauth/items";
    assert_unauthorized(&get(&api, target).await, "no token");
    let basic = super::v2::basic_authorization("demo", "demo-password");
    for bad in ["Bearer".to_owned(), "Bearer nope".to_owned(), format!("Token {}", tokens[0]), basic] {
        assert_unauthorized(&send(api.addr(), "GET", target, &[("Authorization", &bad)], "").await, &bad);
    }
    let expected = all_items(&api).await;
    for token in &tokens {
        let bearer = format!("Bearer {token}");
        let seen = read_pages(&api, target, 3, &[("Authorization", &bearer)], |page, body| {
            assert_eq!(body.as_object().unwrap().len(), 2, "only data and next_page: {body}");
            assert_eq!(body["next_page"], if page < 3 { json!(page + 1) } else { Value::Null }, "page {page}");
        })
        .await;
        assert_eq!(seen, expected);
    }
    // The scheme is case-insensitive.
    let lower = format!("bearer {}", tokens[1]);
    let page = send(api.addr(), "GET", "/v2/oauth/items?per_page=7", &[("Authorization", &lower)], "").await.json();
    assert_eq!((records(&page["data"]), &page["next_page"]), (expected.clone(), &Value::Null));
}

#[tokio::test]
async fn v2_oauth_access_tokens_expire() {
    use super::v2::{OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_REFRESH_TOKEN};

    let refresh = |api: &DemoApi| {
        let body = json!({
            "grant_type": "refresh_token",
            "client_id": OAUTH_CLIENT_ID,
            "client_secret": OAUTH_CLIENT_SECRET,
            "refresh_token": OAUTH_REFRESH_TOKEN,
        });
        let addr = api.addr();
        async move {
            let response = request(addr, "POST", "/v2/oauth/token", &body.to_string()).await;
            assert_eq!(response.status, 200);
            response.json()
        }
    };
    let items_with = |api: &DemoApi, token: &Value| {
        let (addr, bearer) = (api.addr(), format!("Bearer {}", token["access_token"].as_str().unwrap()));
        async move { send(addr, "GET", "/v2/oauth/items", &[("Authorization", &bearer)], "").await }
    };

    let api = start(DemoApiConfig { records: 3, oauth_expires_in_secs: 1, ..Default::default() }).await;
    let token = refresh(&api).await;
    assert_eq!(token["expires_in"], 1);
    assert_eq!(items_with(&api, &token).await.status, 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_unauthorized(&items_with(&api, &token).await, "expired");
    let fresh = refresh(&api).await;
    assert_eq!(items_with(&api, &fresh).await.status, 200);
    assert_eq!(api.stats().tokens_issued, 2);

    // With 0, a token is expired as soon as it is issued.
    let api = start(DemoApiConfig { oauth_expires_in_secs: 0, ..Default::default() }).await;
    let token = refresh(&api).await;
    assert_eq!(token["expires_in"], 0);
    assert_unauthorized(&items_with(&api, &token).await, "expires_in 0");
}

#[tokio::test]
async fn v2_api_key_and_basic_auth_guard_their_items() {
    use super::v2::{API_KEY, API_KEY_HEADER, API_KEY_PARAM, BASIC_PASSWORD, BASIC_USERNAME, basic_authorization};

    let api = start(DemoApiConfig { records: 11, accounts: 3, ..Default::default() }).await;
    let expected = all_items(&api).await;
    let only_data = |_: u64, body: &Value| assert_eq!(body.as_object().unwrap().len(), 1, "only data: {body}");

    // The key in a header, or in the query (any position).
    let seen = read_pages(&api, "/v2/keyed/items", 4, &[(API_KEY_HEADER, API_KEY)], only_data).await;
    assert_eq!(seen, expected);
    let seen = read_pages(&api, &format!("/v2/keyed/items?{API_KEY_PARAM}={API_KEY}&x=1"), 4, &[], only_data).await;
    assert_eq!(seen, expected);
    let page = get_ok(&api, &format!("/v2/keyed/items?page=3&per_page=4&{API_KEY_PARAM}={API_KEY}")).await;
    assert_eq!(records(&page["data"]), expected[8..]);
    // Either place suffices, even when the other holds a wrong key.
    let response =
        send(api.addr(), "GET", &format!("/v2/keyed/items?{API_KEY_PARAM}={API_KEY}"), &[(API_KEY_HEADER, "x")], "")
            .await;
    assert_eq!(response.status, 200);
    for (target, headers) in [
        ("/v2/keyed/items", &[][..]),
        ("/v2/keyed/items", &[(API_KEY_HEADER, "demo-ke")][..]),
        ("/v2/keyed/items", &[("Authorization", "Bearer demo-key")][..]),
        ("/v2/keyed/items?api_key=DEMO-KEY", &[][..]),
        ("/v2/keyed/items?apikey=demo-key", &[][..]),
    ] {
        assert_unauthorized(&send(api.addr(), "GET", target, headers, "").await, &format!("{target} {headers:?}"));
    }

    let basic = basic_authorization(BASIC_USERNAME, BASIC_PASSWORD);
    assert_eq!(basic, "Basic ZGVtbzpkZW1vLXBhc3N3b3Jk");
    let seen = read_pages(&api, "/v2/basic/items", 4, &[("Authorization", &basic)], only_data).await;
    assert_eq!(seen, expected);
    let lower = basic.replace("Basic", "basic");
    let seen = read_pages(&api, "/v2/basic/items", 11, &[("Authorization", &lower)], only_data).await;
    assert_eq!(seen, expected);
    for bad in [
        basic_authorization(BASIC_USERNAME, "guess"),
        basic_authorization("admin", BASIC_PASSWORD),
        basic.replace("Basic ", "Bearer "),
        "Basic".to_owned(),
        "Basic demo:demo-password".to_owned(),
    ] {
        assert_unauthorized(&send(api.addr(), "GET", "/v2/basic/items", &[("Authorization", &bad)], "").await, &bad);
    }
    assert_unauthorized(&get(&api, "/v2/basic/items").await, "no credentials");
    // Keyed: 3 + 3 pages, 2 single pages, 5 refusals; basic: 3 + 2 pages, 6 refusals.
    let by_path = api.stats().requests_by_path;
    assert_eq!((by_path.get("/v2/keyed/items"), by_path.get("/v2/basic/items")), (Some(&13), Some(&11)));
}

#[tokio::test]
async fn v2_throttled_pages_answer_429_once_each() {
    let api = start(DemoApiConfig { records: 9, accounts: 2, retry_after_secs: 3, ..Default::default() }).await;
    let expected = all_items(&api).await;
    let mut seen = Vec::new();
    for page in 1..=3 {
        let target = format!("/v2/throttled_items?page={page}&per_page=4");
        let throttled = get(&api, &target).await;
        assert_eq!(throttled.status, 429, "{target}");
        assert_eq!(throttled.header("retry-after"), Some("3"), "{target}");
        assert!(throttled.json()["error"].is_string(), "{target}");
        let body = get_ok(&api, &target).await;
        assert_eq!(body.as_object().unwrap().len(), 1, "only data: {body}");
        seen.extend(records(&body["data"]));
        // Once served, a page stays served.
        assert_eq!(get_ok(&api, &target).await, body);
    }
    assert_eq!(seen, expected);
    // The page number alone decides; a bad parameter is a 400 that throttles nothing.
    assert_eq!(get(&api, "/v2/throttled_items?page=1&per_page=9").await.status, 200);
    assert_eq!(get(&api, "/v2/throttled_items?page=0").await.status, 400);
    assert_eq!(get(&api, "/v2/throttled_items?per_page=2").await.status, 200, "page 1 by default");
    let stats = api.stats();
    assert_eq!((stats.throttled, stats.errors_injected), (3, 0));

    // Retry-After 0: retry at once.
    let api = start(DemoApiConfig { records: 2, retry_after_secs: 0, ..Default::default() }).await;
    let throttled = get(&api, "/v2/throttled_items").await;
    assert_eq!((throttled.status, throttled.header("retry-after")), (429, Some("0")));
    assert_eq!(records(&get_ok(&api, "/v2/throttled_items").await["data"]).len(), 2);
    assert_eq!(api.stats().throttled, 1);
}

#[tokio::test]
async fn v2_account_items_declare_404_and_403() {
    let (records_n, accounts) = (30, 9);
    let api = start(DemoApiConfig { records: records_n, accounts, ..Default::default() }).await;
    for id in [4, 8] {
        let response = get(&api, &format!("/v2/accounts/{id}/items")).await;
        assert_eq!((response.status, response.json()), (403, json!({"error": "account suspended"})), "account {id}");
    }
    for id in ["0", "10", "x", "-1", "18446744073709551616"] {
        let response = get(&api, &format!("/v2/accounts/{id}/items?page=1")).await;
        assert_eq!((response.status, response.json()), (404, json!({"error": "no such account"})), "account {id}");
    }
    // Account 2 owns ids 2, 11, 20, 29: the same records `/accounts/2/items` serves.
    let expected = records(&get_ok(&api, "/accounts/2/items?limit=10000").await["data"]);
    assert_eq!(expected.iter().map(|r| r["id"].as_u64().unwrap()).collect::<Vec<_>>(), [2, 11, 20, 29]);
    let only_data = |_: u64, body: &Value| assert_eq!(body.as_object().unwrap().len(), 1, "only data: {body}");
    for per_page in [1, 3, 4, 100] {
        let seen = read_pages(&api, "/v2/accounts/2/items", per_page, &[], only_data).await;
        assert_eq!(seen, expected, "per_page {per_page}");
    }
    let all = all_items(&api).await;
    let account_9 = records(&get_ok(&api, "/v2/accounts/9/items").await["data"]);
    assert_eq!(account_9, [all[8].clone(), all[17].clone(), all[26].clone()]);
    let far = get_ok(&api, &format!("/v2/accounts/1/items?page={}&per_page=10000", u64::MAX)).await;
    assert_eq!(far, json!({"data": []}));
    assert_eq!(get(&api, "/v2/accounts/1/items?per_page=0").await.status, 400);
    // 7 refusals, 5 + 2 + 2 + 1 pages of account 2, then 3 more.
    assert_eq!(api.stats().requests_by_path.get("/v2/accounts/{id}/items"), Some(&20));
}

/// Creates a report job with `body`, polls it to completion, and downloads it.
async fn download(api: &DemoApi, body: &str, query: &str) -> Response {
    let created = post(api, "/reports", body).await;
    assert_eq!(created.status, 201, "{body}: {}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    while get_ok(api, &format!("/reports/{id}")).await["status"] == "running" {}
    get(api, &format!("/reports/{id}/download{query}")).await
}

fn gunzip(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes).read_to_string(&mut text).expect("a gzip body");
    text
}

/// The items of a CSV report, as JSON records like `/items` serves.
fn csv_records(text: &str) -> Vec<Value> {
    assert!(text.is_empty() || text.ends_with("\r\n"), "CRLF line ends");
    let mut lines = text.split_terminator("\r\n");
    assert_eq!(lines.next(), Some(super::CSV_HEADER));
    lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 5, "{line}");
            let number = |s: &str| s.parse::<u64>().unwrap();
            let (id, name, account_id, amount, updated_at) = (number(f[0]), f[1], number(f[2]), number(f[3]), f[4]);
            json!({"id": id, "name": name, "account_id": account_id, "amount": amount, "updated_at": updated_at})
        })
        .collect()
}

fn jsonl_records(text: &str) -> Vec<Value> {
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[tokio::test]
async fn reports_download_as_csv_and_gzip() {
    // Over a thousand rows, so bodies span several chunks (and gzip members would show).
    let (records_n, accounts) = (2500, 2);
    let api = start(DemoApiConfig { records: records_n, accounts, job_polls: 1, ..Default::default() }).await;
    let all = all_items(&api).await;
    let account_2: Vec<Value> = all.iter().filter(|r| r["account_id"] == 2).cloned().collect();

    let plain = download(&api, r#"{"format": "jsonl", "compression": "none"}"#, "").await;
    assert_eq!(plain.header("content-type"), Some("application/x-ndjson"));
    assert_eq!(jsonl_records(plain.text()), all);
    let default = download(&api, "", "").await;
    assert_eq!(default.body, plain.body, "JSON lines, uncompressed, by default");

    let csv = download(&api, r#"{"format": "csv"}"#, "").await;
    assert_eq!((csv.status, csv.header("content-type")), (200, Some("text/csv")));
    assert!(csv.text().starts_with("id,name,account_id,amount,updated_at\r\n1,item-1,1,7,2024-01-01T00:01:00Z\r\n"));
    assert_eq!(csv_records(csv.text()), all);

    let gz_jsonl = download(&api, r#"{"compression": "gzip", "account_id": 2}"#, "").await;
    assert_eq!((gz_jsonl.status, gz_jsonl.header("content-type")), (200, Some("application/gzip")));
    assert_eq!(gz_jsonl.header("content-encoding"), None, "the client gets the gzip file itself");
    assert_eq!(&gz_jsonl.body[..2], [0x1f, 0x8b]);
    assert_eq!(jsonl_records(&gunzip(&gz_jsonl.body)), account_2);

    let gz_csv = download(&api, r#"{"format": "csv", "compression": "gzip"}"#, "").await;
    assert_eq!(gz_csv.header("content-type"), Some("application/gzip"));
    assert_eq!(gunzip(&gz_csv.body), csv.text());

    // offset and limit count rows; the CSV header comes first all the same.
    let window =
        download(&api, r#"{"format": "csv", "updated_after": "2024-01-01T00:10:00Z"}"#, "?offset=5&limit=3").await;
    assert_eq!(csv_records(window.text()), all[15..18]);
    let empty = download(&api, r#"{"format": "csv", "compression": "gzip"}"#, "?offset=9999").await;
    assert_eq!(gunzip(&empty.body), "id,name,account_id,amount,updated_at\r\n");
    let empty = download(&api, r#"{"compression": "gzip"}"#, "?limit=0").await;
    assert_eq!(gunzip(&empty.body), "");

    for (body, field) in [
        (r#"{"format": "xml"}"#, "format"),
        (r#"{"format": "CSV"}"#, "format"),
        (r#"{"compression": "zstd"}"#, "compression"),
        (r#"{"format": "csv", "compression": ""}"#, "compression"),
    ] {
        let response = post(&api, "/reports", body).await;
        assert_eq!(response.status, 400, "{body}");
        let message = response.json()["error"].as_str().unwrap().to_owned();
        assert!(message.contains(&format!("`{field}`")), "{body}: {message}");
    }
    assert_eq!(api.stats().jobs_created, 8);
}
