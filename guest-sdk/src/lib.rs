//! Write Sluice data-source connectors in Rust.
//!
//! A connector is a type that implements [`Source`], exported with [`export_source!`]:
//!
//! ```ignore
//! use sluice_guest::{Page, Partition, Result, Source, Stream, Value};
//!
//! #[derive(serde::Deserialize)]
//! struct Config { base_url: String }
//!
//! struct MySource;
//!
//! impl Source for MySource {
//!     type Config = Config;
//!     fn spec() -> Value { serde_json::json!({"type": "object", "required": ["base_url"]}) }
//!     fn streams(_: &Config) -> Result<Vec<Stream>> {
//!         Ok(vec![Stream::new("items", serde_json::json!({"type": "object"})).primary_key("id")])
//!     }
//!     fn read_page(config: &Config, _: &Partition, token: Option<Value>) -> Result<Page> {
//!         let body: serde_json::Value = sluice_guest::http::get(format!("{}/items", config.base_url)).send()?.json()?;
//!         Page::from_values(body["data"].as_array().cloned().unwrap_or_default())
//!     }
//! }
//! sluice_guest::export_source!(MySource);
//! ```
//!
//! Every function is called with everything it needs: the host keeps page tokens, partitions and
//! cursors between calls, so a connector holds no state of its own.

mod error;
pub mod http;
pub mod log;
pub mod paginate;
pub mod slice;
mod types;

pub use error::{Error, Result, ResultExt};
pub use serde_json::{self, Value, json};
pub use types::{CursorRange, CursorValue, Page, Partition, PartitionBatch, Stream};

/// A data-source connector. Only [`Source::spec`], [`Source::streams`] and [`Source::read_page`]
/// have no default.
pub trait Source {
    /// The connector's configuration, parsed from the operator's config JSON. A config that does
    /// not parse is reported to the operator as a config error.
    type Config: serde::de::DeserializeOwned;

    /// The JSON Schema of the config. Mark secret fields with `"airbyte_secret": true` so the host
    /// masks them in logs.
    fn spec() -> Value;

    /// The `host:port` pairs this config needs to reach. The operator must grant them too.
    fn hosts(_config: &Self::Config) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Tries the config against the API. The default accepts any config that parses.
    fn check(_config: &Self::Config) -> Result<()> {
        Ok(())
    }

    /// The streams this config can read.
    fn streams(config: &Self::Config) -> Result<Vec<Stream>>;

    /// Slicing: the partitions of `stream`. The default is one partition covering the stream.
    /// `state` is the host's saved state for the stream; most connectors ignore it, because the
    /// host sets each partition's cursor start from it before reading.
    fn partitions(_config: &Self::Config, stream: &str, _state: Option<&Value>) -> Result<Vec<Partition>> {
        Ok(vec![Partition::whole(stream)])
    }

    /// Like [`Source::partitions`] but a batch at a time, for streams with very many partitions
    /// (set [`PartitionBatch::next`] to be called again), or to report how many records the
    /// stream holds. The default returns [`Source::partitions`] at once.
    fn partition_batch(
        config: &Self::Config,
        stream: &str,
        state: Option<&Value>,
        _token: Option<Value>,
    ) -> Result<PartitionBatch> {
        Ok(PartitionBatch::new(Self::partitions(config, stream, state)?))
    }

    /// Retrieving and paginating: one page of `partition`. `token` is `None` for the first page and
    /// the previous page's next token after that.
    fn read_page(config: &Self::Config, partition: &Partition, token: Option<Value>) -> Result<Page>;
}

