//! A record's answer deadline: when agentctl gives the question up unanswered.

use crate::model::Timestamp;

/// The deadline agentctl sent (`expires_at`, RFC 3339), when it sent a readable one. An
/// unreadable one is dropped, not fatal: the question still reaches the operator, only
/// without a countdown.
pub fn parse_wire(text: Option<&str>) -> Option<Timestamp> {
    let text = text?;
    match text.parse() {
        Ok(at) => Some(at),
        Err(err) => {
            tracing::warn!(error = %err, "ignoring an unreadable expires_at");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_reads_back_or_is_absent() {
        let at = parse_wire(Some("2030-01-02T03:04:05.123456Z")).expect("reads");
        assert_eq!(at.to_rfc3339(), "2030-01-02T03:04:05.123456Z");
        assert_eq!(parse_wire(Some("soon")), None);
        assert_eq!(parse_wire(None), None);
    }
}
