//! The guest runtime: the only part that touches wasmtime. [`engine`] loads components,
//! [`compile`] bounds compiling them, [`cache`] keeps the compiled code, [`sandbox`] is what a guest can see (its imports, memory limiter, logs; the records it forwards are kept in [`forwarded`]),
//! [`waits`] stops its CPU clock while it sleeps, [`limits`] what it may consume, [`manifest`] runs declarative manifests in the declarative engine, [`custom`] their custom
//! components (components.py) in the components runtime, and
//! [`connector`] makes instances and calls them, taking their room in the pooling allocator from
//! [`pool`].

pub mod cache;
pub mod compile;
pub mod connector;
pub mod custom;
pub mod engine;
pub mod forwarded;
pub mod limits;
pub mod manifest;
pub mod pool;
pub mod sandbox;
pub mod waits;
