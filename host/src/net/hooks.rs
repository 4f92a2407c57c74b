//! The seam around every HTTP attempt, as wasi-http's `WasiHttpHooks` wraps `send_request`: the
//! egress layer owns this trait and calls it; recording and offline replay (in `storage`) and
//! an embedder's own policy implement it, without the HTTP layer knowing about storage.

use crate::bindings::{HttpError, Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

/// One attempt of one guest request, after the egress policy allowed it.
pub struct Attempt<'a> {
    /// What the request is for, as JSON: `{"stream": ..., "partition": key}` and the like.
    pub context: &'a str,
    /// 1 for the first attempt; retries count up.
    pub number: u32,
    /// The method, upper case.
    pub method: &'a str,
    pub url: &'a url::Url,
    pub request: &'a Request,
}

/// How an attempt ended.
pub enum Outcome<'a> {
    Response(&'a Response),
    /// `connect` is true when nothing was sent (safe to retry for any method).
    Error {
        error: &'a HttpError,
        connect: bool,
    },
}

/// An answer a hook gives instead of the network.
pub enum Answer {
    Response(Response),
    Error { error: HttpError, connect: bool },
}

/// What an attempt's observers are told besides its outcome.
pub struct Timing {
    pub started: SystemTime,
    pub elapsed: Duration,
}

pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Called by the egress layer around every attempt. Every method has a default that changes
/// nothing, so a hook implements only what it needs.
pub trait HttpHooks: Send + Sync {
    /// Answers the attempt instead of the network; `None` lets it go on (to the next hook, then
    /// the network).
    fn answer(&self, _attempt: &Attempt<'_>) -> Option<Answer> {
        None
    }

    /// True when this hook answers every attempt, so nothing reaches the network and retries
    /// need not wait (an offline replay).
    fn offline(&self) -> bool {
        false
    }

    /// True when this hook must see the whole body of every answer, so a body the guest would
    /// stream (`open`) is read whole first, under the response cap (a recording, which stores
    /// it). Hooks that only observe (count, time, log) keep the default: streamed bodies stay
    /// streamed, and [`HttpHooks::observe`] sees their head with an empty body.
    fn needs_bodies(&self) -> bool {
        false
    }

    /// Runs before an attempt goes to the network (one no hook answered), and may wait: a
    /// budget shared with other runs paces it here (a tenant's API budget). It slows the
    /// request that is being made, never another one.
    fn before_send<'a>(&'a self, _attempt: &'a Attempt<'a>) -> BoxFuture<'a> {
        Box::pin(async {})
    }

    /// Sees every attempt's outcome, in the order attempts finish. It may wait (for a bounded
    /// queue), which slows the request that is being made, never another one. The body of an
    /// answer streamed to the guest is empty here, unless a hook [`HttpHooks::needs_bodies`].
    fn observe<'a>(&'a self, _attempt: &'a Attempt<'a>, _outcome: Outcome<'a>, _timing: Timing) -> BoxFuture<'a> {
        Box::pin(async {})
    }
}
