//! Fuzzing the parsers of untrusted input, on the stable toolchain, as unit tests: each target
//! (in [`targets`]) is one parser the host runs on input it did not write (a manifest, a state
//! file, a catalog, a config against a plugin's spec, an API answer split into records, a body
//! read in lines, page tokens, values a guest hands over), with the bound the host promises for
//! an input of `n` bytes: time and memory as functions of `n` (and of the target's own caps).
//!
//! Each input is run on a small stack (256 KiB optimised; an embedder's thread must not overflow), its
//! peak heap measured by the test binary's counting allocator ([`alloc`]) and its time by the
//! thread's CPU clock; past either bound, or on a panic, the input is saved under
//! `target/fuzz/failures/TARGET/` and the test fails naming the file. The search is guided by
//! cost, not coverage: inputs that came closest to their bound are kept and mutated further
//! (what finds the inputs that cost the most per byte, the attacks of #28), beside the committed
//! corpus in `tests/fuzz/corpus/TARGET/`, which is run first on every run, and inputs each
//! target generates in the shapes known to be costly (alias fan-outs, `$ref` chains, nesting,
//! repetition) at random sizes.
//!
//! `SLUICE_FUZZ_SECS` (default 6) is the time per target, `SLUICE_FUZZ_SEED` repeats a run,
//! `SLUICE_FUZZ_INPUT=FILE` runs one input. `just fuzz TARGET [SECS]` runs one target longer.

pub mod alloc;
mod mutate;
mod targets;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one input of a target may cost.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub time: Duration,
    pub memory: usize,
}

pub struct Target {
    pub name: &'static str,
    /// Tokens of the input's grammar, for the mutator to splice in.
    pub dictionary: &'static [&'static str],
    /// The largest input made.
    pub max_len: usize,
    /// The bound for an input of `n` bytes.
    pub bound: fn(usize) -> Bound,
    /// Runs the parser; any result is fine, a panic is not.
    pub run: fn(&[u8]),
    /// Inputs of the shapes known to cost the most (expansions, nesting, repetition), of random
    /// sizes: what a search guided by cost alone is slow to build from small seeds.
    pub generate: fn(&mut fastrand::Rng) -> Vec<u8>,
}

/// Costly inputs kept to mutate further.
const KEPT: usize = 48;
/// The stack every input runs on: an embedder's small thread. An unoptimised build's frames are
/// larger than an optimised one's (serde_json's 128 levels into a value take ~320 KiB here and
/// between 128 and 192 KiB optimised, measured), so this build gets four times as much.
const STACK: usize = if cfg!(debug_assertions) { 1 << 20 } else { 256 << 10 };

/// One input's cost against its bound.
struct Cost {
    time: Duration,
    memory: usize,
    /// Time and memory as fractions of the bound.
    of_time: f64,
    of_memory: f64,
}

impl Cost {
    fn ratio(&self) -> f64 {
        self.of_time.max(self.of_memory)
    }
}

/// The CPU time this thread has used: what a parser costs, whatever else the machine runs (CI
/// runs the fuzz targets beside the other tests on two cores).
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime with a valid pointer and a clock every Linux has.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } == 0;
    assert!(ok, "the thread's CPU clock");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn measure(target: &Target, input: &[u8]) -> Result<Cost, String> {
    alloc::reset_peak();
    let base = alloc::live();
    let start = thread_cpu_time();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (target.run)(input)));
    let time = thread_cpu_time().saturating_sub(start);
    let memory = alloc::peak_above(base);
    if let Err(panic) = outcome {
        let text = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        return Err(format!("it panicked: {text}"));
    }
    let bound = (target.bound)(input.len());
    let (of_time, of_memory) = (time.as_secs_f64() / bound.time.as_secs_f64(), memory as f64 / bound.memory as f64);
    Ok(Cost { time, memory, of_time, of_memory })
}

