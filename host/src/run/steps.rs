//! Pages read in steps (contract 0.1.5, `stepped-pages`): a step asks for a request, the host
//! sends it outside any call, and the next step gets every answer of the page so far. An
//! interpreter guest waiting on an API then holds no interpreter: sixteen partitions in flight
//! need about as many instances as steps computing at once
//! ([`crate::guest::limits::Limits::steps_at_once`]: one a core by default), not sixteen.
//! A step runs in a fresh instance, or in the one its partition kept: through a short grace
//! after the last step sent its request (an answer from a fast API then costs no new instance),
//! or all along while so few partitions are read in steps that keeping it costs no instance
//! more ([`Stepping`]).

use crate::bindings::{BodyUse, HttpError, Level, Outgoing, Page, Partition, Step, StepAnswer};
use crate::data::protocol::{Output, OutputClosed};
use crate::guest::connector::{CallError, Connector, Instance, ReadPage, page_context, put_first};
use crate::guest::forwarded::Forwarded;
use crate::guest::limits::Limits;
use crate::guest::sandbox::GuestLog;
use crate::run::asked::ask_streams;
use crate::run::logs::emit_logs;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::Semaphore;

/// Steps one page may take: one request each, and each step runs the page again with every
/// answer so far, so a long chain costs its square.
pub const MAX_STEPS_PER_PAGE: usize = 16;

/// How many times a step's time its answers must take, and how long at least, for a run to
/// count as waiting on the API ([`Steps::balance`]). Under 20 ms latency answers take 30-60 times
/// a step; from a fast API on the same machine 1-2.5 ms, 4-10 times a step, as the API, the
/// host's HTTP and the steps share the cores, which the steps then need every one of.
const ANSWER_PER_STEP: u64 = 8;
const SLOW_ANSWER_NANOS: u64 = 5_000_000;

/// What a run keeps about the pages it reads in steps, beside its connector (the connector
/// itself holds no run state): which streams, how many steps compute at once, and how many
/// partitions are being read in steps now.
pub struct Steps {
    /// The streams read in steps, asked once.
    streams: tokio::sync::OnceCell<HashSet<String>>,
    /// Steps computing at once (see [`crate::guest::limits::Limits::steps_at_once`]).
    slots: Semaphore,
    /// Partitions being read in steps now: while they are no more than the step slots, each
    /// keeps its instance from one step to the next (it costs no more instances than the steps
    /// would, and saves instantiating one per step).
    stepping: AtomicU64,
    /// How long steps' requests take to be answered, nanoseconds, a moving average (`u64::MAX`
    /// before the first answer): an instance is kept through the grace only while answers
    /// typically come back within it, so a slow API never finds sixteen instances waiting on it.
    answer_nanos: AtomicU64,
    /// Told when more partitions are read in steps than steps compute at once: the instances
    /// kept for good while they were few are let go at once, not after their next answer.
    crowded: tokio::sync::Notify,
    /// How long a step holds its core (instantiating, computing), nanoseconds, a moving average
    /// (`u64::MAX` before the first step).
    step_nanos: AtomicU64,
    /// The step slots (the connector's `steps_at_once`, read once), and whether the host may
    /// hold one back ([`Steps::balance`]): only when they are the default, one a core; a number
    /// the operator set is kept as set.
    slots_at_once: usize,
    balanced: bool,
    /// Whether a step slot is held back now; taken while one is held back or given back, so the
    /// slots' count never drifts.
    held_back: std::sync::Mutex<bool>,
}

impl Steps {
    /// For a connector whose stepped streams are asked when first needed.
    pub fn new(limits: &Limits) -> Self {
        let slots = Semaphore::new(limits.steps_at_once());
        Steps {
            streams: Default::default(),
            slots,
            stepping: AtomicU64::new(0),
            answer_nanos: AtomicU64::new(u64::MAX),
            crowded: tokio::sync::Notify::new(),
            step_nanos: AtomicU64::new(u64::MAX),
            slots_at_once: limits.steps_at_once(),
            balanced: limits.steps_at_once.is_none(),
            held_back: std::sync::Mutex::new(false),
        }
    }

