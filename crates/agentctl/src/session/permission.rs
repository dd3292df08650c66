//! `session/request_permission`: answered by the agent's configured policy, matched by
//! option kind, never by position.

use kandev_agent_stream::request::PermissionPolicy;
use serde_json::{Value, json};

/// The `session/request_permission` result for `policy`, and the option chosen.
pub fn permission_outcome(params: &Value, policy: PermissionPolicy) -> (Value, Option<String>) {
    let preferred: &[&str] = match policy {
        PermissionPolicy::AllowOnce => &["allow_once", "allow_always"],
        PermissionPolicy::AllowAlways => &["allow_always", "allow_once"],
        PermissionPolicy::RejectOnce => &["reject_once", "reject_always"],
        PermissionPolicy::Cancel => &[],
    };
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let chosen = preferred.iter().find_map(|kind| {
        options
            .iter()
            .find(|option| option.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|option| option.get("optionId").and_then(Value::as_str))
    });
    match chosen {
        Some(id) => (
            json!({"outcome": {"outcome": "selected", "optionId": id}}),
            Some(id.to_owned()),
        ),
        None => (json!({"outcome": {"outcome": "cancelled"}}), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Value {
        json!({"sessionId": "s", "toolCall": {"toolCallId": "t1"}, "options": [
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "once", "name": "Once", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ]})
    }

    #[test]
    fn permission_policy_picks_by_kind_never_by_position() {
        let (outcome, id) = permission_outcome(&params(), PermissionPolicy::AllowOnce);
        assert_eq!(id.as_deref(), Some("once"));
        assert_eq!(
            outcome,
            json!({"outcome": {"outcome": "selected", "optionId": "once"}})
        );
        assert_eq!(
            permission_outcome(&params(), PermissionPolicy::AllowAlways)
                .1
                .as_deref(),
            Some("always")
        );
        assert_eq!(
            permission_outcome(&params(), PermissionPolicy::RejectOnce)
                .1
                .as_deref(),
            Some("no")
        );
    }

    #[test]
    fn permission_without_a_matching_option_is_cancelled() {
        let (outcome, id) = permission_outcome(&params(), PermissionPolicy::Cancel);
        assert_eq!(
            (outcome, id),
            (json!({"outcome": {"outcome": "cancelled"}}), None)
        );
        let only_reject = json!({"options": [{"optionId": "no", "kind": "reject_once"}]});
        assert_eq!(
            permission_outcome(&only_reject, PermissionPolicy::AllowOnce).1,
            None
        );
        assert_eq!(
            permission_outcome(&json!("garbage"), PermissionPolicy::AllowOnce).1,
            None
        );
    }

    #[test]
    fn allow_once_falls_back_to_allow_always() {
        let only_always = json!({"options": [{"optionId": "a", "kind": "allow_always"}]});
        assert_eq!(
            permission_outcome(&only_always, PermissionPolicy::AllowOnce)
                .1
                .as_deref(),
            Some("a")
        );
    }
}
