//! Fair share of a runtime's partition slots between tenants: when more partitions want to read
//! than the runtime has slots for (a busy machine), each slot that frees goes to the tenant
//! furthest behind its weighted share (start-time fair queuing: a tenant's virtual time grows
//! by 1/weight per slot it is granted), so a tenant of weight 3 reads three partitions for each
//! one a tenant of weight 1 reads, and one tenant's hundred runs do not starve another's one.
//! While there are free slots nobody waits.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The runtime's partition slots, shared by its tenants' runs.
#[derive(Debug)]
pub struct FairShare {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    free: usize,
    /// The virtual time at which the last grant started: a tenant that starts waiting starts
    /// from it, so time it spent idle is no credit.
    now: f64,
    tenants: HashMap<String, Queue>,
}

#[derive(Debug)]
struct Queue {
    weight: f64,
    /// Virtual time: slots granted over weight.
    served: f64,
    granted: u64,
    waiting: VecDeque<oneshot::Sender<()>>,
}

impl Queue {
    fn new(weight: f64) -> Queue {
        Queue { weight, served: 0.0, granted: 0, waiting: VecDeque::new() }
    }
}

/// A tenant's claim on the runtime's slots, carried by its runs ([`crate::Concurrency`]).
#[derive(Debug, Clone)]
pub struct FairShareTicket {
    share: Arc<FairShare>,
    tenant: String,
}

/// A slot held while a partition reads; given back when dropped.
#[derive(Debug)]
pub struct FairSlot {
    share: Arc<FairShare>,
}

impl Drop for FairSlot {
    fn drop(&mut self) {
        self.share.release();
    }
}

impl FairShare {
    pub fn new(slots: usize) -> Arc<FairShare> {
        let state = State { free: slots.max(1), now: 0.0, tenants: HashMap::new() };
        Arc::new(FairShare { state: Mutex::new(state) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets a tenant's weight (1 when never set; at least a thousandth).
    pub fn set_weight(&self, tenant: &str, weight: f64) {
        let weight = if weight.is_finite() { weight.max(0.001) } else { 1.0 };
        self.lock().tenants.entry(tenant.to_string()).or_insert_with(|| Queue::new(weight)).weight = weight;
    }

    pub fn ticket(self: &Arc<Self>, tenant: &str) -> FairShareTicket {
        FairShareTicket { share: self.clone(), tenant: tenant.to_string() }
    }

    /// Slots granted to each tenant so far.
    pub fn granted(&self, tenant: &str) -> u64 {
        self.lock().tenants.get(tenant).map_or(0, |q| q.granted)
    }

    /// Waiters of all tenants (for tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().tenants.values().map(|q| q.waiting.len()).sum()
    }

    fn release(&self) {
        let mut state = self.lock();
        state.free += 1;
        grant(&mut state);
    }
}

impl FairShareTicket {
    /// Waits for a slot: at once while there are free ones and nobody waits, else when the
    /// tenant is the furthest behind its share.
    pub async fn slot(&self) -> FairSlot {
        let waiting = {
            let mut state = self.share.lock();
            let nobody_waits = state.tenants.values().all(|q| q.waiting.is_empty());
            let now = state.now;
            let queue = state.tenants.entry(self.tenant.clone()).or_insert_with(|| Queue::new(1.0));
            if queue.waiting.is_empty() {
                queue.served = queue.served.max(now);
            }
            if state.free > 0 && nobody_waits {
                state.free -= 1;
                charge(&mut state, &self.tenant);
                None
            } else {
                let (tx, rx) = oneshot::channel();
                state.tenants.get_mut(&self.tenant).expect("just made").waiting.push_back(tx);
                grant(&mut state);
                Some(rx)
            }
        };
        if let Some(rx) = waiting {
            // Cancel-safe: a wait given up after its grant gives the slot back.
            let mut wait = Waiting { rx: Some(rx), share: self.share.clone() };
            if let Some(rx) = wait.rx.as_mut() {
                // A grant sends, or skips a waiter that gave up: the sender is never dropped
                // otherwise.
                let _ = rx.await;
            }
            wait.rx = None;
        }
        FairSlot { share: self.share.clone() }
    }
}

/// A wait for a slot; dropped before it is seen through (a partition that never started, its
/// run stopped), it gives back a slot it was granted meanwhile.
struct Waiting {
    rx: Option<oneshot::Receiver<()>>,
    share: Arc<FairShare>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.share.release();
            }
        }
    }
}

