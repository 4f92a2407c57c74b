//! Requests to one host spaced at a rate: a run's own per-host rate, and an API budget several
//! runs share (a tenant's, [`crate::run::tenants`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// The longest wait between two requests to one host that a rate can ask for.
const MAX_PACE: Duration = Duration::from_secs(3600);

/// When each host may next be sent a request, at one rate.
pub struct Pacer {
    interval: Duration,
    next_slot: Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    /// Requests per second to each host; a rate too small to mean anything (or not a number)
    /// is one request an hour.
    pub fn new(rate: f64) -> Self {
        let interval = Duration::try_from_secs_f64(1.0 / rate).unwrap_or(MAX_PACE).min(MAX_PACE);
        Pacer { interval, next_slot: Mutex::new(HashMap::new()) }
    }

    /// Waits for this host's next slot: slots are handed out in order, one interval apart.
    pub async fn wait(&self, host: &str) {
        let wait = {
            let mut slots = self.next_slot.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let slot = slots.entry(host.to_string()).or_insert(now);
            let start = (*slot).max(now);
            *slot = start + self.interval;
            start - now
        };
        tokio::time::sleep(wait).await;
    }
}