/// Exports a [`Source`] implementation as the component's `source` interface.
#[macro_export]
macro_rules! export_source {
    ($source:ty) => {
        const _: () = {
            struct __SluiceExport;
            impl $crate::__private::Guest for __SluiceExport {
                fn spec() -> ::std::string::String {
                    $crate::__private::spec::<$source>()
                }
                fn capabilities(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<$crate::__private::Capabilities> {
                    $crate::__private::capabilities::<$source>(config)
                }
                fn check(config: ::std::string::String) -> $crate::__private::WitResult<()> {
                    $crate::__private::check::<$source>(config)
                }
                fn discover(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::vec::Vec<$crate::__private::WitStream>> {
                    $crate::__private::discover::<$source>(config)
                }
                fn partitions(
                    config: ::std::string::String,
                    stream: ::std::string::String,
                    state: ::std::option::Option<::std::string::String>,
                    token: ::std::option::Option<::std::string::String>,
                ) -> $crate::__private::WitResult<$crate::__private::PartitionBatch> {
                    $crate::__private::partitions::<$source>(config, stream, state, token)
                }
                fn read_page(
                    config: ::std::string::String,
                    partition: $crate::__private::WitPartition,
                    token: ::std::option::Option<::std::string::String>,
                ) -> $crate::__private::WitResult<$crate::__private::WitPage> {
                    $crate::__private::read_page::<$source>(config, partition, token)
                }
            }
    $crate::__private::bindings::__export_connector!(__SluiceExport with_types_in $crate::__private::bindings);
        };
    };
}

/// Glue used by [`export_source!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "connector",
            pub_export_macro: true,
            export_macro_name: "__export_connector",
        });
    }

    use crate::{Error, Source, Value};
    pub use bindings::exports::sluice::connector::source::Guest;
    use bindings::sluice::connector::types;
    pub use types::{
        CapabilitySet as Capabilities, Page as WitPage, Partition as WitPartition, PartitionBatch, Stream as WitStream,
    };

    pub type WitResult<T> = Result<T, types::Error>;

    fn config<S: Source>(config: &str) -> crate::Result<S::Config> {
        serde_json::from_str(config).map_err(|e| Error::Config(format!("invalid config: {e}")))
    }

    fn parse_json(what: &str, text: Option<String>) -> crate::Result<Option<Value>> {
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| Error::System(format!("the host sent invalid {what} JSON: {e}")))
        })
        .transpose()
    }

    pub fn spec<S: Source>() -> String {
        S::spec().to_string()
    }

    pub fn capabilities<S: Source>(config_json: String) -> WitResult<Capabilities> {
        let run =
            || -> crate::Result<Capabilities> { Ok(Capabilities { hosts: S::hosts(&config::<S>(&config_json)?)? }) };
        run().map_err(Into::into)
    }

    pub fn check<S: Source>(config_json: String) -> WitResult<()> {
        let run = || -> crate::Result<()> { S::check(&config::<S>(&config_json)?) };
        run().map_err(Into::into)
    }

    pub fn discover<S: Source>(config_json: String) -> WitResult<Vec<WitStream>> {
        let run = || -> crate::Result<Vec<WitStream>> {
            Ok(S::streams(&config::<S>(&config_json)?)?.into_iter().map(Into::into).collect())
        };
        run().map_err(Into::into)
    }

    pub fn partitions<S: Source>(
        config_json: String,
        stream: String,
        state: Option<String>,
        token: Option<String>,
    ) -> WitResult<PartitionBatch> {
        let run = || -> crate::Result<PartitionBatch> {
            let config = config::<S>(&config_json)?;
            let state = parse_json("state", state)?;
            let token = parse_json("partition token", token)?;
            Ok(S::partition_batch(&config, &stream, state.as_ref(), token)?.into())
        };
        run().map_err(Into::into)
    }

    pub fn read_page<S: Source>(
        config_json: String,
        partition: WitPartition,
        token: Option<String>,
    ) -> WitResult<WitPage> {
        let run = || -> crate::Result<WitPage> {
            let config = config::<S>(&config_json)?;
            let partition = crate::Partition::try_from(partition)?;
            let token = parse_json("page token", token)?;
            Ok(S::read_page(&config, &partition, token)?.into())
        };
        run().map_err(Into::into)
    }
}
