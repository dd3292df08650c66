//! # kandev-log
//!
//! How `kandev` and `agentctl` write their logs to stderr, in one of two
//! [`LogFormat`]s: `text` (tracing's usual lines, coloured on a terminal) or `json`:
//! one JSON object per line, with `timestamp`, `level`, `target`, `message`, the
//! event's own fields, and the fields of every span the event happened in flattened
//! to the top level, so `session_id` and `pending_id` can be filtered on directly
//! (`jq 'select(.session_id == "…")'`). The innermost value wins when spans repeat a
//! field, the event's own value over any span's; `spans` names the enclosing spans,
//! outermost first (`session:agent_link`).
//!
//! [`hops`]: the per-hop timing lines `just bench` reads, made from the domain's hop
//! spans by a layer [`init`] installs (inert unless `kandev::timing=debug` is on).
//!
//! [`LogCapture`]: every line a test's code logs, for asserting what is never logged.

mod ansi;
mod capture;
pub mod hops;
mod json;

pub use ansi::strip_ansi;
pub use capture::LogCapture;
pub use json::{FlatJson, set_process_field};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::JsonFields;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (the default); coloured on a terminal unless `NO_COLOR` is set.
    #[default]
    Text,
    /// One JSON object per line (see the crate docs).
    Json,
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Text => "text",
            Self::Json => "json",
        })
    }
}

/// Installs the process's subscriber: `RUST_LOG` when set and valid, else
/// `default_filter` (`info`, `info,sqlx=warn`, …); lines go to `writer`. `ansi` colours
/// text lines (pass whether stderr is a terminal); JSON never has colour.
pub fn init<W>(format: LogFormat, default_filter: &str, writer: W, ansi: bool)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // The hop layer sees only the spans the filter lets through: none unless asked for.
    let base = tracing_subscriber::registry()
        .with(filter)
        .with(hops::HopLayer);
    let lines = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Text => base.with(lines.with_ansi(ansi)).init(),
        LogFormat::Json => base
            .with(
                lines
                    .with_ansi(false)
                    .fmt_fields(JsonFields::new())
                    .event_format(FlatJson),
            )
            .init(),
    }
}

/// Whether text lines should be coloured: stderr is a terminal and `NO_COLOR` is unset.
pub fn stderr_wants_colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none()
}
