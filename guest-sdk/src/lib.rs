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
pub mod steps;
mod types;

pub use error::{Error, Result, ResultExt};
pub use serde_json::{self, Value, json};
pub use steps::Steps;
pub use types::{CursorRange, CursorValue, Page, Partition, PartitionBatch, Stream};

/// A data-source connector. Only [`Source::spec`], [`Source::streams`] and [`Source::read_page`]
/// have no default.
pub trait Source {
    /// The connector's configuration, parsed from the operator's config JSON. A config that does
    /// not parse is reported to the operator as a config error.
    type Config: serde::de::DeserializeOwned;

    /// Reads the config text the host passes to every call. The default is [`parse_config`]
    /// (serde, a field set to `null` taken as absent, errors naming the field); a connector that
    /// keeps what it built from a config between calls, and so need not parse the same text
    /// again, may override it (and then override [`Source::partition_config_fields`] too, if
    /// it reads fields `Config` does not name).
    fn parse_config(text: &str) -> Result<Self::Config> {
        parse_config(text)
    }

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

    /// The streams whose page tokens stay valid across runs (an offset, a page number, a cursor
    /// or next-page URL the API keeps): the host may then save a partition's next token after each
    /// page and resume the partition there after a crash, instead of reading it again from its
    /// start. The default is none (contract 0.1.2).
    fn resumable_streams(_config: &Self::Config) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// The streams read in steps (contract 0.1.5): the host calls [`Source::read_step`] for
    /// their pages instead of [`Source::read_page`]. The default is none.
    fn stepped_streams(_config: &Self::Config) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// One step of a page of a stream read in steps: the page read from its start, every request
    /// sent through `steps` ([`Steps::send`], [`Steps::send_records`]) and its error passed on
    /// with `?`. The host answers the requests one step at a time, sending each between two
    /// steps with no instance held, so partitions waiting on an API hold no instance. The default
    /// reads the page whole.
    fn read_step(
        config: &Self::Config,
        partition: &Partition,
        token: Option<Value>,
        _steps: &mut Steps,
    ) -> Result<Page> {
        Self::read_page(config, partition, token)
    }

    /// The streams whose saved state keeps another engine's shape (contract 0.1.6; the
    /// declarative engine writes the Airbyte CDK's): the host then calls
    /// [`Source::state_to_host`] on a state it is handed and [`Source::state_from_host`] on every
    /// state it writes. The default is none: the host's own form (docs/state.md).
    fn shaped_streams(_config: &Self::Config) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// A saved state of a shaped stream in the host's form; `None` when it is not in this
    /// connector's shape (the host reads it as its own form then).
    fn state_to_host(_config: &Self::Config, _stream: &str, _state: &Value) -> Result<Option<Value>> {
        Ok(None)
    }

    /// The host's state of a shaped stream (with `newest`, the newest cursor value read) in this
    /// connector's shape. The default writes the host's form.
    fn state_from_host(_config: &Self::Config, _stream: &str, state: &Value) -> Result<Value> {
        Ok(state.clone())
    }

    /// The top-level config fields that reading a partition uses (contract 0.1.7): the host
    /// then hands [`Source::read_page`], [`Source::read_step`] and the [`AsyncJobs`] calls a
    /// config with only those, so a field only [`Source::partitions`] reads (a list of the
    /// accounts to read, as long as the run has partitions) is not read again by every
    /// partition's fresh instance. The default is the fields `Config` names
    /// ([`config_fields`]), which is right unless [`Source::parse_config`] reads more than
    /// `Config` names; `None` hands every call the whole config. Name fewer to leave out what
    /// only the listing reads (those fields must then be optional in `Config`).
    fn partition_config_fields(_config: &Self::Config) -> Option<Vec<String>> {
        config_fields::<Self::Config>()
    }
}

