//! What a run's guests may consume. Safe defaults; set by CLI flags, a policy file, or the
//! library API.

use serde::Deserialize;
use std::time::Duration;

/// Limits for every guest instance of one run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    pub max_records_per_page: usize,
    /// Longest log message kept (longer ones are cut), bytes.
    pub max_log_bytes: usize,
    /// Log messages kept per call; the rest are counted and dropped.
    pub max_logs_per_call: usize,
    /// Pages per partition: a guard against a connector that never ends one.
    pub max_pages_per_partition: u64,
    /// The WebAssembly stack of a guest, bytes. An engine setting: the same for every run an
    /// engine serves (a runtime refuses runs that ask for another).
    pub wasm_stack_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 256 << 20,
            cpu_ms_per_call: 30_000,
            call_timeout_ms: 600_000,
            max_record_bytes: 16 << 20,
            max_records_per_page: 100_000,
            max_log_bytes: 64 << 10,
            max_logs_per_call: 1000,
            max_pages_per_partition: 10_000_000,
            wasm_stack_bytes: 512 << 10,
        }
    }
}

/// How often the engine's epoch advances; the unit of the CPU budget.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

impl Limits {
    pub fn cpu_ticks_per_call(&self) -> u64 {
        (self.cpu_ms_per_call / EPOCH_TICK.as_millis() as u64).max(1)
    }
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms.max(1))
    }
}
