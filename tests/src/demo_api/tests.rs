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

/// One request on a fresh connection (`Connection: close`), read to the end.
async fn request(addr: SocketAddr, method: &str, target: &str, body: &str) -> Response {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
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
