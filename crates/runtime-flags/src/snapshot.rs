//! The per-session flag snapshot: resolved once at session start and sent to
//! agentctl in `agent.session.start` as `{"features.acpElicitation": true}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::registry::{ACP_ELICITATION, definitions};
use crate::resolve::ResolvedFlag;

/// Flag key → value, serialized as a plain JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FlagSnapshot(BTreeMap<String, bool>);

impl FlagSnapshot {
    /// Every registered flag at its registry default.
    pub fn defaults() -> Self {
        definitions()
            .iter()
            .map(|d| (d.key.to_owned(), d.default))
            .collect()
    }

    /// The values of resolved flags.
    pub fn from_resolved(flags: &[ResolvedFlag]) -> Self {
        flags.iter().map(|f| (f.key.clone(), f.value)).collect()
    }

    /// Whether `key` is on. A key the snapshot does not carry is off, so an older
    /// backend that never sent a flag leaves the capability disabled.
    pub fn is_enabled(&self, key: &str) -> bool {
        self.0.get(key).copied().unwrap_or(false)
    }

    /// Whether ACP form elicitation is on.
    pub fn acp_elicitation(&self) -> bool {
        self.is_enabled(ACP_ELICITATION)
    }

    /// Sets one flag's value (tests and tooling).
    pub fn set(&mut self, key: impl Into<String>, value: bool) {
        self.0.insert(key.into(), value);
    }

    /// The flags as a map, as the agent-stream wire carries them.
    pub fn as_map(&self) -> &BTreeMap<String, bool> {
        &self.0
    }

    /// Iterates `(key, value)` in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl From<BTreeMap<String, bool>> for FlagSnapshot {
    fn from(map: BTreeMap<String, bool>) -> Self {
        Self(map)
    }
}

impl From<FlagSnapshot> for BTreeMap<String, bool> {
    fn from(snapshot: FlagSnapshot) -> Self {
        snapshot.0
    }
}

impl FromIterator<(String, bool)> for FlagSnapshot {
    fn from_iter<I: IntoIterator<Item = (String, bool)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Profile, Profiles};
    use crate::resolve::resolve_all;

    #[test]
    fn serializes_as_a_plain_object() {
        let mut s = FlagSnapshot::default();
        s.set(ACP_ELICITATION, true);
        assert_eq!(
            serde_json::to_string(&s).expect("serializes"),
            r#"{"features.acpElicitation":true}"#
        );
        let back: FlagSnapshot =
            serde_json::from_str(r#"{"features.acpElicitation":false}"#).expect("parses");
        assert!(!back.acp_elicitation());
    }

    #[test]
    fn missing_keys_are_off() {
        let s = FlagSnapshot::default();
        assert!(!s.is_enabled(ACP_ELICITATION));
        assert!(!s.acp_elicitation());
    }

    #[test]
    fn converts_to_and_from_the_wire_map() {
        let map: BTreeMap<String, bool> = [(ACP_ELICITATION.to_owned(), true)].into();
        let s = FlagSnapshot::from(map.clone());
        assert!(s.acp_elicitation());
        assert_eq!(s.as_map(), &map);
        assert_eq!(BTreeMap::from(s), map);
    }

    #[test]
    fn from_resolved_carries_each_value() {
        let env: BTreeMap<String, String> = [(
            "KANDEV_FEATURES_ACP_ELICITATION".to_owned(),
            "true".to_owned(),
        )]
        .into();
        let flags = resolve_all(&env, &BTreeMap::new(), &Profiles::empty(), Profile::Prod)
            .expect("resolves");
        let s = FlagSnapshot::from_resolved(&flags);
        assert!(s.acp_elicitation());
        assert_eq!(s.iter().count(), definitions().len());
    }

    #[test]
    fn defaults_carry_every_flag_off() {
        let s = FlagSnapshot::defaults();
        assert_eq!(s.iter().count(), definitions().len());
        assert!(s.iter().all(|(_, v)| !v));
        assert_eq!(
            serde_json::to_value(&s).expect("ok"),
            serde_json::json!({ACP_ELICITATION: false})
        );
    }
}
