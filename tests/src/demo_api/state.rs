//! The server's shared state: counters, report jobs and issued credentials, behind one mutex so
//! that every snapshot is consistent and every count exact.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::data::ItemFilter;
use super::formats::ReportOutput;
use super::{DemoApiConfig, RECENT_REQUESTS_CAP, Stats};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    Running,
    Completed,
    Failed,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Job {
    pub filter: ItemFilter,
    /// How the download is encoded.
    pub output: ReportOutput,
    pub status: JobStatus,
    polls: u64,
    /// Decided at creation (every `fail_job_every`-th job), revealed when the job finishes.
    will_fail: bool,
}

/// What an injected error looks like; see [`Shared::begin_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedError {
    TooManyRequests,
    Internal,
}

pub struct Shared {
    pub cfg: DemoApiConfig,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The counters; `recent_requests` stays empty, the log lives in `recent`.
    stats: Stats,
    /// The request log, kept as a ring so dropping the oldest entry is O(1).
    recent: VecDeque<String>,
    jobs: HashMap<String, Job>,
    /// Session tokens issued by `POST /v2/session`.
    sessions: Tokens,
    /// Access tokens issued by `POST /v2/oauth/token`.
    access_tokens: Tokens,
    /// Pages of `/v2/throttled_items` already answered with a 429.
    throttled_pages: HashSet<u64>,
    /// What `/v2/events` serves (see [`super::events`]).
    events: Vec<serde_json::Value>,
    /// What `/v2/documents/{name}` serves, by name.
    documents: HashMap<String, serde_json::Value>,
}

/// Issued tokens and when each stops being accepted (`None`: never).
#[derive(Default)]
struct Tokens(HashMap<String, Option<Instant>>);

impl Tokens {
    /// A fresh token `{prefix}-{n}-{random}`, accepted for `ttl`.
    fn issue(&mut self, prefix: &str, n: u64, ttl: Duration) -> String {
        let now = Instant::now();
        // An expired token is never accepted again; forgetting it bounds the map by the tokens
        // alive at once.
        self.0.retain(|_, expires| expires.is_none_or(|e| now < e));
        // The random part keeps tokens of another server (or an earlier run) from being accepted.
        let token = format!("{prefix}-{n}-{:016x}", RandomState::new().hash_one((prefix, n)));
        self.0.insert(token.clone(), now.checked_add(ttl));
        token
    }

    fn accepts(&self, token: &str) -> bool {
        self.0.get(token).is_some_and(|expires| expires.is_none_or(|e| Instant::now() < e))
    }
}

impl Shared {
    pub fn new(cfg: DemoApiConfig) -> Shared {
        Shared { cfg, inner: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock, but a poisoned counter is still a usable counter.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The events `/v2/events` serves now.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.lock().events.clone()
    }

    pub fn set_events(&self, events: Vec<serde_json::Value>) {
        self.lock().events = events;
    }

    /// The document `/v2/documents/{name}` serves, if one was set.
    pub fn document(&self, name: &str) -> Option<serde_json::Value> {
        self.lock().documents.get(name).cloned()
    }

    pub fn set_document(&self, name: &str, document: serde_json::Value) {
        self.lock().documents.insert(name.to_string(), document);
    }

    pub fn stats(&self) -> Stats {
        let inner = self.lock();
        Stats {
            recent_requests: inner.recent.iter().cloned().collect(),
            jobs_kept: inner.jobs.len() as u64,
            ..inner.stats.clone()
        }
    }

    /// The item filter for a listing or a report.
    pub fn filter(
        &self,
        account_id: Option<u64>,
        updated_after: Option<i64>,
        updated_until: Option<i64>,
    ) -> ItemFilter {
        ItemFilter { records: self.cfg.records, accounts: self.cfg.accounts, account_id, updated_after, updated_until }
    }

    /// Counts a request to route `path`, logs its (decoded) `target`, and decides whether it gets
    /// an injected error: with `error_every` = K, requests K, 2K, 3K, ... do, alternating 429
    /// and 500.
    pub fn begin_request(&self, path: &str, target: String) -> Option<InjectedError> {
        let mut inner = self.lock();
        if inner.recent.len() >= RECENT_REQUESTS_CAP {
            inner.recent.pop_front();
        }
        inner.recent.push_back(target);
        let stats = &mut inner.stats;
        stats.requests += 1;
        *stats.requests_by_path.entry(path.to_owned()).or_default() += 1;

        let k = self.cfg.error_every;
        if k == 0 || !stats.requests.is_multiple_of(k) {
            return None;
        }
        stats.errors_injected += 1;
        Some(if (stats.requests / k) % 2 == 1 { InjectedError::TooManyRequests } else { InjectedError::Internal })
    }

    /// Marks a request as being answered until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        let mut inner = self.lock();
        inner.stats.in_flight += 1;
        inner.stats.max_in_flight = inner.stats.max_in_flight.max(inner.stats.in_flight);
        InFlight(self.clone())
    }

