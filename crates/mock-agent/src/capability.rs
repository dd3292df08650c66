//! `if_capability`: is a dotted path present in the client's capabilities?

use serde_json::Value;

/// True when `path` (e.g. `elicitation.form`) names a non-null value in `capabilities`.
///
/// ACP treats an omitted capability and a `null` one alike ("not supported"),
/// and `{}` as supported, so presence, not truthiness, is the test.
pub fn capability_present(capabilities: &Value, path: &str) -> bool {
    path.split('.')
        .try_fold(capabilities, |value, key| value.as_object()?.get(key))
        .is_some_and(|value| !value.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_empty_object_is_present_and_null_or_missing_is_not() {
        let caps =
            json!({"_meta": {"terminal_output": true}, "elicitation": {"form": {}, "url": null}});
        assert!(capability_present(&caps, "elicitation.form"));
        assert!(capability_present(&caps, "elicitation"));
        assert!(capability_present(&caps, "_meta.terminal_output"));
        assert!(!capability_present(&caps, "elicitation.url"));
        assert!(!capability_present(&caps, "elicitation.form.deeper"));
        assert!(!capability_present(&caps, "fs"));
        assert!(!capability_present(&Value::Null, "elicitation.form"));
    }

    #[test]
    fn false_is_present() {
        // Presence is the rule; a boolean capability set to false is still declared.
        assert!(capability_present(&json!({"terminal": false}), "terminal"));
    }
}
