//! The server's shared state: counters and report jobs, behind one mutex so that every snapshot
//! is consistent and every count exact.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::data::ItemFilter;
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
}

impl Shared {
    pub fn new(cfg: DemoApiConfig) -> Shared {
        Shared { cfg, inner: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock, but a poisoned counter is still a usable counter.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
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
    pub fn create_job(&self, filter: ItemFilter) -> String {
        let mut inner = self.lock();
        let stats = &mut inner.stats;
        stats.jobs_created += 1;
        stats.jobs_running += 1;
        stats.max_jobs_running = stats.max_jobs_running.max(stats.jobs_running);
        let n = stats.jobs_created;
        let k = self.cfg.fail_job_every;
        let job = Job { filter, status: JobStatus::Running, polls: 0, will_fail: k > 0 && n.is_multiple_of(k) };
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