    /// For a connector whose stepped streams are already known.
    pub fn known(limits: &Limits, streams: HashSet<String>) -> Self {
        let steps = Steps::new(limits);
        let _ = steps.streams.set(streams);
        steps
    }

    /// The streams `connector` reads in steps, asked once (none before contract 0.1.5; when it
    /// cannot say, a warning, and every page is read with `read-page` as before). `out`, when
    /// given, gets the connector's logs and the warning.
    pub async fn streams(&self, connector: &Connector, out: Option<&Output>) -> Result<&HashSet<String>, OutputClosed> {
        self.streams
            .get_or_try_init(|| async {
                if connector.plugin.stepped.is_none() {
                    return Ok(HashSet::new());
                }
                let ask = async |instance: &mut Instance| instance.stepped_streams(&connector.config).await;
                let warning = |e: &CallError| {
                    format!(
                        "the connector cannot say which streams it reads in steps ({}): pages are read whole",
                        e.message()
                    )
                };
                ask_streams(connector, out, ask, warning).await
            })
            .await
    }

    /// Counts how long a step's request took into the moving average (an eighth each).
    fn answered_in(&self, took: std::time::Duration) {
        average_in(&self.answer_nanos, took);
        self.balance();
    }

    /// Counts how long a step held its core into the moving average (an eighth each).
    fn computed_in(&self, took: std::time::Duration) {
        average_in(&self.step_nanos, took);
        self.balance();
    }

    /// Holds one step slot back while the run waits on the API and its steps need no more than
    /// the others: with more partitions read in steps than slots, each computes a step for `c`
    /// and then waits `r` for its answer, so the steps keep about `partitions * c / (c + r)`
    /// cores busy. While that fits in one slot fewer and `r` is many times `c`, a core is left to
    /// the run's HTTP and output, so answers are read and the next requests sent without waiting
    /// behind steps (under 20 ms latency on 2 cores, 16 Python or JavaScript partitions took
    /// 2-4% less time with one step at a time, 64 took more). A fast API, where steps are most of
    /// the work, gets every slot, and the slot goes back when partitions become few.
    fn balance(&self) {
        if !self.balanced || self.slots_at_once < 2 {
            return;
        }
        let (step, answer) = (self.step_nanos.load(Ordering::Relaxed), self.answer_nanos.load(Ordering::Relaxed));
        if step == u64::MAX || answer == u64::MAX {
            return;
        }
        let stepping = self.stepping.load(Ordering::Relaxed);
        let busy = stepping as f64 * step as f64 / (step as f64 + answer as f64);
        let waiting_on_the_api = answer / ANSWER_PER_STEP >= step && answer >= SLOW_ANSWER_NANOS;
        let hold_back =
            stepping as usize > self.slots_at_once && waiting_on_the_api && busy <= (self.slots_at_once - 1) as f64;
        let mut held_back = self.held_back.lock().unwrap_or_else(|e| e.into_inner());
        if hold_back && !*held_back {
            // With every slot computing, it is held back at a later step.
            *held_back = self.slots.forget_permits(1) == 1;
        } else if !hold_back && *held_back {
            self.slots.add_permits(1);
            *held_back = false;
        }
    }

    /// Whether a step slot is held back now.
    #[cfg(test)]
    fn held_back(&self) -> bool {
        *self.held_back.lock().unwrap()
    }

    /// Whether steps' requests have typically been answered within `grace`.
    fn answers_within(&self, grace: std::time::Duration) -> bool {
        let average = self.answer_nanos.load(Ordering::Relaxed);
        average != u64::MAX && u128::from(average) <= grace.as_nanos()
    }
}

