//! [`FlatJson`]: the `json` line format.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats an event as one JSON object on one line, the enclosing spans' fields at the
/// top level. Spans must be recorded with
/// [`JsonFields`](tracing_subscriber::fmt::format::JsonFields), so their stored fields
/// are JSON objects ([`crate::init`] sets both).
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatJson;

/// Fields every line of this process carries (set once, when known: kandev's
/// `replica_id`); span and event fields of the same name take precedence.
static PROCESS_FIELDS: std::sync::RwLock<Vec<(String, Value)>> = std::sync::RwLock::new(Vec::new());

/// Adds `key = value` to every JSON line written from now on (replacing an earlier value).
pub fn set_process_field(key: &str, value: &str) {
    let mut fields = PROCESS_FIELDS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    fields.retain(|(k, _)| k != key);
    fields.push((key.to_owned(), Value::String(value.to_owned())));
}

/// Keys the format writes itself; a field of the same name is prefixed with `field.`.
const RESERVED: &[&str] = &["timestamp", "level", "target", "spans"];

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Events bridged from the `log` crate carry their real target and level here.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert("target".into(), Value::String(meta.target().to_owned()));
        let mut fields: Map<String, Value> = PROCESS_FIELDS
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        if let Some(scope) = ctx.event_scope() {
            let mut names = Vec::new();
            for span in scope.from_root() {
                names.push(span.name());
                let extensions = span.extensions();
                let Some(stored) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(stored.as_str()) {
                    // Outermost first: an inner span's value replaces an outer one's.
                    fields.extend(map);
                }
            }
            if !names.is_empty() {
                line.insert("spans".into(), Value::String(names.join(":")));
            }
        }
        event.record(&mut Fields(&mut fields));
        for (key, value) in fields {
            let key = if RESERVED.contains(&key.as_str()) {
                format!("field.{key}")
            } else {
                key
            };
            line.insert(key, value);
        }
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// Records an event's fields as JSON values (log-bridge bookkeeping fields skipped).
struct Fields<'a>(&'a mut Map<String, Value>);

impl Fields<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name().starts_with("log.") {
            return;
        }
        self.0.insert(field.name().to_owned(), value);
    }
}

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, serde_json::json!(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}

#[cfg(test)]
mod tests {

    use tracing_subscriber::fmt::format::JsonFields;

    use super::*;
    use crate::capture::Buffer;

    fn lines_of(emit: impl FnOnce()) -> Vec<Value> {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let text = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf-8");
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .collect()
    }

    #[test]
    fn span_fields_are_flattened_inner_first_and_one_event_is_one_line() {
        let lines = lines_of(|| {
            let session = tracing::info_span!("session", session_id = "s-1", agent = "mock");
            let _s = session.enter();
            let request = tracing::info_span!(
                "agent_request",
                session_id = "s-1",
                pending_id = tracing::field::Empty
            );
            request.record("pending_id", "p-9");
            let _r = request.enter();
            tracing::info!(questions = 2u64, ok = true, "line one\nline two");
            tracing::warn!(agent = "override", level = "mine", "event fields win");
        });
        assert_eq!(lines.len(), 2, "{lines:?}");
        let first = &lines[0];
        assert_eq!(first["session_id"], "s-1");
        assert_eq!(first["pending_id"], "p-9", "recorded after creation");
        assert_eq!(first["agent"], "mock");
        assert_eq!(first["questions"], 2);
        assert_eq!(first["ok"], true);
        assert_eq!(first["message"], "line one\nline two");
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["spans"], "session:agent_request");
        assert!(first["timestamp"].as_str().is_some_and(|t| t.contains('T')));
        assert!(
            first["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("kandev_log"))
        );
        let second = &lines[1];
        assert_eq!(second["agent"], "override");
        assert_eq!(second["level"], "WARN", "the format's own keys stay");
        assert_eq!(second["field.level"], "mine");
    }

    #[test]
    fn an_event_outside_any_span_has_no_spans_key() {
        let lines = lines_of(|| tracing::error!(code = -3i64, "alone"));
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["message"], "alone");
        assert_eq!(lines[0]["code"], -3);
        assert!(lines[0].get("spans").is_none());
    }
}