/// A config as [`Source::parse_config`] reads it by default: a JSON object deserialized into `T`,
/// top-level fields set to `null` taken as absent (platforms' forms write `null` for an optional
/// field left empty), and a config error that names the field (`invalid config: page_size:
/// invalid type: string "100", expected u32`). The same answers as the Python and JavaScript
/// SDKs' `field` (guest-sdk/cases/config_fields.json).
pub fn parse_config<T: serde::de::DeserializeOwned>(text: &str) -> Result<T> {
    let invalid = |e: &dyn std::fmt::Display| Error::Config(format!("invalid config: {e}"));
    // Every call of a fresh instance reads the config again: when the text has no `null` at all
    // (so no top-level null to take as absent), `T` is read from the text itself, its unknown
    // fields skipped unparsed (a config may hold long lists the connector does not read), rather
    // than through a whole JSON value. An error is said as reading the value says it (without
    // the text's line and column).
    if !text.contains("null")
        && let Ok(config) = serde_json::from_str::<T>(text)
    {
        return Ok(config);
    }
    let mut value: Value = serde_json::from_str(text).map_err(|e| invalid(&e))?;
    match value.as_object_mut() {
        Some(fields) => fields.retain(|_, v| !v.is_null()),
        None => return Err(invalid(&"expected a JSON object")),
    }
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string().as_str() {
        "." => invalid(e.inner()),
        path => invalid(&format!("{path}: {}", e.inner())),
    })
}