/// A partition being read in steps, counted while it lives, and the instance it keeps from one
/// step to the next: for as long as the partition while few partitions are read in steps (see
/// [`Steps`]), else through a short grace ([`Limits::step_grace_ms`]) after a step that sends a
/// request, so an answer back within it goes to the same instance and one waiting longer holds
/// none.
pub struct Stepping<'c> {
    connector: &'c Connector,
    steps: &'c Steps,
    kept: Option<Kept<'c>>,
    /// The first step of the partition's next page, taken at the end of the page before, in its
    /// instance and with its core: the request it asks for, and the page's token.
    ahead: Option<(String, Outgoing)>,
    /// The instance the last step was taken in, when not kept, with the core it computed on:
    /// dropped once the step's request is on its way ([`Stepping::sending`]), as resetting an
    /// interpreter's memory takes about as long as its step (0.1-0.5 ms) and the request need
    /// not wait for it; the core goes after the instance, so no step instantiates meanwhile and
    /// the next one takes the slot this one leaves warm. (Letting the core go first, a next
    /// step took another slot, cold, and a Python run under latency took 12 ms longer.)
    retired: Option<Box<(Instance, tokio::sync::SemaphorePermit<'c>)>>,
}

/// An instance kept for the partition's next step, and for how long.
struct Kept<'c> {
    instance: Instance,
    hold: Hold<'c>,
}

enum Hold<'c> {
    /// For good, while partitions are few, with the step slot it computed in: a kept instance
    /// counts as a step computing, so the instances alive never pass the step slots (and the
    /// pool's slots they fill stay as few), even before the partitions it kept them from wake.
    ForGood(tokio::sync::SemaphorePermit<'c>),
    /// Through the grace, until then.
    Until(tokio::time::Instant),
}

impl<'c> Stepping<'c> {
    pub fn new(connector: &'c Connector, steps: &'c Steps) -> Self {
        let stepping = steps.stepping.fetch_add(1, Ordering::Relaxed) + 1;
        if stepping as usize > steps.slots_at_once {
            steps.crowded.notify_waiters();
        }
        Stepping { connector, steps, kept: None, ahead: None, retired: None }
    }

    /// Whether no more partitions are read in steps than steps compute at once.
    fn few(&self) -> bool {
        self.steps.stepping.load(Ordering::Relaxed) as usize <= self.steps.slots_at_once
    }

    /// A core for the next step, and the instance to take it in: the one kept for good with
    /// the core it holds while partitions stay few; the one kept through a grace if a core is
    /// free before the grace ends; else a fresh one, once a core is (so instances waiting for
    /// cores never hold the pool's slots from the steps that hold the cores).
    async fn core_and_instance(&mut self) -> Result<(tokio::sync::SemaphorePermit<'c>, Instance, Instant), CallError> {
        let slots = &self.steps.slots;
        match self.kept.take() {
            Some(Kept { instance, hold: Hold::ForGood(core) }) if self.few() => {
                return Ok((core, instance, Instant::now()));
            }
            Some(Kept { instance, hold: Hold::Until(until) }) => {
                if let Ok(core) = tokio::time::timeout_at(until, slots.acquire()).await {
                    return Ok((core.expect("the step semaphore is never closed"), instance, Instant::now()));
                }
            }
            _ => {}
        }
        let core = slots.acquire().await.expect("the step semaphore is never closed");
        let taken = Instant::now();
        Ok((core, self.connector.instance().await?, taken))
    }

    /// Keeps an instance whose step succeeded for the next one: with no end while no more
    /// partitions are read in steps than steps compute at once (keeping costs no instance more
    /// than the steps would hold); through the grace after a step that sent a request, while
    /// requests are typically answered within it; else, when the step asked for a request, it is
    /// retired (dropped with its core once that request is on its way), or dropped now.
    fn keep(&mut self, instance: Instance, core: tokio::sync::SemaphorePermit<'c>, sent: bool) {
        let limits = &self.connector.limits;
        let few = self.few();
        let grace = sent && limits.step_grace_ms > 0 && self.steps.answers_within(limits.step_grace());
        let hold = match (few, grace) {
            (true, _) => Some(Hold::ForGood(core)),
            (false, true) => Some(Hold::Until(tokio::time::Instant::now() + limits.step_grace())),
            // A request follows: the instance goes once it is on its way.
            (false, false) if sent => {
                self.kept = None;
                self.retired = Some(Box::new((instance, core)));
                return;
            }
            (false, false) => None,
        };
        self.kept = hold.map(|hold| Kept { instance, hold });
    }

