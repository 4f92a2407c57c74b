//! Host-side bindings generated from `wit/`, the one source of truth for the contract.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "connector",
    imports: { default: async },
    exports: { default: async },
    additional_derives: [PartialEq],
});

/// Bindings of a world that extends `connector`, sharing its types and imports: only the
/// exports it adds are used, looked up in instances of plugins that have them.
macro_rules! extension_world {
    ($world:literal) => {
        wasmtime::component::bindgen!({
            path: "../wit",
            world: $world,
            imports: { default: async },
            exports: { default: async },
            additional_derives: [PartialEq],
            with: {
                "sluice:connector/types": crate::bindings::sluice::connector::types,
                "sluice:connector/http": crate::bindings::sluice::connector::http,
                "sluice:connector/log": crate::bindings::sluice::connector::log,
            },
        });
    };
}

/// The `async-connector` world (0.1.1): its `async-jobs` export.
pub mod jobs {
    extension_world!("async-connector");
}

/// The `resumable-connector` world (0.1.2): its `resume` export.
pub mod resume {
    extension_world!("resumable-connector");
}

/// The `stepped-connector` world (0.1.5): its `stepped-pages` export.
pub mod stepped {
    extension_world!("stepped-connector");
}

/// The `shaped-connector` world (0.1.6): its `state-shape` export.
pub mod shaped {
    extension_world!("shaped-connector");
}

pub use exports::sluice::connector::source::{
    CapabilitySet as Capabilities, Guest as Source, Page, Partition, PartitionBatch, Stream,
};
pub use jobs::exports::sluice::connector::async_jobs::{
    Guest as AsyncJobs, GuestIndices as AsyncJobsIndices, JobSettings, JobStatus,
};
pub use resume::exports::sluice::connector::resume::{Guest as Resume, GuestIndices as ResumeIndices};
pub use shaped::exports::sluice::connector::state_shape::{Guest as StateShape, GuestIndices as StateShapeIndices};
pub use sluice::connector::http::{
    BodyError, ForwardedResponse, HttpError, Lines, RecordsResponse, Request, Response, ResponseHead,
};
pub use sluice::connector::log::Level;
pub use sluice::connector::types::{CursorRange, CursorValue, Error as GuestError};
pub use stepped::exports::sluice::connector::stepped_pages::{
    Answer as StepAnswer, BodyUse, Guest as SteppedPages, GuestIndices as SteppedPagesIndices, Outgoing, Step,
};

/// The WIT package version this host implements; guests built for `0.1.x` load.
pub const WIT_PACKAGE: &str = "sluice:connector";
pub const WIT_VERSION: &str = "0.1.6";
