//! Host-side bindings generated from `wit/`, the one source of truth for the contract.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "connector",
    imports: { default: async },
    exports: { default: async },
    additional_derives: [PartialEq],
});

pub use exports::sluice::connector::source::{CapabilitySet as Capabilities, Page, Partition, PartitionBatch, Stream};
pub use sluice::connector::http::{HttpError, Request, Response};
pub use sluice::connector::log::Level;
pub use sluice::connector::types::{CursorRange, CursorValue, Error as GuestError};

/// The WIT package version this host implements; guests built for `0.1.x` load.
pub const WIT_PACKAGE: &str = "sluice:connector";
pub const WIT_VERSION: &str = "0.1.0";
