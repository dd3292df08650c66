//! The ACP `clientCapabilities` agentctl advertises in `initialize` (docs/architecture.md §4.1).
//!
//! One function, [`client_capabilities`], builds the value from the agent id and the
//! session's flag snapshot. The flag-off output is pinned byte for byte by the fixtures in
//! `tests/fixtures/capabilities/` (AC-02); the flag-on output is that plus
//! `"elicitation": {"form": {}}` and nothing else (AC-01, AC-02a). `url` is never advertised.
//!
//! The value is sent as raw JSON: the SDK's typed `ClientCapabilities` would add
//! `fs`, `terminal` and `auth` defaults on serialization, which would break the pin.

use serde_json::{Map, Value, json};

use kandev_flags::FlagSnapshot;

/// The agent id whose `_meta` also carries `parameterizedModelPicker`.
pub const CURSOR_AGENT_ID: &str = "cursor-acp";

/// Builds the `clientCapabilities` for `agent_id` under `flags`.
pub fn client_capabilities(agent_id: &str, flags: &FlagSnapshot) -> Value {
    // Keys in byte order, as the Go original's map marshalling produced them.
    let mut meta = Map::new();
    if agent_id == CURSOR_AGENT_ID {
        meta.insert("parameterizedModelPicker".to_owned(), Value::Bool(true));
    }
    meta.insert("terminal_output".to_owned(), Value::Bool(true));

    let mut capabilities = Map::new();
    capabilities.insert("_meta".to_owned(), Value::Object(meta));
    if flags.acp_elicitation() {
        capabilities.insert("elicitation".to_owned(), json!({"form": {}}));
    }
    Value::Object(capabilities)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_flags::registry::ACP_ELICITATION;

    fn flags(on: bool) -> FlagSnapshot {
        let mut snapshot = FlagSnapshot::default();
        snapshot.set(ACP_ELICITATION, on);
        snapshot
    }

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/capabilities/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path)
            .expect("fixture exists")
            .trim_end()
            .to_owned()
    }

    fn compact(value: &Value) -> String {
        serde_json::to_string(value).expect("serializes")
    }

    #[test]
    fn ac02_flag_off_matches_default_fixture_byte_for_byte() {
        for agent in ["claude-acp", "mock", "codex-acp"] {
            let caps = client_capabilities(agent, &flags(false));
            assert_eq!(compact(&caps), fixture("default.json"), "agent {agent}");
            assert!(caps.get("elicitation").is_none());
        }
        // An empty snapshot is flag off as well.
        assert_eq!(
            compact(&client_capabilities("claude-acp", &FlagSnapshot::default())),
            fixture("default.json")
        );
    }

    #[test]
    fn ac02_flag_off_cursor_matches_its_fixture_byte_for_byte() {
        let caps = client_capabilities(CURSOR_AGENT_ID, &flags(false));
        assert_eq!(compact(&caps), fixture("cursor-acp.json"));
        assert!(caps.get("elicitation").is_none());
    }

    #[test]
    fn ac02a_flag_on_is_fixture_plus_form_only() {
        for (agent, file) in [
            (CURSOR_AGENT_ID, "cursor-acp.json"),
            ("claude-acp", "default.json"),
        ] {
            let mut expected: Value =
                serde_json::from_str(&fixture(file)).expect("fixture is JSON");
            expected
                .as_object_mut()
                .expect("object")
                .insert("elicitation".to_owned(), json!({"form": {}}));
            let caps = client_capabilities(agent, &flags(true));
            assert_eq!(caps, expected, "agent {agent}");
            assert!(
                caps["elicitation"].get("url").is_none(),
                "url is never advertised"
            );
        }
    }

    #[test]
    fn ac01_flag_on_carries_form_as_an_object() {
        let caps = client_capabilities("claude-acp", &flags(true));
        assert_eq!(caps["elicitation"]["form"], json!({}));
        assert_eq!(
            compact(&caps),
            r#"{"_meta":{"terminal_output":true},"elicitation":{"form":{}}}"#
        );
    }

    #[test]
    fn typed_sdk_capabilities_would_not_round_trip() {
        // Why `initialize` is sent with raw params: the SDK's typed value adds defaults.
        use agent_client_protocol::v1::schema::ClientCapabilities;
        let caps = client_capabilities("claude-acp", &flags(true));
        let typed: ClientCapabilities = serde_json::from_value(caps.clone()).expect("parses");
        let reserialized = serde_json::to_value(typed).expect("serializes");
        assert_ne!(
            reserialized, caps,
            "the typed form changed; raw params may be unnecessary now"
        );
    }
}
