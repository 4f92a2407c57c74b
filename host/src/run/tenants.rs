//! Quotas on a tenant across its runs in one [`crate::Runtime`]: how many of its runs go at
//! once (past it a run waits for one to end, for as long as the quota says, or is refused), and
//! an API budget all its runs share, per API host (the Airbyte CDK's `HTTPAPIBudget` holds
//! within one sync only). What the tenant's runs used is readable at any time.

use super::request::{Outcome, RunError, RunReport};
use crate::data::protocol::FailureType;
use crate::net::hooks::{Attempt, BoxFuture, HttpHooks};
use crate::net::pace::Pacer;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What one tenant's runs may do together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantQuota {
    /// Runs of the tenant at once (`None`: no limit).
    pub max_runs: Option<usize>,
    /// How long a run past `max_runs` waits for another to end before it is refused (`None`:
    /// refused at once).
    pub wait_for_run: Option<Duration>,
    /// Requests per second to each API host, shared by all the tenant's runs (`None`: each
    /// run's own `--http-max-rate` only).
    pub api_rate_per_host: Option<f64>,
}

/// What a tenant's runs used, since the tenant was first named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantUsage {
    /// Runs going now, and the most that went at once.
    pub runs_active: u64,
    pub peak_runs_active: u64,
    pub runs_started: u64,
    /// Runs refused by the quota (never started).
    pub runs_refused: u64,
    /// Of the reads that ended: records written, HTTP requests, guest CPU.
    pub records: u64,
    pub requests: u64,
    pub guest_cpu: Duration,
}

/// One tenant: its quota, the slots of its runs, its shared API budget, its usage.
pub(crate) struct Tenant {
    name: String,
    quota: TenantQuota,
    runs: Option<Arc<Semaphore>>,
    budget: Option<Arc<ApiBudget>>,
    /// Shared with the tenant as it was before its quota was last set: its runs still going
    /// count here when they end.
    usage: Arc<Mutex<TenantUsage>>,
}

/// The tenants of a runtime, by name.
#[derive(Default)]
pub(crate) struct Tenants(Mutex<HashMap<String, Arc<Tenant>>>);

impl Tenants {
    /// Sets a tenant's quota, keeping its usage (runs already going keep the slots they hold,
    /// outside the new quota's count).
    pub fn set(&self, name: &str, quota: TenantQuota) {
        let mut tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let usage = tenants.get(name).map(|t| t.usage.clone()).unwrap_or_default();
        tenants.insert(name.to_string(), Arc::new(Tenant::new(name, quota, usage)));
    }

    /// The tenant, with no quota when none was set.
    pub fn get(&self, name: &str) -> Arc<Tenant> {
        let mut tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let tenant = tenants.entry(name.to_string());
        tenant.or_insert_with(|| Arc::new(Tenant::new(name, TenantQuota::default(), Arc::default()))).clone()
    }

    pub fn usage(&self, name: &str) -> Option<TenantUsage> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(name).map(|t| t.usage())
    }
}

/// A run of a tenant, counted while it goes.
pub(crate) struct Admitted {
    tenant: Arc<Tenant>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.tenant.with_usage(|u| u.runs_active -= 1);
    }
}

impl Tenant {
    fn new(name: &str, quota: TenantQuota, usage: Arc<Mutex<TenantUsage>>) -> Self {
        let runs = quota.max_runs.map(|n| Arc::new(Semaphore::new(n.max(1))));
        let budget = quota.api_rate_per_host.map(|rate| Arc::new(ApiBudget(Pacer::new(rate))));
        Tenant { name: name.to_string(), quota, runs, budget, usage }
    }

    fn with_usage(&self, change: impl FnOnce(&mut TenantUsage)) {
        change(&mut self.usage.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn usage(&self) -> TenantUsage {
        self.usage.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Lets a run start, when the quota allows: at once, after waiting for a slot, or not at all
    /// (the report of a run that never started, saying why).
    pub async fn admit(self: &Arc<Self>) -> Result<Admitted, RunReport> {
        let slot = match &self.runs {
            None => None,
            Some(runs) => {
                let acquired = match self.quota.wait_for_run {
                    None => runs.clone().try_acquire_owned().ok(),
                    Some(wait) => {
                        tokio::time::timeout(wait, runs.clone().acquire_owned()).await.ok().and_then(Result::ok)
                    }
                };
                match acquired {
                    Some(slot) => Some(slot),
                    None => {
                        self.with_usage(|u| u.runs_refused += 1);
                        return Err(self.refused());
                    }
                }
            }
        };
        self.with_usage(|u| {
            u.runs_started += 1;
            u.runs_active += 1;
            u.peak_runs_active = u.peak_runs_active.max(u.runs_active);
        });
        Ok(Admitted { tenant: self.clone(), _slot: slot })
    }

    fn refused(&self) -> RunReport {
        let limit = self.quota.max_runs.unwrap_or_default();
        let waited = match self.quota.wait_for_run {
            Some(wait) => format!(" (waited {:.1} s for one to end)", wait.as_secs_f64()),
            None => String::new(),
        };
        let message = format!(
            "tenant {:?} already has {limit} run(s) going, its quota of runs at once{waited}: this run was not started",
            self.name
        );
        let result = Err(RunError { message, failure: FailureType::Transient });
        RunReport { result, kept_at: None, stopped: None, output: Ok(()) }
    }

    /// The hook that spaces the tenant's requests under its shared API budget, if it has one.
    pub fn budget(&self) -> Option<Arc<dyn HttpHooks>> {
        self.budget.clone().map(|b| b as Arc<dyn HttpHooks>)
    }

    /// Counts what a run that ended used.
    pub fn count(&self, report: &RunReport) {
        if let Ok(Outcome::Read(read)) = &report.result {
            self.with_usage(|u| {
                u.records += read.usage.records;
                u.requests += read.usage.requests;
                u.guest_cpu += read.usage.guest_cpu;
            });
        }
    }
}

/// Requests of all a tenant's runs to one host, spaced at the tenant's rate.
struct ApiBudget(Pacer);

impl HttpHooks for ApiBudget {
    fn before_send<'a>(&'a self, attempt: &'a Attempt<'a>) -> BoxFuture<'a> {
        Box::pin(self.0.wait(attempt.url.host_str().unwrap_or_default()))
    }
}
