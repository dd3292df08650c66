//! The wire pinned against literal JSON: each frame decodes to the expected value and
//! encodes back to the same JSON, so a renamed field cannot drift silently.

use kandev_agent_stream::request::{ElicitationsRespond, PermissionPolicy, SessionStart};
use kandev_agent_stream::response::{SessionStarted, Success};
use kandev_agent_stream::{
    AgentEvent, Envelope, ErrorCode, ErrorPayload, FrameType, SettleOutcome,
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(literal: Value) -> T {
    let decoded: T = serde_json::from_value(literal.clone()).expect("decodes");
    let encoded = serde_json::to_value(&decoded).expect("encodes");
    assert_eq!(encoded, literal, "re-encoding changed the wire");
    decoded
}

#[test]
fn envelope_request_frame() {
    let frame: Envelope = round_trip(json!({
        "id": "7", "type": "request", "action": "agent.prompt", "payload": {"text": "hi"}
    }));
    assert_eq!(frame.frame_type, FrameType::Request);
}

#[test]
fn error_frame_uses_screaming_codes() {
    let request = Envelope::request("9", "agent.elicitations.respond", &json!({}));
    let error = Envelope::error_to(&request, ErrorCode::NotFound, "no pending abc");
    assert_eq!(
        serde_json::to_value(&error).expect("encodes"),
        json!({"id": "9", "type": "error", "action": "agent.elicitations.respond",
               "payload": {"code": "NOT_FOUND", "message": "no pending abc"}})
    );
    for (code, text) in [
        (ErrorCode::BadRequest, "BAD_REQUEST"),
        (ErrorCode::InvalidAnswer, "INVALID_ANSWER"),
        (ErrorCode::UnknownAction, "UNKNOWN_ACTION"),
        (ErrorCode::Internal, "INTERNAL"),
    ] {
        let _: ErrorPayload = round_trip(json!({"code": text, "message": "m"}));
        assert_eq!(serde_json::to_value(code).expect("encodes"), json!(text));
    }
}

#[test]
fn session_start_payload() {
    let start: SessionStart = round_trip(json!({
        "session_id": "s-1",
        "agent": {"id": "mock", "command": ["mock-agent", "--scenario", "demo"],
                  "env": {"A": "1"}, "cwd": "/tmp", "permission_policy": "allow_once"},
        "flags": {"features.acpElicitation": true}
    }));
    assert_eq!(start.flags.get("features.acpElicitation"), Some(&true));
    assert_eq!(start.agent.permission_policy, PermissionPolicy::AllowOnce);
}

#[test]
fn session_start_defaults_optional_fields() {
    let start: SessionStart = serde_json::from_value(json!({
        "session_id": "s-1", "agent": {"id": "mock", "command": ["mock-agent"]}
    }))
    .expect("decodes");
    assert!(start.flags.is_empty());
    assert_eq!(start.agent.cwd, None);
}

#[test]
fn session_started_payload() {
    let _: SessionStarted = round_trip(json!({
        "acp_session_id": "acp-1",
        "client_capabilities": {"_meta": {"terminal_output": true}, "elicitation": {"form": {}}}
    }));
}

#[test]
fn respond_payload_matches_architecture() {
    let respond: ElicitationsRespond = round_trip(json!({
        "pending_id": "p-1",
        "answers": [{"question_id": "question_0", "selected_options": ["Postgres"], "custom_text": ""}],
        "rejected": false,
        "reject_reason": ""
    }));
    assert_eq!(respond.answer.answers.len(), 1);
    let _: Success = round_trip(json!({"success": true}));
}

#[test]
fn events_are_tagged_by_event() {
    let requested: AgentEvent = round_trip(json!({
        "event": "elicitation_requested",
        "pending_id": "p-1", "acp_session_id": "acp-1", "tool_call_id": "tool-42",
        "message": "Pick a colour",
        "questions": [{"id": "question_0", "kind": "single_select", "title": "Colour",
                       "prompt": "Pick a colour",
                       "options": [{"id": "Red", "label": "Red", "description": null}],
                       "custom_answer": {"key": "question_0_custom", "title": "Other", "description": null},
                       "required": false, "default": null, "constraints": {}}]
    }));
    assert!(matches!(requested, AgentEvent::ElicitationRequested(_)));

    let settled: AgentEvent = round_trip(json!({
        "event": "elicitation_settled", "pending_id": "p-1", "outcome": "timed_out",
        "response": {"action": "decline"}
    }));
    assert!(matches!(
        settled,
        AgentEvent::ElicitationSettled {
            outcome: SettleOutcome::TimedOut,
            ..
        }
    ));

    let _: AgentEvent = round_trip(json!({"event": "turn_completed", "stop_reason": "end_turn"}));
    let _: AgentEvent = round_trip(json!({"event": "agent_exited", "code": 0}));
    let _: AgentEvent = round_trip(json!({"event": "agent_stderr", "line": "warn"}));
    let _: AgentEvent = round_trip(json!({"event": "session_update",
        "update": {"sessionId": "acp-1", "update": {"sessionUpdate": "agent_message_chunk"}}}));
}

#[test]
fn every_outcome_has_its_wire_name() {
    for (outcome, text) in [
        (SettleOutcome::Answered, "answered"),
        (SettleOutcome::Declined, "declined"),
        (SettleOutcome::TimedOut, "timed_out"),
        (SettleOutcome::AgentCancelled, "agent_cancelled"),
        (SettleOutcome::TurnCancelled, "turn_cancelled"),
        (SettleOutcome::Shutdown, "shutdown"),
        (SettleOutcome::AgentExited, "agent_exited"),
    ] {
        assert_eq!(serde_json::to_value(outcome).expect("encodes"), json!(text));
    }
}

#[test]
fn decode_payload_reports_bad_request() {
    let frame = Envelope::request("1", "agent.prompt", &json!({"txt": 1}));
    let err = frame
        .decode_payload::<kandev_agent_stream::request::Prompt>()
        .expect_err("mismatch");
    assert_eq!(err.code, ErrorCode::BadRequest);
}

#[test]
fn ask_user_question_events_and_respond() {
    let question = json!({"id": "q1", "kind": "single_select", "title": null, "prompt": "Which DB?",
        "options": [{"id": "Postgres", "label": "Postgres", "description": null},
                    {"id": "SQLite", "label": "SQLite", "description": "embedded"}],
        "custom_answer": null, "required": true, "default": null, "constraints": {}});
    let event: AgentEvent = round_trip(json!({
        "event": "ask_user_question_requested", "request_id": "r-1", "acp_session_id": "acp-1",
        "questions": [question], "context": "Choosing storage"
    }));
    assert!(matches!(event, AgentEvent::AskUserQuestionRequested(ref r) if r.request_id == "r-1"));
    let settled: AgentEvent = round_trip(json!({
        "event": "ask_user_question_settled", "request_id": "r-1", "outcome": "turn_cancelled"
    }));
    assert_eq!(
        settled,
        AgentEvent::AskUserQuestionSettled {
            request_id: "r-1".into(),
            outcome: SettleOutcome::TurnCancelled,
            answer: None,
            answered_by: None,
            returned_together: vec![],
        }
    );
    let result = json!({"answers": [{"question_id": "q1", "selected_options": ["Postgres"], "custom_text": ""}],
                        "rejected": false, "reject_reason": ""});
    let respond: kandev_agent_stream::request::QuestionsRespond = round_trip(json!({
        "request_ids": ["r-1", "r-2"], "result": result, "answered_by": "alice"
    }));
    assert_eq!(respond.request_ids, ["r-1", "r-2"]);
    assert_eq!(respond.result.answers[0].selected_options, ["Postgres"]);
    // The answer and who gave it come back with each call's settlement.
    let echoed: AgentEvent = round_trip(json!({
        "event": "ask_user_question_settled", "request_id": "r-2", "outcome": "answered",
        "answer": result, "answered_by": "alice", "returned_together": ["r-1", "r-2"]
    }));
    assert!(
        matches!(echoed, AgentEvent::AskUserQuestionSettled { answer: Some(ref a), answered_by: Some(ref by), ref returned_together, .. }
        if a.answers[0].selected_options == ["Postgres"] && by == "alice" && returned_together == &["r-1", "r-2"])
    );
    let cancel: kandev_agent_stream::request::QuestionsCancel = round_trip(json!({
        "request_ids": ["r-1"], "cancelled_by": "bob"
    }));
    assert_eq!(cancel.cancelled_by.as_deref(), Some("bob"));
    assert!(kandev_agent_stream::action::REQUESTS.contains(&"agent.questions.respond"));
}