/// An input past its bound or panicking; a time past the bound is measured again first (the
/// machine is shared), memory is exact.
fn check(target: &Target, input: &[u8]) -> Result<Cost, String> {
    let bound = (target.bound)(input.len());
    let mut cost = measure(target, input)?;
    if cost.time > bound.time {
        cost = measure(target, input)?;
    }
    if cost.memory > bound.memory || cost.time > bound.time {
        return Err(format!(
            "an input of {} bytes cost {:?} and {} KiB, past the bound of {:?} and {} KiB",
            input.len(),
            cost.time,
            cost.memory >> 10,
            bound.time,
            bound.memory >> 10
        ));
    }
    Ok(cost)
}

fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/corpus").join(name)
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(name))
        .unwrap_or_else(|e| panic!("the corpus of {name}: {e}"))
        .map(|entry| entry.expect("a corpus entry").path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).expect("a corpus file")).collect()
}

fn save_failure(name: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz/failures").join(name);
    std::fs::create_dir_all(&dir).expect("the failures folder");
    let file = dir.join(format!("{:016x}", fastrand::u64(..)));
    std::fs::write(&file, input).expect("a failure saved");
    file
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}")))
}

/// Runs `target`: its corpus, then mutations until its time is up. Panics naming the input
/// that broke the bound.
pub fn fuzz(target: &'static Target) {
    let worker = std::thread::Builder::new().name(format!("fuzz-{}", target.name)).stack_size(STACK);
    let result = worker.spawn(move || fuzz_on_this_thread(target)).expect("a fuzz thread").join();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn fuzz_on_this_thread(target: &Target) {
    let seed = env_number("SLUICE_FUZZ_SEED").unwrap_or_else(|| fastrand::u64(..));
    let fail = |input: &[u8], why: String| -> ! {
        let file = save_failure(target.name, input);
        panic!(
            "fuzz target {} (seed {seed}): {why}; the input is in {} (run it again with SLUICE_FUZZ_INPUT={} just fuzz {})",
            target.name,
            file.display(),
            file.display(),
            target.name
        )
    };
    if let Ok(file) = std::env::var("SLUICE_FUZZ_INPUT") {
        let input = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let cost = check(target, &input).unwrap_or_else(|why| fail(&input, why));
        eprintln!("{}: {} bytes: {:?}, {} KiB", target.name, input.len(), cost.time, cost.memory >> 10);
        return;
    }
    let seeds = corpus(target.name);
    assert!(!seeds.is_empty(), "the corpus of {} is empty", target.name);
    for seed in &seeds {
        check(target, seed).unwrap_or_else(|why| fail(seed, why));
    }
    let secs = env_number("SLUICE_FUZZ_SECS").unwrap_or(6);
    let mut rng = fastrand::Rng::with_seed(seed);
    // The inputs that came closest to their bound, costliest last.
    let mut kept: Vec<(f64, Vec<u8>)> = Vec::new();
    let (deadline, mut runs) = (Instant::now() + Duration::from_secs(secs), 0u64);
    let (mut worst_time, mut worst_memory) = (0f64, 0f64);
    while Instant::now() < deadline {
        let pick = |rng: &mut fastrand::Rng| -> &[u8] {
            if kept.is_empty() || rng.bool() {
                &seeds[rng.usize(0..seeds.len())]
            } else {
                &kept[rng.usize(0..kept.len())].1
            }
        };
        let (parent, donor) = (pick(&mut rng), pick(&mut rng));
        let child = if rng.u8(0..4) == 0 {
            let mut made = (target.generate)(&mut rng);
            made.truncate(target.max_len);
            made
        } else {
            mutate::mutate(&mut rng, parent, donor, target.dictionary, target.max_len)
        };
        let cost = check(target, &child).unwrap_or_else(|why| fail(&child, why));
        runs += 1;
        (worst_time, worst_memory) = (worst_time.max(cost.of_time), worst_memory.max(cost.of_memory));
        let ratio = cost.ratio();
        if kept.len() < KEPT || ratio > kept[0].0 {
            if kept.len() == KEPT {
                kept.remove(0);
            }
            let at = kept.partition_point(|(r, _)| *r < ratio);
            kept.insert(at, (ratio, child));
        }
    }
    eprintln!(
        "{}: {runs} inputs in {secs} s (seed {seed}); the costliest at {:.0}% of the time bound, {:.0}% of the memory bound",
        target.name,
        worst_time * 100.0,
        worst_memory * 100.0
    );
}