    /// Whether the instance kept is kept for good (while partitions were few).
    fn kept_for_good(&self) -> bool {
        matches!(self.kept, Some(Kept { hold: Hold::ForGood(_), .. }))
    }

    /// When the instance kept through a grace is to be let go.
    fn grace_until(&self) -> Option<tokio::time::Instant> {
        match self.kept {
            Some(Kept { hold: Hold::Until(until), .. }) => Some(until),
            _ => None,
        }
    }

    /// Awaits `work` while an instance kept for good may stay kept; once more partitions are
    /// read in steps than steps compute at once (now, or before `work` is done), the instance
    /// is let go and `work` awaited without it.
    async fn unless_crowded<T>(&mut self, work: impl Future<Output = T>) -> T {
        // Listening before looking: a partition starting in between still wakes us.
        let mut crowded = std::pin::pin!(self.steps.crowded.notified());
        crowded.as_mut().enable();
        let mut work = std::pin::pin!(work);
        if self.few() {
            tokio::select! {
                biased;
                done = &mut work => return done,
                () = crowded => {}
            }
        }
        self.kept = None;
        work.await
    }

    /// Awaits `sending` (a step's request), counting how long it took; an instance kept
    /// through a grace is dropped when the grace ends first, and one kept for good while
    /// partitions were few when they no longer are.
    async fn sending<T>(&mut self, sending: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let mut sending = std::pin::pin!(sending);
        if let Some(retired) = self.retired.take() {
            // Polled once, the request is handed to its connection's task; yielding lets that
            // task write it (it runs next on this worker) before the instance is dropped here.
            let first = std::future::poll_fn(|cx| std::task::Poll::Ready(sending.as_mut().poll(cx))).await;
            tokio::task::yield_now().await;
            drop(retired);
            if let std::task::Poll::Ready(answer) = first {
                self.steps.answered_in(started.elapsed());
                return answer;
            }
        }
        let kept_for_good = self.kept_for_good();
        let answer = match self.grace_until() {
            None if kept_for_good => self.unless_crowded(sending).await,
            None => sending.await,
            Some(until) => {
                tokio::select! {
                    biased;
                    answer = &mut sending => answer,
                    () = tokio::time::sleep_until(until) => {
                        self.kept = None;
                        sending.await
                    }
                }
            }
        };
        self.steps.answered_in(started.elapsed());
        answer
    }
}

impl Drop for Stepping<'_> {
    fn drop(&mut self) {
        self.steps.stepping.fetch_sub(1, Ordering::Relaxed);
        // Few partitions keep their instances and cores: the slot held back goes back first.
        self.steps.balance();
    }
}

/// Counts `took` into the moving average at `average` (an eighth each; `u64::MAX` is none yet).
fn average_in(average: &AtomicU64, took: std::time::Duration) {
    let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX - 1);
    let _ = average.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |average| match average {
        u64::MAX => Some(took),
        average => Some(average - average / 8 + took / 8),
    });
}