/// The top-level fields a config type reads: the names (aliases too) a `#[derive(Deserialize)]`
/// struct declares, for [`Source::partition_config_fields`]. `None` when `T` is not such a
/// struct, or takes fields it does not name (`#[serde(flatten)]`, a map).
pub fn config_fields<T: serde::de::DeserializeOwned>() -> Option<Vec<String>> {
    /// A deserializer that only notes the fields a struct asks for.
    struct Fields<'a>(&'a mut Option<Vec<String>>);
    impl<'de> serde::Deserializer<'de> for Fields<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> std::result::Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            *self.0 = Some(fields.iter().map(|f| f.to_string()).collect());
            Err(serde::de::Error::custom("fields noted"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields = None;
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

/// Exports a [`Source`] implementation as the component's `source` interface (in the
/// `async-connector` world, with no stream read through jobs).
#[macro_export]
macro_rules! export_source {
    ($source:ty) => {
        $crate::export_async_source!($crate::__private::WithoutJobs<$source>);
    };
}

/// Exports a type implementing [`Source`] and [`AsyncJobs`]: the `source` and `async-jobs`
/// interfaces (world `partition-config-connector`, contract 0.1.7).
#[macro_export]
macro_rules! export_async_source {
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
            impl $crate::__private::AsyncJobsGuest for __SluiceExport {
                fn settings(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<$crate::__private::JobSettings> {
                    $crate::__private::job_settings::<$source>(config)
                }
                fn create_job(
                    config: ::std::string::String,
                    partition: $crate::__private::WitPartition,
                ) -> $crate::__private::WitResult<::std::string::String> {
                    $crate::__private::create_job::<$source>(config, partition)
                }
                fn poll_job(
                    config: ::std::string::String,
                    job: ::std::string::String,
                ) -> $crate::__private::WitResult<$crate::__private::WitJobStatus> {
                    $crate::__private::poll_job::<$source>(config, job)
                }
                fn read_result(
                    config: ::std::string::String,
                    job: ::std::string::String,
                    download: ::std::string::String,
                    token: ::std::option::Option<::std::string::String>,
                ) -> $crate::__private::WitResult<$crate::__private::WitPage> {
                    $crate::__private::read_result::<$source>(config, job, download, token)
                }
                fn abort_job(
                    config: ::std::string::String,
                    job: ::std::string::String,
                ) -> $crate::__private::WitResult<()> {
                    $crate::__private::end_job::<$source>(config, job, true)
                }
                fn delete_job(
                    config: ::std::string::String,
                    job: ::std::string::String,
                ) -> $crate::__private::WitResult<()> {
                    $crate::__private::end_job::<$source>(config, job, false)
                }
            }
            impl $crate::__private::ResumeGuest for __SluiceExport {
                fn resumable_streams(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::vec::Vec<::std::string::String>> {
                    $crate::__private::resumable_streams::<$source>(config)
                }
            }
            impl $crate::__private::SteppedPagesGuest for __SluiceExport {
                fn stepped_streams(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::vec::Vec<::std::string::String>> {
                    $crate::__private::stepped_streams::<$source>(config)
                }
                fn read_step(
                    config: ::std::string::String,
                    partition: $crate::__private::WitPartition,
                    token: ::std::option::Option<::std::string::String>,
                    answers: ::std::vec::Vec<$crate::__private::WitAnswer>,
                ) -> $crate::__private::WitResult<$crate::__private::WitStep> {
                    $crate::__private::read_step::<$source>(config, partition, token, answers)
                }
            }
            impl $crate::__private::PartitionConfigGuest for __SluiceExport {
                fn partition_fields(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::option::Option<::std::vec::Vec<::std::string::String>>>
                {
                    $crate::__private::partition_fields::<$source>(config)
                }
            }
            impl $crate::__private::StateShapeGuest for __SluiceExport {
                fn shaped_streams(
                    config: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::vec::Vec<::std::string::String>> {
                    $crate::__private::shaped_streams::<$source>(config)
                }
                fn to_host(
                    config: ::std::string::String,
                    stream: ::std::string::String,
                    state: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::option::Option<::std::string::String>> {
                    $crate::__private::state_to_host::<$source>(config, stream, state)
                }
                fn from_host(
                    config: ::std::string::String,
                    stream: ::std::string::String,
                    state: ::std::string::String,
                ) -> $crate::__private::WitResult<::std::string::String> {
                    $crate::__private::state_from_host::<$source>(config, stream, state)
                }
            }
    $crate::__private::bindings::__export_connector!(__SluiceExport with_types_in $crate::__private::bindings);
        };
    };
}

/// Where a report job is.
#[derive(Debug, Clone, PartialEq)]
pub enum JobStatus {
    /// Not done yet: the host polls again later.
    Running,
    /// Done: what to read, handed to [`AsyncJobs::read_result`] (a download URL, a result id).
    Completed(Value),
    /// Done without a result; the host may create a new job.
    Failed(String),
    /// The API does not know the job (expired, deleted): the host creates a new one.
    Unknown,
}

/// Streams read through report jobs: create a job for a partition, poll it, read its result a
/// page at a time, delete it. The host's orchestrator decides when: it keeps job slots, polls
/// on timers, retries failed jobs as new ones, and keeps handles in its state so a resumed run
/// polls the same jobs. Export with [`export_async_source!`].
pub trait AsyncJobs: Source {
    /// The streams read through jobs; their partitions come from [`Source::partitions`].
    fn job_streams(config: &Self::Config) -> Result<Vec<String>>;

    /// Jobs the API allows at once (the operator may override it with `--max-jobs`).
    fn max_jobs(_config: &Self::Config) -> u32 {
        4
    }

    /// Starts a job for a partition; returns its handle (ids, URLs: anything later calls need).
    fn create_job(config: &Self::Config, partition: &Partition) -> Result<Value>;

    fn poll_job(config: &Self::Config, job: &Value) -> Result<JobStatus>;

    /// One page of a completed job's result; `token` is `None` first, then the previous page's.
    fn read_result(config: &Self::Config, job: &Value, download: &Value, token: Option<Value>) -> Result<Page>;

    /// Stops a running job; by default, deletes it.
    fn abort_job(config: &Self::Config, job: &Value) -> Result<()> {
        Self::delete_job(config, job)
    }

    /// Removes a job once its result was read; by default, nothing.
    fn delete_job(_config: &Self::Config, _job: &Value) -> Result<()> {
        Ok(())
    }
}

/// Glue used by [`export_source!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    /// One world for every Rust connector: `partition-config-connector` (a connector without job
    /// streams answers `settings` with none, and the host never calls the rest; one without
    /// resumable, stepped or shaped streams names none).
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "partition-config-connector",
            pub_export_macro: true,
            export_macro_name: "__export_connector",
        });
    }

    use crate::{AsyncJobs, Error, JobStatus, Source, Value};
    pub use bindings::exports::sluice::connector::async_jobs::{
        Guest as AsyncJobsGuest, JobSettings, JobStatus as WitJobStatus,
    };
    pub use bindings::exports::sluice::connector::partition_config::Guest as PartitionConfigGuest;
    pub use bindings::exports::sluice::connector::resume::Guest as ResumeGuest;
    pub use bindings::exports::sluice::connector::source::Guest;
    pub use bindings::exports::sluice::connector::state_shape::Guest as StateShapeGuest;
    pub use bindings::exports::sluice::connector::stepped_pages::{Guest as SteppedPagesGuest, Step as WitStep};
    /// The host's answer to one step's request.
    pub type WitAnswer = Result<
        bindings::exports::sluice::connector::stepped_pages::Answer,
        bindings::sluice::connector::http::HttpError,
    >;
    use bindings::sluice::connector::types;
    pub use types::{
        CapabilitySet as Capabilities, Page as WitPage, Partition as WitPartition, PartitionBatch, Stream as WitStream,
    };

    pub type WitResult<T> = Result<T, types::Error>;

    fn config<S: Source>(config: &str) -> crate::Result<S::Config> {
        S::parse_config(config)
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

    pub fn resumable_streams<S: Source>(config_json: String) -> WitResult<Vec<String>> {
        let run = || -> crate::Result<Vec<String>> { S::resumable_streams(&config::<S>(&config_json)?) };
        run().map_err(Into::into)
    }

    pub fn stepped_streams<S: Source>(config_json: String) -> WitResult<Vec<String>> {
        let run = || -> crate::Result<Vec<String>> { S::stepped_streams(&config::<S>(&config_json)?) };
        run().map_err(Into::into)
    }

    pub fn shaped_streams<S: Source>(config_json: String) -> WitResult<Vec<String>> {
        let run = || -> crate::Result<Vec<String>> { S::shaped_streams(&config::<S>(&config_json)?) };
        run().map_err(Into::into)
    }

    pub fn state_to_host<S: Source>(config_json: String, stream: String, state: String) -> WitResult<Option<String>> {
        let run = || -> crate::Result<Option<String>> {
            let state = parse_json("state", Some(state))?.unwrap_or(Value::Null);
            Ok(S::state_to_host(&config::<S>(&config_json)?, &stream, &state)?.map(|v| v.to_string()))
        };
        run().map_err(Into::into)
    }

    pub fn state_from_host<S: Source>(config_json: String, stream: String, state: String) -> WitResult<String> {
        let run = || -> crate::Result<String> {
            let state = parse_json("state", Some(state))?.unwrap_or(Value::Null);
            Ok(S::state_from_host(&config::<S>(&config_json)?, &stream, &state)?.to_string())
        };
        run().map_err(Into::into)
    }

    pub fn partition_fields<S: Source>(config_json: String) -> WitResult<Option<Vec<String>>> {
        let run =
            || -> crate::Result<Option<Vec<String>>> { Ok(S::partition_config_fields(&config::<S>(&config_json)?)) };
        run().map_err(Into::into)
    }

    /// A step ends with the first request the host has not answered, whatever `read_step` made
    /// of the error that told it so; else with its page.
    pub fn read_step<S: Source>(
        config_json: String,
        partition: WitPartition,
        token: Option<String>,
        answers: Vec<WitAnswer>,
    ) -> WitResult<WitStep> {
        let mut steps = crate::Steps::replay(answers);
        let run = || -> crate::Result<WitPage> {
            let config = config::<S>(&config_json)?;
            let partition = crate::Partition::try_from(partition)?;
            let token = parse_json("page token", token)?;
            Ok(S::read_step(&config, &partition, token, &mut steps)?.into())
        };
        let page = run();
        match steps.pending() {
            Some(outgoing) => Ok(WitStep::Send(outgoing)),
            None => page.map(WitStep::Page).map_err(Into::into),
        }
    }

    /// A [`Source`] exported as an `async-connector` with no stream read through jobs.
    pub struct WithoutJobs<S>(std::marker::PhantomData<S>);

    impl<S: Source> Source for WithoutJobs<S> {
        type Config = S::Config;
        fn parse_config(text: &str) -> crate::Result<S::Config> {
            S::parse_config(text)
        }
        fn spec() -> Value {
            S::spec()
        }
        fn shaped_streams(config: &S::Config) -> crate::Result<Vec<String>> {
            S::shaped_streams(config)
        }
        fn state_to_host(config: &S::Config, stream: &str, state: &Value) -> crate::Result<Option<Value>> {
            S::state_to_host(config, stream, state)
        }
        fn state_from_host(config: &S::Config, stream: &str, state: &Value) -> crate::Result<Value> {
            S::state_from_host(config, stream, state)
        }
        fn partition_config_fields(config: &S::Config) -> Option<Vec<String>> {
            S::partition_config_fields(config)
        }
        fn hosts(config: &S::Config) -> crate::Result<Vec<String>> {
            S::hosts(config)
        }
        fn check(config: &S::Config) -> crate::Result<()> {
            S::check(config)
        }
        fn streams(config: &S::Config) -> crate::Result<Vec<crate::Stream>> {
            S::streams(config)
        }
        fn partitions(config: &S::Config, stream: &str, state: Option<&Value>) -> crate::Result<Vec<crate::Partition>> {
            S::partitions(config, stream, state)
        }
        fn partition_batch(
            config: &S::Config,
            stream: &str,
            state: Option<&Value>,
            token: Option<Value>,
        ) -> crate::Result<crate::PartitionBatch> {
            S::partition_batch(config, stream, state, token)
        }
        fn read_page(
            config: &S::Config,
            partition: &crate::Partition,
            token: Option<Value>,
        ) -> crate::Result<crate::Page> {
            S::read_page(config, partition, token)
        }
        fn resumable_streams(config: &S::Config) -> crate::Result<Vec<String>> {
            S::resumable_streams(config)
        }
        fn stepped_streams(config: &S::Config) -> crate::Result<Vec<String>> {
            S::stepped_streams(config)
        }
        fn read_step(
            config: &S::Config,
            partition: &crate::Partition,
            token: Option<Value>,
            steps: &mut crate::Steps,
        ) -> crate::Result<crate::Page> {
            S::read_step(config, partition, token, steps)
        }
    }

    impl<S: Source> AsyncJobs for WithoutJobs<S> {
        fn job_streams(_: &S::Config) -> crate::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn max_jobs(_: &S::Config) -> u32 {
            0
        }
        fn create_job(_: &S::Config, _: &crate::Partition) -> crate::Result<Value> {
            Err(no_jobs())
        }
        fn poll_job(_: &S::Config, _: &Value) -> crate::Result<JobStatus> {
            Err(no_jobs())
        }
        fn read_result(_: &S::Config, _: &Value, _: &Value, _: Option<Value>) -> crate::Result<crate::Page> {
            Err(no_jobs())
        }
        fn delete_job(_: &S::Config, _: &Value) -> crate::Result<()> {
            Err(no_jobs())
        }
    }

    fn no_jobs() -> Error {
        Error::System("this connector reads no stream through report jobs".into())
    }

    fn job(text: &str) -> crate::Result<Value> {
        serde_json::from_str(text).map_err(|e| Error::System(format!("the host sent an invalid job handle: {e}")))
    }

    pub fn job_settings<S: AsyncJobs>(config_json: String) -> WitResult<JobSettings> {
        let run = || -> crate::Result<JobSettings> {
            let config = config::<S>(&config_json)?;
            Ok(JobSettings { streams: S::job_streams(&config)?, max_jobs: S::max_jobs(&config) })
        };
        run().map_err(Into::into)
    }

    pub fn create_job<S: AsyncJobs>(config_json: String, partition: WitPartition) -> WitResult<String> {
        let run = || -> crate::Result<String> {
            let config = config::<S>(&config_json)?;
            Ok(S::create_job(&config, &crate::Partition::try_from(partition)?)?.to_string())
        };
        run().map_err(Into::into)
    }

    pub fn poll_job<S: AsyncJobs>(config_json: String, handle: String) -> WitResult<WitJobStatus> {
        let run = || -> crate::Result<WitJobStatus> {
            Ok(match S::poll_job(&config::<S>(&config_json)?, &job(&handle)?)? {
                JobStatus::Running => WitJobStatus::Running,
                JobStatus::Completed(download) => WitJobStatus::Completed(download.to_string()),
                JobStatus::Failed(reason) => WitJobStatus::Failed(reason),
                JobStatus::Unknown => WitJobStatus::Unknown,
            })
        };
        run().map_err(Into::into)
    }

    pub fn read_result<S: AsyncJobs>(
        config_json: String,
        handle: String,
        download: String,
        token: Option<String>,
    ) -> WitResult<WitPage> {
        let run = || -> crate::Result<WitPage> {
            let config = config::<S>(&config_json)?;
            let token = parse_json("page token", token)?;
            Ok(S::read_result(&config, &job(&handle)?, &job(&download)?, token)?.into())
        };
        run().map_err(Into::into)
    }

    pub fn end_job<S: AsyncJobs>(config_json: String, handle: String, abort: bool) -> WitResult<()> {
        let run = || -> crate::Result<()> {
            let config = config::<S>(&config_json)?;
            let handle = job(&handle)?;
            if abort { S::abort_job(&config, &handle) } else { S::delete_job(&config, &handle) }
        };
        run().map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_structs_fields_are_its_names_and_aliases() {
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Plain {
            base_url: String,
            #[serde(alias = "size")]
            page_size: Option<u32>,
            #[serde(rename = "token")]
            api_key: Option<String>,
        }
        let mut fields = config_fields::<Plain>().unwrap();
        fields.sort();
        assert_eq!(fields, ["base_url", "page_size", "size", "token"]);
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Flattened {
            base_url: String,
            #[serde(flatten)]
            rest: std::collections::HashMap<String, Value>,
        }
        assert_eq!(config_fields::<Flattened>(), None, "a flattened struct takes any field");
        assert_eq!(config_fields::<Value>(), None);
        assert_eq!(config_fields::<std::collections::HashMap<String, String>>(), None);
    }

    /// The fields of guest-sdk/cases/config_fields.json, as a connector declares them in Rust.
    #[derive(serde::Deserialize, Debug, PartialEq, serde::Serialize)]
    struct TableConfig {
        base_url: String,
        #[serde(default = "page_size")]
        page_size: u32,
        #[serde(default)]
        verbose: bool,
        start_date: Option<String>,
    }

    fn page_size() -> u32 {
        100
    }

    /// The table every SDK's tests run.
    #[test]
    fn config_fields_answer_the_shared_cases() {
        let table: Value = serde_json::from_str(include_str!("../cases/config_fields.json")).unwrap();
        let names: Vec<&str> =
            table["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["base_url", "page_size", "verbose", "start_date"], "the struct above has these fields");
        for case in table["cases"].as_array().unwrap() {
            let text = case["config"].to_string();
            match case.get("error_names") {
                Some(name) => {
                    let error = parse_config::<TableConfig>(&text).expect_err(&text);
                    let Error::Config(message) = &error else { panic!("{text}: {error:?}") };
                    assert!(message.contains(name.as_str().unwrap()), "{text}: {message}");
                }
                None => {
                    let parsed = parse_config::<TableConfig>(&text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
                    assert_eq!(serde_json::to_value(parsed).unwrap(), case["values"], "{text}");
                }
            }
        }
    }

    #[test]
    fn a_config_that_is_not_an_object_is_a_config_error() {
        for text in ["[]", "5", "{", ""] {
            assert!(matches!(parse_config::<TableConfig>(text), Err(Error::Config(_))), "{text}");
        }
    }
}
