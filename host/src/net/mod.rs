//! The network: the one place that opens sockets for guests. [`grants`] says who may be
//! reached, [`egress`] makes the requests (timeouts, retries, rate limits, size caps) through
//! [`client`] (the exchange itself, over pooled connections), [`pace`] spaces them
//! per host, [`budget`] keeps a manifest's call budget (the CDK's `HTTPAPIBudget`), [`body`]
//! hands streamed bodies to guests a piece at a time, [`records`] takes the records out of a
//! JSON answer for `send-records`, and [`hooks`] is the seam recording, replay and an
//! embedder's policy plug into.

pub mod body;
pub mod budget;
pub mod client;
pub mod egress;
pub mod grants;
pub mod hooks;
pub mod pace;
pub mod records;

pub use egress::{Egress, HttpOptions};
pub use grants::{EgressPolicy, HostPort};
pub use hooks::HttpHooks;
