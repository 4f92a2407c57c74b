//! What a run's guests may consume. Safe defaults; set by CLI flags, a policy file, or the
//! library API.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The cores guests share.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The longest page or listing token by default, bytes: 100 MB tokens made 100 MB STATE lines,
/// and real APIs' cursors and next URLs are well under a kilobyte to a few.
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 64 << 10;
/// The most `max_token_bytes` may be set to.
pub const MAX_TOKEN_BYTES: usize = 16 << 20;

/// The longest a step's instance may be kept for the partition's next step, milliseconds.
pub const MAX_STEP_GRACE_MS: u64 = 1000;

/// Limits for every guest instance of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Linear memory one instance may grow to, bytes.
    pub memory_bytes: u64,
    /// Guest execution time one call may use (time spent waiting for host calls such as HTTP
    /// does not count), milliseconds.
    pub cpu_ms_per_call: u64,
    /// Wall-clock time one call may take, HTTP waits included, milliseconds.
    pub call_timeout_ms: u64,
    /// Largest record, bytes.
    pub max_record_bytes: usize,
    /// Deepest nesting of objects and arrays in a record (the record itself is level 1).
    pub max_record_depth: usize,
    pub max_records_per_page: usize,
    /// Longest log message kept (longer ones are cut as they arrive), bytes.
    pub max_log_bytes: usize,
    /// Log messages kept per call; the rest are counted and dropped.
    pub max_logs_per_call: usize,
    /// Bytes of log messages kept per call; the rest are counted and dropped.
    pub max_log_bytes_per_call: usize,
    /// Pages per partition: a guard against a connector that never ends one.
    pub max_pages_per_partition: u64,
    /// Partitions one stream may list, and calls its listing may take: guards against a
    /// listing that never ends.
    pub max_partitions_per_stream: u64,
    pub max_listing_calls_per_stream: u64,
    /// Partition cursors one stream's state keeps; past them it falls back to one stream-level
    /// cursor (the lowest), so a STATE stays small however many partitions a stream has. A saved
    /// state with more is folded so as it is taken in, and its partitions in progress past this
    /// many are dropped (read again from their start).
    pub max_partition_cursors: usize,
    /// Longest page or listing token, bytes of JSON: a partition's token travels in every STATE
    /// of its stream while the partition is read, and platforms persist those states.
    pub max_token_bytes: usize,
    /// The WebAssembly stack of a guest, bytes. An engine setting: the same for every run an
    /// engine serves (a runtime refuses runs that ask for another).
    pub wasm_stack_bytes: usize,
    /// When a call that keeps computing is paused between epoch ticks.
    pub throttle: Throttle,
    /// Steps of pages read in steps (contract 0.1.5) that one connector computes at once, each
    /// holding an instance; `None`: as many as the machine has cores.
    pub steps_at_once: Option<usize>,
    /// How long, milliseconds, a step's instance is kept for the partition's next step while the
    /// host sends the step's request and the next step waits for a core: an answer back by then
    /// is handed to the same instance, which saves starting another (about 0.5 ms for CPython);
    /// past it the instance is dropped, so a partition waiting on a slow API holds none. 0: every
    /// step in a fresh instance.
    pub step_grace_ms: u64,
}

/// When a busy guest (a call computing past a grace period) is paused between ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Throttle {
    /// Only while more guests want a core than there are: alone, a guest runs at full speed.
    #[default]
    WhenContended,
    /// Always: a busy guest takes a small share of a core even on an idle machine (a tenant an
    /// operator wants kept small).
    Always,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 256 << 20,
            cpu_ms_per_call: 30_000,
            call_timeout_ms: 600_000,
            max_record_bytes: 16 << 20,
            max_record_depth: 64,
            max_records_per_page: 100_000,
            max_log_bytes: 64 << 10,
            max_logs_per_call: 1000,
            max_log_bytes_per_call: 1 << 20,
            max_pages_per_partition: 10_000_000,
            max_partitions_per_stream: 1_000_000,
            max_listing_calls_per_stream: 1_000_000,
            max_partition_cursors: crate::data::state::DEFAULT_MAX_PARTITION_CURSORS,
            max_token_bytes: DEFAULT_MAX_TOKEN_BYTES,
            wasm_stack_bytes: 512 << 10,
            throttle: Throttle::WhenContended,
            steps_at_once: None,
            step_grace_ms: 5,
        }
    }
}

