//! The per-session runtime-flag snapshot as agentctl reads it.
//!
//! The backend resolves flags at session start and sends them in `agent.session.start`
//! (F5); agentctl reads no flag from its environment. This module is the one place that
//! interprets the snapshot, so the switch to `kandev_flags::FlagSnapshot` stays local.

use std::collections::BTreeMap;

/// Key of the form-elicitation feature flag.
pub const ACP_ELICITATION: &str = "features.acpElicitation";

/// The flag snapshot of one session, as carried on the wire.
pub type SessionFlags = BTreeMap<String, bool>;

/// Whether `features.acpElicitation` is on in `flags` (absent means off).
pub fn elicitation_enabled(flags: &SessionFlags) -> bool {
    flags.get(ACP_ELICITATION).copied().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_flag_is_off() {
        assert!(!elicitation_enabled(&SessionFlags::new()));
    }

    #[test]
    fn explicit_values_are_read() {
        let on = SessionFlags::from([(ACP_ELICITATION.to_owned(), true)]);
        let off = SessionFlags::from([(ACP_ELICITATION.to_owned(), false)]);
        assert!(elicitation_enabled(&on));
        assert!(!elicitation_enabled(&off));
    }

    #[test]
    fn other_flags_do_not_enable_it() {
        let other = SessionFlags::from([("features.somethingElse".to_owned(), true)]);
        assert!(!elicitation_enabled(&other));
    }
}
