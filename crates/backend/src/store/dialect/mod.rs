//! What differs between the engines, one module per engine; everything else is `sql/`.
//!
//! Each dialect opens its database, says how it reads and writes (pools, transactions),
//! and names the same few items, each with why it differs: the session fence, JSON
//! lists, the JSON merge, the clock of leases, the one-hop open and settlement of a
//! clarification, the stream position written with an append, the change bus and the
//! readiness probe. It then compiles `sql/`
//! (`#[path]`), whose code reaches these items as `engine::…`: every store method is one
//! text, built once per engine, with no runtime dispatch on the answer path.

pub mod postgres;
pub mod sqlite;
