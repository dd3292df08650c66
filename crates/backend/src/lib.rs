//! # kandev-backend
//!
//! The `kandev` process: the operator HTTP/WS API, the SQLite store, sessions and
//! their executors, clarifications, runtime flags and notifications.
//!
//! Layout (after launchbadge's realworld axum example): [`config`], [`error`],
//! [`state`], [`db`], the [`http`] routes per domain, and the domain modules
//! [`tasks`], [`sessions`], [`messages`], [`clarifications`], [`notifications`],
//! [`flags`] and the operator [`events`] hub; [`auth`] says who is asking (the HTTP
//! guard in [`http`] enforces it). [`app`] wires them and serves.

pub mod agent_link;
pub mod app;
pub mod auth;
pub mod clarifications;
pub mod config;
pub mod db;
pub mod error;
pub mod events;
pub mod flags;
pub mod http;
pub mod messages;
pub mod notifications;
pub mod sessions;
pub mod state;
pub mod tasks;

#[cfg(test)]
pub(crate) mod testing;
