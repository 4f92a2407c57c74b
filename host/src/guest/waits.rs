//! A guest waiting on a WASI pollable (a sleep: `wasi:io/poll`'s `poll` and `pollable.block`) is
//! not computing: its CPU clock stops while it waits, as it does while the host sends its
//! requests, and it does not count as wanting a core. wasmtime-wasi's own poll waits with the
//! guest's clock running, so a guest that slept was charged its sleep whenever it woke on
//! another thread (the clock then falls back to the wall clock): a 700 ms sleep failed a 500 ms
//! CPU budget, and a connector backing off with `time.sleep` would have failed its call.

use crate::guest::sandbox::{GuestClock, GuestState};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi_io::bindings::wasi::io::poll;
use wasmtime_wasi_io::poll::DynPollable;

/// The WASI resource table and the guest's clock: what `wasi:io/poll` needs.
struct Waits<'a> {
    table: &'a mut ResourceTable,
    clock: &'a GuestClock,
}

fn waits(state: &mut GuestState) -> Waits<'_> {
    let (table, clock) = state.table_and_clock();
    Waits { table, clock }
}

struct HasWaits;

impl HasData for HasWaits {
    type Data<'a> = Waits<'a>;
}

impl poll::Host for Waits<'_> {
    async fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        self.clock.waiting(poll::Host::poll(&mut *self.table, pollables)).await
    }
}

impl poll::HostPollable for Waits<'_> {
    async fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        self.clock.waiting(poll::HostPollable::block(&mut *self.table, pollable)).await
    }

    async fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        poll::HostPollable::ready(&mut *self.table, pollable).await
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        poll::HostPollable::drop(&mut *self.table, pollable)
    }
}

/// Puts this `wasi:io/poll` in place of wasmtime-wasi's (added before it).
pub fn add_to_linker(linker: &mut Linker<GuestState>) -> anyhow::Result<()> {
    linker.allow_shadowing(true);
    let added = poll::add_to_linker::<GuestState, HasWaits>(linker, waits);
    linker.allow_shadowing(false);
    added.map_err(|e| anyhow::anyhow!("{e}"))
}