/// Reads one page of `partition` in steps: each step in a fresh instance (or the one the
/// partition kept, see [`Stepping`]), a few steps of the connector at once, the requests sent
/// by the host in between. `out`, when given, gets the connector's logs.
pub async fn read_page(
    stepping: &mut Stepping<'_>,
    out: Option<&Output>,
    partition: &Partition,
    token: Option<&String>,
) -> Result<Result<ReadPage, CallError>, OutputClosed> {
    let connector = stepping.connector;
    let context = page_context(partition);
    let mut answers: Vec<Result<StepAnswer, HttpError>> = Vec::new();
    // The answers go back into every later step: they must fit in the guest's memory.
    let max_bytes = usize::try_from(connector.limits.memory_bytes).unwrap_or(usize::MAX);
    let mut kept = Forwarded::new(connector.limits.max_records_per_page, max_bytes, "for this page");
    let mut held = 0usize;
    // The page's first step, taken already at the end of the page before.
    let mut ahead = stepping.ahead.take().filter(|(ahead, _)| Some(ahead) == token).map(|(_, outgoing)| outgoing);
    for _ in 0..MAX_STEPS_PER_PAGE {
        let step = match ahead.take() {
            Some(outgoing) => Ok((Step::Send(outgoing), 0)),
            None => {
                let (core, mut instance, taken) = match stepping.core_and_instance().await {
                    Ok(all) => all,
                    Err(e) => return Ok(Err(e)),
                };
                let config = connector.partition_config();
                let step = instance.read_step(config, partition, token, &answers).await;
                logs(out, instance.take_logs()).await?;
                // The next page's first step, at once in this instance and on this core: under
                // latency, a page so costs one instance and one wait for a core, not two. It asks
                // for a request, which is sent only if that page is read.
                let mut sent = matches!(step, Ok((Step::Send(_), _)));
                let mut usable = step.is_ok();
                if let Ok((Step::Page(Page { next_token: Some(next), .. }), _)) = &step {
                    let first = instance.read_step(config, partition, Some(next), &[]).await;
                    logs(out, instance.take_logs()).await?;
                    match first {
                        Ok((Step::Send(outgoing), _)) => {
                            stepping.ahead = Some((next.clone(), outgoing));
                            sent = true;
                        }
                        // Taken again when that page is read; it fails there if it fails.
                        Ok((Step::Page(_), _)) => {}
                        Err(_) => usable = false,
                    }
                }
                stepping.steps.computed_in(taken.elapsed());
                // An instance whose call failed is not used again (after a trap it cannot be).
                if usable {
                    stepping.keep(instance, core, sent);
                }
                step
            }
        };
        match step {
            Err(e) => return Ok(Err(e)),
            // The records forwarded in the last step are first in its page, those kept from the
            // answers before them.
            Ok((Step::Page(mut page), in_step)) => {
                let forwarded = put_first(kept.records, &mut page) + in_step;
                return Ok(Ok(ReadPage { page, forwarded }));
            }
            Ok((Step::Send(outgoing), _)) => {
                let answer = stepping.sending(send(connector, &context, outgoing, &mut kept)).await;
                if let Err(HttpError::Denied(why)) = &answer {
                    let log = GuestLog { level: Level::Warn, message: format!("request denied: {why}") };
                    logs(out, vec![log]).await?;
                }
                held += answer.as_ref().map_or(0, answer_bytes);
                if held > max_bytes {
                    return Ok(Err(system(format!(
                        "the answers of one page's steps came to {held} bytes, past the guest's memory limit of {max_bytes} bytes"
                    ))));
                }
                answers.push(answer);
            }
        }
    }
    Ok(Err(system(format!("a page took more than {MAX_STEPS_PER_PAGE} steps (one request each)"))))
}

/// Sends a step's request as `send`, `send-records` or `forward-records` would, outside any
/// instance. The host's pass over the body for records counts as guest time, as it does there.
async fn send(
    connector: &Connector,
    context: &str,
    outgoing: Outgoing,
    kept: &mut Forwarded,
) -> Result<StepAnswer, HttpError> {
    let (path, forward) = match outgoing.body {
        BodyUse::Whole => (None, false),
        BodyUse::Records(path) => (Some(path), false),
        BodyUse::Forward(path) => (Some(path), true),
    };
    if let Some(path) = &path {
        crate::net::records::check_path(path)?;
    }
    if forward {
        kept.check_room()?;
    }
    let response = connector.egress.send(outgoing.request, context).await?;
    let Some(path) = path else {
        let (status, headers, rest) = (response.status, response.headers, response.body);
        return Ok(StepAnswer { status, headers, records: None, forwarded: None, rest });
    };
    let started = Instant::now();
    // At most what the page may still keep (forwarded), or a page's worth: counted while the
    // answer is split, before any record is taken out.
    let max = if forward { kept.room() } else { connector.limits.max_records_per_page };
    let taken = crate::net::records::take(response.status, response.body, &path, max);
    connector.usage.guest_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let (records, rest) = taken.map_err(|t| match forward {
        true => kept.too_many(t.count),
        false => HttpError::TooLarge(format!(
            "the answer holds {} records at its records path, more than the {} a page may hold",
            t.count, t.max
        )),
    })?;
    let (status, headers) = (response.status, response.headers);
    if !forward {
        return Ok(StepAnswer { status, headers, records, forwarded: None, rest });
    }
    let forwarded = records.map(|records| kept.keep(records)).transpose()?;
    Ok(StepAnswer { status, headers, records: None, forwarded, rest })
}