/// The deepest `max_record_depth` allowed: the host's own JSON parser reads state, replays and
/// records back this deep (serde_json's recursion limit), so a deeper record would be checked,
/// written, and then unreadable to the host itself.
pub const MAX_RECORD_DEPTH: usize = 128;

/// How often the engine's epoch advances; the unit of the CPU budget.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

impl Limits {
    /// Refuses limits the host cannot honour, naming the limit.
    pub fn check(&self) -> Result<(), String> {
        if !(2..=MAX_TOKEN_BYTES).contains(&self.max_token_bytes) {
            return Err(format!(
                "max_token_bytes {} is not from 2 to {MAX_TOKEN_BYTES} (16 MiB: a token is saved in every STATE of \
                 its stream)",
                self.max_token_bytes
            ));
        }
        if !(1..=MAX_RECORD_DEPTH).contains(&self.max_record_depth) {
            return Err(format!(
                "max_record_depth {} is not from 1 to {MAX_RECORD_DEPTH} (the host's own parser reads records \
                 {MAX_RECORD_DEPTH} levels deep)",
                self.max_record_depth
            ));
        }
        if self.step_grace_ms > MAX_STEP_GRACE_MS {
            return Err(format!(
                "step_grace_ms {} is past {MAX_STEP_GRACE_MS} (an instance kept longer holds its memory while the \
                 partition waits on the API, which is what reading in steps avoids)",
                self.step_grace_ms
            ));
        }
        Ok(())
    }

    /// Guest time one call may use; it is checked at every epoch tick, so a call is stopped
    /// at most a tick past it.
    pub fn cpu_budget(&self) -> Duration {
        Duration::from_millis(self.cpu_ms_per_call.max(1))
    }
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms.max(1))
    }

    /// Steps of one connector computing at once: as set, or by default one a core. Steps only
    /// compute (their requests are sent between them), so more would only queue for the cores,
    /// each holding an instance. (A core used to be left to the host: while every instance's
    /// dirty pages went back to the kernel, two steps at once spent their time in page faults
    /// and TLB shootdowns; now that a slot's pages are reset in place, two steps on 2 cores read
    /// 1,000 one-record CPython partitions in about half the time of one.)
    pub fn steps_at_once(&self) -> usize {
        self.steps_at_once.unwrap_or_else(cores).max(1)
    }

    /// [`Limits::step_grace_ms`] as a duration.
    pub fn step_grace(&self) -> Duration {
        Duration::from_millis(self.step_grace_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_at_once_is_one_a_core_unless_set() {
        assert_eq!(Limits::default().steps_at_once(), cores());
        assert_eq!(Limits { steps_at_once: Some(3), ..Limits::default() }.steps_at_once(), 3);
        assert_eq!(Limits { steps_at_once: Some(0), ..Limits::default() }.steps_at_once(), 1, "at least one");
        let from_policy: Limits = serde_json::from_str(r#"{"steps_at_once": 2}"#).unwrap();
        assert_eq!(from_policy.steps_at_once(), 2);
    }

    #[test]
    fn a_step_grace_past_a_second_is_refused() {
        assert_eq!(Limits::default().step_grace(), Duration::from_millis(5));
        let from_policy: Limits = serde_json::from_str(r#"{"step_grace_ms": 0}"#).unwrap();
        assert_eq!(from_policy.check(), Ok(()));
        let long = Limits { step_grace_ms: MAX_STEP_GRACE_MS + 1, ..Limits::default() };
        let error = long.check().unwrap_err();
        assert!(error.contains("step_grace_ms 1001 is past 1000"), "{error}");
    }
}