    /// Creates a running report job and returns its id.
    pub fn create_job(&self, filter: ItemFilter, output: ReportOutput) -> String {
        let mut inner = self.lock();
        let stats = &mut inner.stats;
        stats.jobs_created += 1;
        stats.jobs_running += 1;
        stats.max_jobs_running = stats.max_jobs_running.max(stats.jobs_running);
        let n = stats.jobs_created;
        let k = self.cfg.fail_job_every;
        let job = Job { filter, output, status: JobStatus::Running, polls: 0, will_fail: k > 0 && n.is_multiple_of(k) };
        let id = format!("job-{n}");
        inner.jobs.insert(id.clone(), job);
        id
    }

    /// Polls a job: a running job finishes on its `job_polls`-th poll (or the first, if 0).
    pub fn poll_job(&self, id: &str) -> Option<JobStatus> {
        let mut inner = self.lock();
        let Inner { stats, jobs, .. } = &mut *inner;
        let job = jobs.get_mut(id)?;
        if job.status == JobStatus::Running {
            job.polls += 1;
            if job.polls >= self.cfg.job_polls {
                job.status = if job.will_fail { JobStatus::Failed } else { JobStatus::Completed };
                stats.jobs_running -= 1;
                if job.status == JobStatus::Completed {
                    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                    stats.last_job_completed_ms = now.as_millis() as u64;
                }
            }
        }
        Some(job.status)
    }

    /// A job's current state, without counting as a poll.
    pub fn job(&self, id: &str) -> Option<Job> {
        self.lock().jobs.get(id).cloned()
    }

    /// Issues a session token accepted for `ttl`.
    pub fn create_session(&self, ttl: Duration) -> String {
        let mut inner = self.lock();
        inner.stats.sessions_created += 1;
        let n = inner.stats.sessions_created;
        inner.sessions.issue("session", n, ttl)
    }

    /// Whether `token` is a session token this server issued and that has not expired.
    pub fn session_valid(&self, token: &str) -> bool {
        self.lock().sessions.accepts(token)
    }

    /// Issues an OAuth access token accepted for `ttl`.
    pub fn issue_access_token(&self, ttl: Duration) -> String {
        let mut inner = self.lock();
        inner.stats.tokens_issued += 1;
        let n = inner.stats.tokens_issued;
        inner.access_tokens.issue("access", n, ttl)
    }

    /// Whether `token` is an access token this server issued and that has not expired.
    pub fn access_token_valid(&self, token: &str) -> bool {
        self.lock().access_tokens.accepts(token)
    }

    /// Whether this request for `page` of `/v2/throttled_items` is to be throttled: the first
    /// request for each page is, later ones are not.
    pub fn throttle_once(&self, page: u64) -> bool {
        let mut inner = self.lock();
        let first = inner.throttled_pages.insert(page);
        if first {
            inner.stats.throttled += 1;
        }
        first
    }

    /// Deletes a job, aborting it if still running. False if there is no such job.
    pub fn delete_job(&self, id: &str) -> bool {
        let mut inner = self.lock();
        let Some(job) = inner.jobs.remove(id) else {
            return false;
        };
        if job.status == JobStatus::Running {
            inner.stats.jobs_running -= 1;
        }
        inner.stats.jobs_deleted += 1;
        true
    }
}

/// A request being answered; see [`Shared::enter`].
pub struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().stats.in_flight -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_log_keeps_the_most_recent_entries_in_order() {
        let shared = Shared::new(DemoApiConfig::default());
        let extra = 5;
        for n in 0..RECENT_REQUESTS_CAP + extra {
            assert_eq!(shared.begin_request("/items", format!("/items?n={n}")), None);
        }
        let stats = shared.stats();
        assert_eq!(stats.requests, (RECENT_REQUESTS_CAP + extra) as u64);
        assert_eq!(stats.recent_requests.len(), RECENT_REQUESTS_CAP);
        assert_eq!(stats.recent_requests[0], format!("/items?n={extra}"));
        let expected = (extra..RECENT_REQUESTS_CAP + extra).map(|n| format!("/items?n={n}"));
        assert!(stats.recent_requests.iter().cloned().eq(expected));
        // Snapshots do not drain the log.
        assert_eq!(shared.stats(), stats);
    }
}
