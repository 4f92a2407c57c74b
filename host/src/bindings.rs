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

/// The `partition-config-connector` world (0.1.7): its `partition-config` export.
pub mod partition_config {
    extension_world!("partition-config-connector");
}

pub use exports::sluice::connector::source::{
    CapabilitySet as Capabilities, Guest as Source, Page, Partition, PartitionBatch, Stream,
};
pub use jobs::exports::sluice::connector::async_jobs::{
    Guest as AsyncJobs, GuestIndices as AsyncJobsIndices, JobSettings, JobStatus,
};
pub use partition_config::exports::sluice::connector::partition_config::{
    Guest as PartitionConfig, GuestIndices as PartitionConfigIndices,
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

/// The WIT package this host implements, at its current version.
pub const WIT_PACKAGE: &str = "sluice:connector";
pub const WIT_VERSION: &str = ContractVersion::CURRENT.as_str();

/// The released versions of the contract this host serves, oldest first. Each is frozen under
/// `wit/since_vX.Y.Z/` (docs/contract.md) and a committed guest built for it is run by the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContractVersion {
    V0_1_0,
    V0_1_1,
    V0_1_2,
    V0_1_3,
    V0_1_4,
    V0_1_5,
    V0_1_6,
    V0_1_7,
}

/// How the host serves a contract version: the shim between a guest built for it and the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shim {
    /// The 0.1 track only ever added interfaces, functions and worlds, so the current bindings
    /// serve every 0.1 guest: wasmtime's linker resolves a guest's `@0.1.k` imports against the
    /// host's `@0.1.7`, and the exports a guest of 0.1.k does not have are looked up and found
    /// missing (the features they carry are off for it). A 0.2 gets its own bindings and shim.
    Track0_1,
}

impl ContractVersion {
    pub const ALL: [ContractVersion; 8] = [
        Self::V0_1_0,
        Self::V0_1_1,
        Self::V0_1_2,
        Self::V0_1_3,
        Self::V0_1_4,
        Self::V0_1_5,
        Self::V0_1_6,
        Self::V0_1_7,
    ];
    /// Where new work goes (`wit/connector.wit`); released, it is frozen as the others are.
    pub const CURRENT: ContractVersion = Self::V0_1_7;

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V0_1_0 => "0.1.0",
            Self::V0_1_1 => "0.1.1",
            Self::V0_1_2 => "0.1.2",
            Self::V0_1_3 => "0.1.3",
            Self::V0_1_4 => "0.1.4",
            Self::V0_1_5 => "0.1.5",
            Self::V0_1_6 => "0.1.6",
            Self::V0_1_7 => "0.1.7",
        }
    }

    /// The version a guest names, if this host serves it (exactly: a newer 0.1.k is not served,
    /// as its guest may call what this host does not have).
    pub fn parse(version: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == version)
    }

    pub fn shim(self) -> Shim {
        Shim::Track0_1
    }

    /// The versions served, as messages name them: `0.1.0 to 0.1.7`.
    pub fn served() -> String {
        format!("{WIT_PACKAGE}@{} to {}", Self::ALL[0].as_str(), Self::CURRENT.as_str())
    }
}

/// The components runtime's world (wit/components): the host serves its `host` import and calls
/// its `custom` export for the declarative engine (see `guest::custom`).
pub mod components {
    wasmtime::component::bindgen!({
        path: "../wit/components",
        world: "runtime",
        imports: { default: async },
        exports: { default: async },
    });
}