/// What an answer costs to hold and hand over again.
fn answer_bytes(answer: &StepAnswer) -> usize {
    let headers: usize = answer.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    let records: usize = answer.records.iter().flatten().map(String::len).sum();
    answer.rest.len() + headers + records
}

async fn logs(out: Option<&Output>, logs: Vec<GuestLog>) -> Result<(), OutputClosed> {
    match out {
        Some(out) => emit_logs(out, logs).await,
        None => Ok(()),
    }
}

fn system(message: String) -> CallError {
    CallError::Guest(crate::bindings::GuestError::System(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Steps with `slots` slots, the default (balanced) or set by the operator, and `stepping`
    /// partitions read in steps.
    fn steps(slots: usize, balanced: bool, stepping: u64) -> Steps {
        let mut steps = Steps::new(&Limits { steps_at_once: Some(slots), ..Limits::default() });
        steps.balanced = balanced;
        steps.stepping.store(stepping, Ordering::Relaxed);
        steps
    }

    fn ms(n: f64) -> Duration {
        Duration::from_secs_f64(n / 1000.0)
    }

    /// Waiting on the API (16 partitions, steps of 0.5 ms, answers in 24 ms: about a third of a
    /// core busy with steps), one of two slots is held back; from a fast API (answers in 1.5 ms,
    /// the steps needing both cores) it is given back, as it is once partitions are few.
    #[test]
    fn a_step_slot_is_held_back_while_the_run_waits_on_the_api() {
        let steps = steps(2, true, 16);
        steps.computed_in(ms(0.5));
        steps.answered_in(ms(24.0));
        assert!(steps.held_back());
        assert_eq!(steps.slots.available_permits(), 1, "one step at a time");
        for _ in 0..40 {
            steps.answered_in(ms(1.5));
        }
        assert!(!steps.held_back(), "a fast API needs every core for steps");
        assert_eq!(steps.slots.available_permits(), 2);
        for _ in 0..40 {
            steps.answered_in(ms(24.0));
        }
        assert!(steps.held_back());
        // Few partitions keep their instances and cores: every slot is theirs again.
        steps.stepping.store(2, Ordering::Relaxed);
        steps.balance();
        assert!(!steps.held_back());
        assert_eq!(steps.slots.available_permits(), 2);
    }

    /// Not held back: when the steps need both cores even waiting on the API (64 partitions of
    /// 1 ms steps, answers in 24 ms), when the operator set the slots, when there is one, or
    /// when every slot is computing (it is held back at a later step instead).
    #[test]
    fn a_step_slot_is_kept_when_the_steps_need_it() {
        let busy = steps(2, true, 64);
        busy.computed_in(ms(1.0));
        busy.answered_in(ms(24.0));
        assert!(!busy.held_back());
        for (slots, balanced) in [(2, false), (1, true)] {
            let set = steps(slots, balanced, 16);
            set.computed_in(ms(0.5));
            set.answered_in(ms(24.0));
            assert!(!set.held_back());
            assert_eq!(set.slots.available_permits(), slots);
        }
        let full = steps(2, true, 16);
        let (_a, _b) = (full.slots.try_acquire().unwrap(), full.slots.try_acquire().unwrap());
        full.computed_in(ms(0.5));
        full.answered_in(ms(24.0));
        assert!(!full.held_back(), "no slot free to hold back");
    }
}
