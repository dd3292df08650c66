//! Every store method, written once for both engines: one file per domain.
//!
//! This folder is compiled once per engine: `dialect/sqlite` and `dialect/postgres` each
//! mount it (`#[path]`), and `engine` below is the dialect that mounted it. The SQL texts
//! here run unchanged on both (`$n` parameters, `RETURNING`, `ON CONFLICT`); the model
//! types bind and read themselves (`Timestamp`, the stored enums, `FromRow` records,
//! JSON through `sqlx::types::Json`). What an engine does its own way is an `engine::…`
//! item, and the dialect says why.

use sqlx::{Arguments, Database, Encode, Type};

use super::{self as engine};
use crate::store::StoreError;

mod clarifications;
mod flags;
mod health;
mod leases;
mod messages;
pub(super) mod notifications;
mod outbox;
mod questions;
pub(super) mod records;
mod sessions;
mod tasks;

/// The columns of a [`Message`](crate::model::Message).
pub(super) const MESSAGE: &str = "id, session_id, task_id, seq, type, author_type, content, requests_input, metadata, created_at, updated_at";

/// The columns of a [`SessionRecord`](crate::model::SessionRecord).
pub(super) const SESSION: &str = "id, task_id, agent, state, acp_session_id, client_capabilities, flags, agent_info, error, created_at, updated_at, last_event_seq, pending, view_seq";

/// The columns of a [`Clarification`](crate::model::Clarification).
pub(super) const CLARIFICATION: &str = "pending_id, source, task_id, session_id, message_id, tool_call_id, message, questions, status, outcome, settled_by, answer, answered_by, created_at, settled_at, expires_at, on_deadline";

/// The migrations the database records as applied.
pub(super) const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success";

/// Values bound to a statement's `$1, $2, …` in order, owned, so that a statement (or a
/// SQLite batch, which runs on a task of its own) can take them anywhere.
#[derive(Debug, Default, Clone)]
pub(super) struct Binds(<engine::Engine as Database>::Arguments<'static>);

impl Binds {
    /// Binds the next `$n` to `value`.
    pub(super) fn and<T>(mut self, value: T) -> Result<Self, StoreError>
    where
        T: Encode<'static, engine::Engine> + Type<engine::Engine> + 'static,
    {
        self.0
            .add(value)
            .map_err(|err| StoreError::Query(format!("cannot bind a value: {err}")))?;
        Ok(self)
    }

    /// The arguments, for `sqlx::query_with`.
    pub(super) fn into_arguments(self) -> <engine::Engine as Database>::Arguments<'static> {
        self.0
    }
}

/// A `u64` as the databases keep it (`BIGINT`).
fn bigint(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
