//! The pooling allocator's slots, as the host hands them out: what an instance of a plugin takes
//! from the pool ([`PoolNeeds`], from its compiled component) and the permits that keep a run's
//! instances within the pool's totals ([`PoolSlots`]). The pool itself is configured in
//! the engine (`guest/engine.rs`).

use crate::guest::sandbox::{MAX_MEMORIES, MAX_TABLES};
use std::sync::Arc;
use wasmtime::component::Component;

/// What each slot of the pool holds besides one component instance and its fiber stack. A
/// component may have more (the store's limiter allows MAX_MEMORIES, MAX_TABLES), so an instance
/// takes as many slots as its memories and tables need ([`PoolNeeds::slots`]).
pub const MEMORIES_PER_SLOT: u32 = 2;
pub const TABLES_PER_SLOT: u32 = 4;

/// The memories and tables (and component instances) one instance of a plugin takes from the
/// pool, from its compiled component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolNeeds {
    pub memories: u32,
    pub tables: u32,
    pub components: u32,
}

impl PoolNeeds {
    /// What one instance of `component` allocates. A component that instantiates imported core
    /// modules cannot be counted ahead; it is charged the most a store may hold.
    pub fn of(component: &Component) -> Self {
        match component.resources_required() {
            Some(r) => PoolNeeds { memories: r.num_memories, tables: r.num_tables, components: 1 },
            None => PoolNeeds { memories: MAX_MEMORIES as u32, tables: MAX_TABLES as u32, components: 1 },
        }
    }

    /// Both in one store (a declarative engine and its custom components' runtime).
    pub fn and(self, other: PoolNeeds) -> PoolNeeds {
        PoolNeeds {
            memories: self.memories.saturating_add(other.memories),
            tables: self.tables.saturating_add(other.tables),
            components: self.components.saturating_add(other.components),
        }
    }

    /// Slots' worth: at least one, more when the memories or tables pass one slot's share.
    pub fn slots(self) -> u32 {
        [1, self.components, self.memories.div_ceil(MEMORIES_PER_SLOT), self.tables.div_ceil(TABLES_PER_SLOT)]
            .into_iter()
            .max()
            .unwrap_or(1)
    }
}

/// The pool's slots as permits. wasmtime's pool counts component instances, memories and tables
/// each against a total of its own, and fails an instantiation past one of them; an instance
/// takes [`PoolNeeds::slots`] permits first, so no total is passed while permits are held, and a
/// run waits for room instead of failing its partitions with the pool half empty.
pub struct PoolSlots {
    permits: Arc<tokio::sync::Semaphore>,
    slots: u32,
}

impl PoolSlots {
    pub fn new(slots: u32) -> Self {
        PoolSlots { permits: Arc::new(tokio::sync::Semaphore::new(slots as usize)), slots }
    }

    /// Room for one instance with `needs`, held until the permit is dropped. An instance that
    /// needs more than the whole pool waits for all of it (the pool's totals hold the most one
    /// store may have, as the engine sizes them).
    pub async fn take(&self, needs: PoolNeeds) -> tokio::sync::OwnedSemaphorePermit {
        let wanted = needs.slots().min(self.slots);
        self.permits.clone().acquire_many_owned(wanted).await.expect("the pool's semaphore is never closed")
    }

    /// Slots no instance holds.
    #[cfg(test)]
    pub fn free(&self) -> usize {
        self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A declarative engine and its custom components' runtime share a store: both count.
    #[test]
    fn an_engine_and_its_runtime_are_counted_together() {
        let engine = PoolNeeds { memories: 1, tables: 2, components: 1 };
        let runtime = PoolNeeds { memories: 1, tables: 3, components: 1 };
        assert_eq!(engine.slots(), 1);
        assert_eq!(engine.and(runtime), PoolNeeds { memories: 2, tables: 5, components: 2 });
        assert_eq!(engine.and(runtime).slots(), 2);
    }
}
