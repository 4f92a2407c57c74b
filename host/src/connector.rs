//! A loaded plugin bound to one config and one egress policy, and its instances. Every call goes
//! to an instance; an instance serves one partition (or one listing) and is dropped after it,
//! and after any trap.

use crate::bindings::{self, Capabilities, GuestError, Page, Partition, PartitionBatch, Stream};
use crate::egress::Egress;
use crate::engine::Plugin;
use crate::protocol::FailureType;
use crate::sandbox::{GuestLog, GuestState};
use std::sync::Arc;
use wasmtime::Store;

/// What a guest call can end in besides success.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The connector returned an error.
    Guest(GuestError),
    /// The guest trapped or broke the contract; the instance is unusable.
    Trap(String),
}

impl CallError {
    pub fn failure_type(&self) -> FailureType {
        match self {
            CallError::Guest(GuestError::Config(_)) => FailureType::Config,
            CallError::Guest(GuestError::Transient(_)) => FailureType::Transient,
            CallError::Guest(GuestError::System(_)) | CallError::Trap(_) => FailureType::System,
        }
    }

    pub fn message(&self) -> String {
        match self {
            CallError::Guest(GuestError::Config(m) | GuestError::Transient(m) | GuestError::System(m)) => m.clone(),
            CallError::Trap(m) => format!("the connector crashed: {m}"),
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// A plugin with a config, ready to make instances.
pub struct Connector {
    pub plugin: Arc<Plugin>,
    pub config: String,
    pub egress: Arc<Egress>,
}

/// One guest instance with its own store.
pub struct Instance {
    store: Store<GuestState>,
    bindings: bindings::Connector,
}

impl Connector {
    pub async fn instance(&self) -> Result<Instance, CallError> {
        let mut store = Store::new(self.plugin.pre.engine(), GuestState::new(self.egress.clone()));
        let bindings = self.plugin.pre.instantiate_async(&mut store).await.map_err(trap)?;
        Ok(Instance { store, bindings })
    }
}

fn trap(e: wasmtime::Error) -> CallError {
    CallError::Trap(format!("{e:#}"))
}

fn flatten<T>(r: wasmtime::Result<Result<T, GuestError>>) -> Result<T, CallError> {
    r.map_err(trap)?.map_err(CallError::Guest)
}

// The generated export bindings take `&String`; passing ours through avoids a copy per call.
#[allow(clippy::ptr_arg)]
impl Instance {
    pub fn take_logs(&mut self) -> Vec<GuestLog> {
        self.store.data_mut().take_logs()
    }

    pub async fn spec(&mut self) -> Result<String, CallError> {
        self.bindings.sluice_connector_source().call_spec(&mut self.store).await.map_err(trap)
    }

    pub async fn capabilities(&mut self, config: &String) -> Result<Capabilities, CallError> {
        flatten(self.bindings.sluice_connector_source().call_capabilities(&mut self.store, config).await)
    }

    pub async fn check(&mut self, config: &String) -> Result<(), CallError> {
        flatten(self.bindings.sluice_connector_source().call_check(&mut self.store, config).await)
    }

    pub async fn discover(&mut self, config: &String) -> Result<Vec<Stream>, CallError> {
        flatten(self.bindings.sluice_connector_source().call_discover(&mut self.store, config).await)
    }

    pub async fn partitions(
        &mut self,
        config: &String,
        stream: &String,
        state: Option<&String>,
        token: Option<&String>,
    ) -> Result<PartitionBatch, CallError> {
        flatten(
            self.bindings
                .sluice_connector_source()
                .call_partitions(&mut self.store, config, stream, state, token)
                .await,
        )
    }

    pub async fn read_page(
        &mut self,
        config: &String,
        partition: &Partition,
        token: Option<&String>,
    ) -> Result<Page, CallError> {
        flatten(self.bindings.sluice_connector_source().call_read_page(&mut self.store, config, partition, token).await)
    }
}
