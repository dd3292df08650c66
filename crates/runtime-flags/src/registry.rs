//! The flag registry: every runtime flag Kandev knows, with the metadata the
//! Settings page shows operators (docs/architecture.md §4.5).

use serde::{Deserialize, Serialize};

/// Key of the ACP form-elicitation flag.
pub const ACP_ELICITATION: &str = "features.acpElicitation";

/// What a flag is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FlagKind {
    /// Switches a user-visible capability on or off.
    Feature,
}

/// How settled a flagged capability is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stability {
    /// May change shape or disappear; off by default.
    Experimental,
    /// Feature-complete, still gathering feedback.
    Beta,
    /// Supported; the flag only remains as an escape hatch.
    Stable,
}

/// How much can go wrong when an operator turns the flag on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Cosmetic or easily undone.
    Low,
    /// Changes agent behaviour; undone by turning it off for new sessions.
    Medium,
    /// Can lose data or block work.
    High,
}

/// One registered flag. All flags are boolean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlagDefinition {
    /// Stable dotted key, used by the API, the override store and the snapshot.
    pub key: &'static str,
    /// Environment variable that sets the flag and locks the Settings toggle.
    pub env_var: &'static str,
    /// What the flag is for.
    pub kind: FlagKind,
    /// Short name shown on the Settings page.
    pub label: &'static str,
    /// What turning it on does, for operators.
    pub description: &'static str,
    /// How settled the capability is.
    pub stability: Stability,
    /// How much can go wrong when it is on.
    pub risk_level: RiskLevel,
    /// Whether a change needs a backend restart to take effect.
    pub restart_required: bool,
    /// Whether the Settings page may override it at runtime.
    pub mutable: bool,
    /// Value when no env var, override or profile entry sets it.
    pub default: bool,
}

/// Every flag Kandev knows, in display order.
pub const REGISTRY: &[FlagDefinition] = &[FlagDefinition {
    key: ACP_ELICITATION,
    env_var: "KANDEV_FEATURES_ACP_ELICITATION",
    kind: FlagKind::Feature,
    label: "ACP form elicitation",
    description: "Lets ACP agents ask the operator structured questions (forms with choices \
                  or free text) in the middle of a turn; the agent waits for the answer from \
                  the board. Applies to sessions started after the change; running sessions \
                  keep the value they started with.",
    stability: Stability::Experimental,
    risk_level: RiskLevel::Medium,
    // Resolved at every session start and sent to agentctl, so no restart is needed: a
    // deliberate change from the spec's table, recorded in
    // docs/decisions/0003-flag-snapshot-at-session-start.md.
    restart_required: false,
    mutable: true,
    default: false,
}];

/// Every registered flag, in display order.
pub fn definitions() -> &'static [FlagDefinition] {
    REGISTRY
}

/// The flag registered under `key`, if any.
pub fn definition(key: &str) -> Option<&'static FlagDefinition> {
    REGISTRY.iter().find(|d| d.key == key)
}

/// The flag set by environment variable `env_var`, if any.
pub fn definition_by_env_var(env_var: &str) -> Option<&'static FlagDefinition> {
    REGISTRY.iter().find(|d| d.env_var == env_var)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn acp_elicitation_is_registered_as_architecture_4_5_describes() {
        let d = definition(ACP_ELICITATION).expect("registered");
        assert_eq!(d.env_var, "KANDEV_FEATURES_ACP_ELICITATION");
        assert_eq!(d.kind, FlagKind::Feature);
        assert_eq!(d.stability, Stability::Experimental);
        assert_eq!(d.risk_level, RiskLevel::Medium);
        assert!(
            !d.restart_required,
            "resolved per session start, no restart"
        );
        assert!(d.mutable);
        assert!(!d.default);
        assert_eq!(d.label, "ACP form elicitation");
        assert!(d.description.contains("sessions started after"));
    }

    #[test]
    fn keys_and_env_vars_are_unique_and_well_formed() {
        let keys: BTreeSet<_> = REGISTRY.iter().map(|d| d.key).collect();
        let vars: BTreeSet<_> = REGISTRY.iter().map(|d| d.env_var).collect();
        assert_eq!(keys.len(), REGISTRY.len());
        assert_eq!(vars.len(), REGISTRY.len());
        for d in REGISTRY {
            assert!(d.env_var.starts_with("KANDEV_FEATURES_"), "{}", d.env_var);
            assert!(d.key.starts_with("features."), "{}", d.key);
            assert!(!d.label.is_empty() && !d.description.is_empty());
        }
    }

    #[test]
    fn lookups_by_key_and_env_var_agree() {
        for d in REGISTRY {
            assert_eq!(definition(d.key), Some(d));
            assert_eq!(definition_by_env_var(d.env_var), Some(d));
        }
        assert_eq!(definition("features.nope"), None);
        assert_eq!(definition_by_env_var("KANDEV_FEATURES_NOPE"), None);
    }

    #[test]
    fn enums_serialize_lowercase() {
        let d = serde_json::to_value(definition(ACP_ELICITATION).expect("registered"))
            .expect("serializes");
        assert_eq!(d["kind"], "feature");
        assert_eq!(d["stability"], "experimental");
        assert_eq!(d["risk_level"], "medium");
        assert_eq!(d["restart_required"], false);
    }
}
