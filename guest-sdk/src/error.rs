//! Errors that say whose fault they are.

use crate::__private::bindings::sluice::connector::types;
use std::fmt;

/// A connector error. The kind decides what the operator is told: fix the config, try again
/// later, or report a bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The configuration is wrong (bad credentials, unknown account, invalid value).
    Config(String),
    /// A passing fault: the API is overloaded or unreachable; a later run may succeed.
    Transient(String),
    /// Anything else: an answer the connector cannot understand, or a bug.
    System(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn config(message: impl fmt::Display) -> Self {
        Error::Config(message.to_string())
    }
    pub fn transient(message: impl fmt::Display) -> Self {
        Error::Transient(message.to_string())
    }
    pub fn system(message: impl fmt::Display) -> Self {
        Error::System(message.to_string())
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        match self {
            Error::Config(m) | Error::Transient(m) | Error::System(m) => m,
        }
    }

    fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Error::Config(m) => Error::Config(f(m)),
            Error::Transient(m) => Error::Transient(f(m)),
            Error::System(m) => Error::System(f(m)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Error::Config(_) => "config error",
            Error::Transient(_) => "transient error",
            Error::System(_) => "error",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for Error {}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::System(format!("invalid JSON: {e}"))
    }
}

impl From<Error> for types::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Config(m) => types::Error::Config(m),
            Error::Transient(m) => types::Error::Transient(m),
            Error::System(m) => types::Error::System(m),
        }
    }
}

/// Adds context to an error while keeping its kind: `api_call().context("listing accounts")?`.
pub trait ResultExt<T> {
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.into().map_message(|m| format!("{what}: {m}")))
    }
}
