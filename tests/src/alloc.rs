//! A counting global allocator for the allocation tests (SSE decoder, JSON-RPC
//! classification, replay ring): each test binary installs [`Counting`] and reads a
//! [`Meter`]. Counters are per thread, so tests running in parallel do not mix counts.

#![allow(unsafe_code)] // A global allocator is the one place that needs it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// A global allocator that forwards to [`System`] and counts, per thread, allocations
/// (including reallocations) and live and peak heap bytes. Install it in a test binary:
/// `#[global_allocator] static GLOBAL: Counting = Counting;`.
pub struct Counting;

thread_local! {
    // `const` thread-locals without destructors: safe to touch from inside the allocator
    // (no lazy initialisation, no allocation, no registration).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn on_alloc(size: usize) {
    // `try_with` so that allocations during thread teardown are simply not counted.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    on_resize(0, size);
}

fn on_resize(old: usize, new: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + new as isize - old as isize;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are ours; the bookkeeping only touches const thread-locals.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            on_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            on_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        on_resize(layout.size(), 0);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by `System` with `layout`; the caller upholds the
        // rest of `GlobalAlloc::realloc`'s contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
            on_resize(layout.size(), new_size);
        }
        new
    }
}

/// Allocation counters of the current thread, relative to when it was taken.
pub struct Meter {
    allocations: usize,
    live: isize,
}

impl Meter {
    /// Starts measuring: the peak is reset to the current live bytes.
    pub fn start() -> Self {
        let live = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(live));
        Self {
            allocations: ALLOCATIONS.with(Cell::get),
            live,
        }
    }

    /// Allocations (including reallocations) since `start`.
    pub fn allocations(&self) -> usize {
        ALLOCATIONS.with(Cell::get) - self.allocations
    }

    /// The live heap now, above (or below) the live heap at `start`: what was allocated
    /// since and is still held.
    pub fn live_growth(&self) -> isize {
        LIVE.with(Cell::get) - self.live
    }

    /// The highest live heap since `start`, above the live heap at `start`.
    pub fn peak_growth(&self) -> isize {
        PEAK.with(Cell::get) - self.live
    }
}
