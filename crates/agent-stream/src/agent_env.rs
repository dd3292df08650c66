//! The environment an agent process starts with (docs/architecture.md §10): chosen, never
//! inherited wholesale.
//!
//! An agent runs model-driven code, so it gets only [`ALLOWLIST`] (plus `LC_*`) from
//! agentctl's environment, the names its spec lists in `inherit_env`, and its spec's own
//! `env`. A [withheld](is_withheld) name — the agent-stream token, a database URL, any
//! `KANDEV_*` setting — never reaches it from any of the three. The backend refuses such
//! names in its configuration; agentctl drops them again here, so a remote agentctl
//! applies the same rule whatever backend talks to it.

use std::collections::BTreeMap;

use crate::request::AgentSpec;

/// Variables an agent always gets from agentctl's environment when they are set
/// (and every `LC_*`).
pub const ALLOWLIST: &[&str] = &["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR", "SHELL"];

/// The variable holding agentctl's agent-stream bearer token.
pub const AGENTCTL_TOKEN: &str = "AGENTCTL_TOKEN";

/// Whether `name` is on the allowlist (`ALLOWLIST` or an `LC_*` locale category).
pub fn is_allowlisted(name: &str) -> bool {
    ALLOWLIST.contains(&name) || name.starts_with("LC_")
}

/// Whether `name` must never reach an agent: the agent-stream token, a database URL,
/// or a `KANDEV_*` variable (settings of kandev and agentctl themselves).
pub fn is_withheld(name: &str) -> bool {
    name == AGENTCTL_TOKEN || name == "DATABASE_URL" || name.starts_with("KANDEV_")
}

/// Whether `name` is usable as an environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The agent's whole environment: the allowlisted and `inherit_env` variables of `own`
/// (agentctl's environment), then the spec's `env` on top; withheld names dropped from
/// all three. The second value lists the names that were dropped from the spec (for a
/// warning; never their values).
pub fn agent_environment(
    own: impl IntoIterator<Item = (String, String)>,
    spec: &AgentSpec,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut env: BTreeMap<String, String> = own
        .into_iter()
        .filter(|(name, _)| {
            !is_withheld(name) && (is_allowlisted(name) || spec.inherit_env.contains(name))
        })
        .collect();
    let mut dropped: Vec<String> = spec
        .inherit_env
        .iter()
        .filter(|name| is_withheld(name))
        .cloned()
        .collect();
    for (name, value) in &spec.env {
        if is_withheld(name) {
            dropped.push(name.clone());
        } else {
            env.insert(name.clone(), value.clone());
        }
    }
    (env, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::PermissionPolicy;

    fn spec(inherit: &[&str], env: &[(&str, &str)]) -> AgentSpec {
        AgentSpec {
            id: "a".into(),
            command: vec!["agent".into()],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: None,
            permission_policy: PermissionPolicy::default(),
            inherit_env: inherit.iter().map(|s| (*s).to_owned()).collect(),
            mcp_servers: Default::default(),
            on_deadline: Default::default(),
        }
    }

    fn own() -> Vec<(String, String)> {
        [
            ("PATH", "/bin"),
            ("HOME", "/home/k"),
            ("LC_ALL", "C.UTF-8"),
            ("AWS_SECRET_ACCESS_KEY", "cloud"),
            ("ANTHROPIC_API_KEY", "model"),
            ("AGENTCTL_TOKEN", "stream"),
            ("KANDEV_DATABASE_URL", "sqlite://secret"),
            ("DATABASE_URL", "postgres://u:pw@db"),
            ("KANDEV_ACP_IDLE_TIMEOUT", "1h"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
    }

    #[test]
    fn only_the_allowlist_passes_by_default() {
        let (env, dropped) = agent_environment(own(), &spec(&[], &[]));
        assert_eq!(
            env.keys().map(String::as_str).collect::<Vec<_>>(),
            ["HOME", "LC_ALL", "PATH"]
        );
        assert!(dropped.is_empty());
    }

    #[test]
    fn inherit_env_and_env_add_to_it_but_never_a_withheld_name() {
        let spec = spec(
            &[
                "ANTHROPIC_API_KEY",
                "AGENTCTL_TOKEN",
                "KANDEV_DATABASE_URL",
                "UNSET_ONE",
            ],
            &[
                ("MOCK_AGENT_LOG", "/tmp/log"),
                ("PATH", "/opt/bin"),
                ("KANDEV_X", "1"),
            ],
        );
        let (env, dropped) = agent_environment(own(), &spec);
        assert_eq!(env["ANTHROPIC_API_KEY"], "model");
        assert_eq!(env["MOCK_AGENT_LOG"], "/tmp/log");
        assert_eq!(env["PATH"], "/opt/bin", "the spec's own env wins");
        for withheld in [
            "AGENTCTL_TOKEN",
            "KANDEV_DATABASE_URL",
            "DATABASE_URL",
            "KANDEV_X",
            "AWS_SECRET_ACCESS_KEY",
            "KANDEV_ACP_IDLE_TIMEOUT",
        ] {
            assert!(!env.contains_key(withheld), "{withheld} leaked");
        }
        assert!(!env.contains_key("UNSET_ONE"), "an unset name stays unset");
        assert_eq!(
            dropped,
            ["AGENTCTL_TOKEN", "KANDEV_DATABASE_URL", "KANDEV_X"]
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(is_valid_name("ANTHROPIC_API_KEY"));
        assert!(is_valid_name("_x1"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("1X"));
        assert!(!is_valid_name("A-B"));
        assert!(!is_valid_name("A=B"));
    }
}
