//! The native readers the host is measured against: the same HTTP client, record checks and
//! writer as the host, hand-written for the demo API (shared by the bench binaries, each
//! including this file as a module).

// Each bench uses some of them.
#![allow(dead_code)]

use sluice_host::Format;
use sluice_host::internals::{Output, checked_record};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(serde::Deserialize)]
struct CursorPage {
    data: Vec<Box<serde_json::value::RawValue>>,
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
struct AccountsPage {
    data: Vec<AccountId>,
}

#[derive(serde::Deserialize)]
struct AccountId {
    id: u64,
}

#[derive(serde::Deserialize)]
struct NextPage {
    data: Vec<Box<serde_json::value::RawValue>>,
    next: Option<String>,
}

/// The client, as the host's for plain http: the demo API is plain http, and the host loads no
/// root certificates for it (4-6 ms of CPU), so neither does the reader it is measured against.
pub fn client() -> reqwest::Client {
    let builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).no_proxy();
    builder.tls_built_in_root_certs(false).build().unwrap()
}

/// Checks and writes a page the way the host does.
pub async fn write_page(out: &Output, stream_json: &str, records: &[Box<serde_json::value::RawValue>]) {
    let stamp = out.stamp();
    let stream: String = serde_json::from_str(stream_json).unwrap();
    let mut lines = out.page(records.iter().map(|r| r.get().len() + 80).sum());
    for record in records {
        let checked = checked_record(record.get(), 16 << 20, 64).unwrap();
        out.push_record(&mut lines, stream_json, &checked, &stamp);
    }
    out.records(&stream, lines, records.len() as u64).await.unwrap();
}

/// A hand-written reader of `items`: cursor pages.
pub async fn native_items(base_url: &str, expected: u64, page_size: u64) -> Duration {
    native_items_into(base_url, expected, page_size, Box::new(std::io::sink())).await
}

/// [`native_items`], output to `sink`.
pub async fn native_items_into(
    base_url: &str,
    expected: u64,
    page_size: u64,
    sink: Box<dyn std::io::Write + Send>,
) -> Duration {
    let client = client();
    let (out, writer) = Output::spawn(Format::Airbyte, sink);
    let started = Instant::now();
    let stream_json = serde_json::to_string("items").unwrap();
    let mut cursor: Option<String> = None;
    let mut records = 0;
    for _ in 0..=expected / page_size + 1 {
        let mut request = client.get(format!("{base_url}/items")).query(&[("limit", page_size.to_string())]);
        if let Some(c) = &cursor {
            request = request.query(&[("cursor", c)]);
        }
        let body = request.send().await.unwrap().error_for_status().unwrap().bytes().await.unwrap();
        let page: CursorPage = serde_json::from_slice(&body).unwrap();
        write_page(&out, &stream_json, &page.data).await;
        records += page.data.len() as u64;
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    drop(out);
    writer.finish().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(records, expected);
    elapsed
}

/// Where a native reader of `account_items` learns the accounts.
#[derive(Clone, Copy)]
pub enum Accounts {
    /// Listed from the API first (`/accounts`, pages of the reader's page size until a short
    /// one): the same requests the demo connector makes when its config names no accounts.
    Listed,
    /// Known in advance, `1..=N`, as from a config that names them (the connector lists none).
    Known,
}

/// A hand-written concurrent reader of `account_items`: one task per account, `in_flight` at once.
pub async fn native_account_items(
    base_url: &str,
    accounts: u64,
    listed: Accounts,
    page_size: u64,
    in_flight: usize,
) -> Duration {
    native_account_items_into(base_url, accounts, listed, 1000, page_size, in_flight, Box::new(std::io::sink())).await
}

/// [`native_account_items`] of `accounts` accounts holding `per_account` records each, output
/// to `sink`.
pub async fn native_account_items_into(
    base_url: &str,
    accounts: u64,
    listed: Accounts,
    per_account: u64,
    page_size: u64,
    in_flight: usize,
    sink: Box<dyn std::io::Write + Send>,
) -> Duration {
    let client = client();
    let (out, writer) = Output::spawn(Format::Airbyte, sink);
    let started = Instant::now();
    let ids = match listed {
        Accounts::Known => (1..=accounts).collect(),
        Accounts::Listed => list_accounts(&client, base_url, page_size).await,
    };
    assert_eq!(ids.len() as u64, accounts, "the native reader found every account");
    let permits = Arc::new(tokio::sync::Semaphore::new(in_flight));
    let mut tasks = tokio::task::JoinSet::new();
    for account in ids {
        let (client, out, permits, base) = (client.clone(), out.clone(), permits.clone(), base_url.to_string());
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.unwrap();
            let stream_json = serde_json::to_string("account_items").unwrap();
            let mut url = format!("{base}/accounts/{account}/items?limit={page_size}");
            let mut records = 0u64;
            for _ in 0..100_000 {
                let body = client.get(&url).send().await.unwrap().error_for_status().unwrap().bytes().await.unwrap();
                let page: NextPage = serde_json::from_slice(&body).unwrap();
                write_page(&out, &stream_json, &page.data).await;
                records += page.data.len() as u64;
                match page.next {
                    Some(next) => url = format!("{base}{next}"),
                    None => break,
                }
            }
            records
        });
    }
    let mut total = 0;
    while let Some(records) = tasks.join_next().await {
        total += records.unwrap();
    }
    drop(out);
    writer.finish().unwrap();
    assert_eq!(total, accounts * per_account);
    started.elapsed()
}

/// The accounts' ids, page after page of `per_page` until a short page.
async fn list_accounts(client: &reqwest::Client, base_url: &str, per_page: u64) -> Vec<u64> {
    let mut ids = Vec::new();
    for page in 1..=100_000u64 {
        let url = format!("{base_url}/accounts?page={page}&per_page={per_page}");
        let body = client.get(&url).send().await.unwrap().error_for_status().unwrap().bytes().await.unwrap();
        let listed: AccountsPage = serde_json::from_slice(&body).unwrap();
        let short = (listed.data.len() as u64) < per_page;
        ids.extend(listed.data.into_iter().map(|account| account.id));
        if short {
            break;
        }
    }
    ids
}
