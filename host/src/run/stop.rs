//! Asking a run to stop: the CLI does it on SIGINT/SIGTERM, an embedder for one tenant. A
//! stopping run ends its reads, aborts its report jobs within a grace period, flushes what it
//! wrote and seals its replay storage as interrupted.

use std::sync::Arc;
use tokio::sync::watch;

/// A handle to stop one run (clones stop the same run).
#[derive(Clone, Debug)]
pub struct Stop(Arc<watch::Sender<Option<String>>>);

impl Default for Stop {
    fn default() -> Self {
        Stop(Arc::new(watch::channel(None).0))
    }
}

impl Stop {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop, saying why (the first reason is kept).
    pub fn request(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.0.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(reason);
            true
        });
    }

    /// Why the run was asked to stop, if it was.
    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Resolves once the run was asked to stop, with the reason.
    pub async fn requested(&self) -> String {
        let mut receiver = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close while this waits.
        let reason = receiver.wait_for(Option::is_some).await.ok().and_then(|reason| reason.clone());
        reason.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_is_kept_and_waiters_wake() {
        let stop = Stop::new();
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { stop.requested().await }
        });
        assert_eq!(stop.reason(), None);
        stop.request("SIGINT");
        stop.request("SIGTERM");
        assert_eq!(waiter.await.unwrap(), "SIGINT");
        assert_eq!(stop.reason().as_deref(), Some("SIGINT"));
        // Asked after the fact, it resolves at once.
        assert_eq!(stop.requested().await, "SIGINT");
    }
}