/// Counts a grant to `tenant`: its virtual time moves on by 1/weight, and the system's is the
/// start of this grant (the lowest among the tenants waiting, as grants go to the lowest), which
/// a tenant that starts waiting again catches up to.
fn charge(state: &mut State, tenant: &str) {
    let queue = state.tenants.get_mut(tenant).expect("charged tenants are known");
    let start = queue.served;
    queue.served += 1.0 / queue.weight;
    queue.granted += 1;
    state.now = start;
}

/// Hands free slots to the waiting tenants furthest behind; a waiter that gave up (its run
/// stopped) is skipped.
fn grant(state: &mut State) {
    while state.free > 0 {
        let next = state
            .tenants
            .iter()
            .filter(|(_, q)| !q.waiting.is_empty())
            .min_by(|(_, a), (_, b)| a.served.total_cmp(&b.served))
            .map(|(name, _)| name.clone());
        let Some(tenant) = next else { return };
        let waiter = state.tenants.get_mut(&tenant).expect("found").waiting.pop_front().expect("not empty");
        if waiter.send(()).is_ok() {
            state.free -= 1;
            charge(state, &tenant);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait given up (its future dropped) after its grant gives the slot back.
    #[tokio::test]
    async fn a_wait_given_up_gives_its_slot_back() {
        let share = FairShare::new(1);
        let ticket = share.ticket("t");
        let held = ticket.slot().await;
        {
            let waiting = ticket.slot();
            tokio::pin!(waiting);
            // Polled once: it waits.
            assert!(futures_poll_once(waiting.as_mut()).await.is_none());
            drop(held); // granted to the waiter, which is then dropped unpolled
        }
        // The slot is free again: this would wait for ever otherwise.
        let again = tokio::time::timeout(std::time::Duration::from_secs(5), ticket.slot()).await;
        assert!(again.is_ok(), "the slot granted to a dropped wait was lost");
    }

    async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        })
        .await
    }

    /// Under contention, slots go to two tenants of weights 1 and 3 in that ratio.
    #[tokio::test]
    async fn slots_go_by_weight_under_contention() {
        let share = FairShare::new(4);
        share.set_weight("one", 1.0);
        share.set_weight("three", 3.0);
        let (one, three) = (share.ticket("one"), share.ticket("three"));
        // Both tenants want far more slots than there are; each slot is held, then given back.
        let mut held = Vec::new();
        let mut waiting = tokio::task::JoinSet::new();
        for _ in 0..4 {
            held.push(one.slot().await);
        }
        for _ in 0..400 {
            let (one, three) = (one.clone(), three.clone());
            waiting.spawn(async move { one.slot().await });
            waiting.spawn(async move { three.slot().await });
        }
        while share.waiting() < 800 {
            tokio::task::yield_now().await;
        }
        let before = (share.granted("one"), share.granted("three"));
        // 400 slots handed on, one at a time, while both still have waiters.
        for _ in 0..400 {
            held.remove(0);
            held.push(waiting.join_next().await.unwrap().unwrap());
        }
        let one_got = share.granted("one") - before.0;
        let three_got = share.granted("three") - before.1;
        assert_eq!(one_got + three_got, 400);
        let ratio = three_got as f64 / one_got as f64;
        assert!((2.7..=3.3).contains(&ratio), "weights 1 and 3 got {one_got} and {three_got}");
        drop(held);
        while waiting.join_next().await.is_some() {}
    }
}
