//! The test binary's allocator: the system's, counting the bytes each thread holds, so a fuzz
//! target can measure the peak memory one input made the host hold. Counted per thread (an
//! input is parsed on one thread, and other tests of the binary run on theirs); a block freed
//! on another thread than the one that allocated it moves the counts a little, never the bound.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct Counting;

thread_local! {
    /// Bytes this thread allocated and has not freed, and the most since the last reset.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn moved(delta: isize) {
    // `try_with`: nothing to count once the thread's locals are gone (at its exit).
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

// SAFETY: every call is passed to the system allocator unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            moved(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            moved(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        moved(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            moved(new_size as isize - layout.size() as isize);
        }
        q
    }
}

/// Starts a measurement on this thread: the peak becomes what is held now.
pub fn reset_peak() {
    let now = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(now));
}

/// The most this thread held above `base` since [`reset_peak`].
pub fn peak_above(base: isize) -> usize {
    (PEAK.with(Cell::get) - base).max(0) as usize
}

/// What this thread holds now.
pub fn live() -> isize {
    LIVE.with(Cell::get)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peak_of_a_thread_is_what_it_held_at_most() {
        super::reset_peak();
        let base = super::live();
        let big = vec![0u8; 8 << 20];
        drop(big);
        let small = vec![0u8; 1 << 10];
        let peak = super::peak_above(base);
        assert!((8 << 20..(8 << 20) + (64 << 10)).contains(&peak), "peak {peak}");
        drop(small);
        assert!(super::live() - base < 1024, "freed blocks are counted out");
    }
}
