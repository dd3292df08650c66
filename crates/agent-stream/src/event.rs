//! Events, agentctl → backend, carried in `agent.event` notifications.

use kandev_elicitation::Question;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A pending elicitation, as announced to the backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitationRequested {
    /// UUID v4 minted by agentctl; the backend's clarification id, verbatim.
    pub pending_id: String,
    /// The ACP session id of the request.
    pub acp_session_id: String,
    /// The tool call that raised it, when any.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// The request's message.
    pub message: String,
    /// The mapped questions, in D1 order.
    pub questions: Vec<Question>,
    /// agentctl's answer deadline, RFC 3339 UTC: when it declines the request for want
    /// of an answer. Absent from an older agentctl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// What that deadline answers (`agents.<id>.on_deadline`), so the operator is told.
    /// Absent from an older agentctl, which declines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_deadline: Option<crate::request::OnDeadline>,
}

/// An `ask_user_question_kandev` MCP tool call waiting for the operator
/// (docs/architecture.md §6 F3: the legacy clarification path, beside elicitation).
///
/// Unlike an elicitation, the backend mints the clarification id and may fold this call
/// into an existing pending record with the same normalised questions (D4); the call is
/// answered with `agent.questions.respond` naming this `request_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskUserQuestionRequested {
    /// UUID v4 minted by agentctl for this tool call; never the clarification id.
    pub request_id: String,
    /// The ACP session id of the agent that called the tool.
    pub acp_session_id: String,
    /// The questions (§4.3 shape): `kind` is `single_select`, ids are the caller's or
    /// `q1…`, option ids are their labels, `custom_answer` is null (custom text on this
    /// path is the answer's own `custom_text`, exclusive of a choice), `required` true.
    pub questions: Vec<Question>,
    /// The caller's optional context text.
    #[serde(default)]
    pub context: Option<String>,
    /// agentctl's deadline for this call, RFC 3339 UTC: when the tool returns a timeout.
    /// Absent from an older agentctl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// How a pending elicitation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettleOutcome {
    /// The operator's answer was sent (`accept`).
    Answered,
    /// The operator skipped (`decline`).
    Declined,
    /// The operator cancelled it (`cancel`; `agent.elicitations.cancel` or
    /// `agent.questions.cancel`).
    OperatorCancelled,
    /// The answer deadline passed (`decline`).
    TimedOut,
    /// The answer deadline passed and `on_deadline = "defaults"` sent the schema's
    /// defaults (`accept`).
    TimedOutDefaults,
    /// The answer deadline passed and `on_deadline = "cancel"` sent `cancel`.
    TimedOutCancelled,
    /// The agent withdrew the request with `$/cancel_request`.
    AgentCancelled,
    /// The turn was cancelled (`cancel`).
    TurnCancelled,
    /// agentctl is shutting down (`cancel`).
    Shutdown,
    /// The agent process exited; nothing could be sent.
    AgentExited,
}

/// Why agentctl declined an `elicitation/create` itself, without any operator seeing it:
/// the mapping's [`kandev_elicitation::DeclineReason`]s, the flag, a pending id collision.
/// Names only, never the request's content: it exists to be counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoorDecline {
    /// `mode` is not `"form"`.
    NotFormMode,
    /// Scoped by `requestId` rather than `sessionId`.
    RequestScope,
    /// Neither a `sessionId` nor a `requestId`.
    MissingSessionId,
    /// Not the shape of an elicitation request.
    Malformed,
    /// The schema maps to zero questions.
    NoQuestions,
    /// Past a mapping limit.
    TooLarge,
    /// `features.acpElicitation` is off for the session (AC-20).
    FlagOff,
    /// A fresh pending id collided with an open one.
    IdCollision,
    /// A reason this build does not know (a newer agentctl).
    #[serde(other)]
    Other,
}

impl DoorDecline {
    /// Every reason.
    pub const ALL: [DoorDecline; 9] = [
        Self::NotFormMode,
        Self::RequestScope,
        Self::MissingSessionId,
        Self::Malformed,
        Self::NoQuestions,
        Self::TooLarge,
        Self::FlagOff,
        Self::IdCollision,
        Self::Other,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFormMode => "not_form_mode",
            Self::RequestScope => "request_scope",
            Self::MissingSessionId => "missing_session_id",
            Self::Malformed => "malformed",
            Self::NoQuestions => "no_questions",
            Self::TooLarge => "too_large",
            Self::FlagOff => "flag_off",
            Self::IdCollision => "id_collision",
            Self::Other => "other",
        }
    }
}

impl From<kandev_elicitation::DeclineReason> for DoorDecline {
    fn from(reason: kandev_elicitation::DeclineReason) -> Self {
        use kandev_elicitation::DeclineReason as R;
        match reason {
            R::NotFormMode => Self::NotFormMode,
            R::RequestScope => Self::RequestScope,
            R::MissingSessionId => Self::MissingSessionId,
            R::Malformed => Self::Malformed,
            R::NoQuestions => Self::NoQuestions,
            R::TooLarge => Self::TooLarge,
        }
    }
}

/// The payload of an `agent.event` notification, tagged by `event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// An ACP `session/update`; `update` is its params, verbatim.
    SessionUpdate {
        /// The `session/update` params.
        update: Value,
    },
    /// The prompt returned.
    TurnCompleted {
        /// The ACP stop reason (`end_turn`, `cancelled`, …), or `error`.
        stop_reason: String,
        /// Why the prompt failed, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A form elicitation awaits the operator.
    ElicitationRequested(ElicitationRequested),
    /// agentctl answered an `elicitation/create` `decline` itself: nothing reached, or
    /// will reach, the operator. Only the reason travels (for the backend's metrics).
    ElicitationDeclined {
        /// Why.
        reason: DoorDecline,
    },
    /// A pending elicitation ended; `response` is the ACP response sent (null if none could be).
    ElicitationSettled {
        /// Which one.
        pending_id: String,
        /// How.
        outcome: SettleOutcome,
        /// What the agent got.
        response: Value,
        /// The operator's answer it was built from (`answered`, `declined`), as the
        /// backend sent it: the record is written from this event alone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<kandev_elicitation::OperatorAnswer>,
        /// Who answered or cancelled, as the backend's request named them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered_by: Option<String>,
    },
    /// An `ask_user_question_kandev` tool call awaits the operator.
    AskUserQuestionRequested(AskUserQuestionRequested),
    /// An `ask_user_question_kandev` tool call returned to the agent (answered, rejected,
    /// cancelled with the turn, past its deadline, abandoned by the caller, shutdown).
    AskUserQuestionSettled {
        /// Which call.
        request_id: String,
        /// How it ended (`agent_cancelled`: the MCP client went away or cancelled).
        outcome: SettleOutcome,
        /// The operator's answer it returned (`answered`, `declined`), as the backend sent
        /// it: the record is written from this event alone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<kandev_elicitation::OperatorAnswer>,
        /// Who answered or cancelled, as the backend's request named them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered_by: Option<String>,
        /// Every call the same operator's verb returned, this one included (empty when
        /// the call returned on its own): a call of the record missing from it joined
        /// after the verb was sent.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        returned_together: Vec<String>,
    },
    /// agentctl answered a `session/request_permission` by policy.
    PermissionResolved {
        /// The tool call asking.
        #[serde(default)]
        tool_call_id: Option<String>,
        /// The option chosen, or none when cancelled.
        #[serde(default)]
        option_id: Option<String>,
    },
    /// The agent process ended.
    AgentExited {
        /// Its exit code, when it had one.
        code: Option<i32>,
    },
    /// One line the agent wrote to stderr.
    AgentStderr {
        /// The line, without its newline.
        line: String,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_door_decline_carries_its_reason_name_and_an_unknown_one_reads_as_other() {
        let event = AgentEvent::ElicitationDeclined {
            reason: DoorDecline::NotFormMode,
        };
        assert_eq!(
            serde_json::to_value(&event).expect("encode"),
            json!({"event": "elicitation_declined", "reason": "not_form_mode"})
        );
        for reason in DoorDecline::ALL {
            assert_eq!(
                serde_json::to_value(reason).expect("encode"),
                json!(reason.as_str())
            );
        }
        let newer: AgentEvent =
            serde_json::from_value(json!({"event": "elicitation_declined", "reason": "shiny"}))
                .expect("decode");
        assert_eq!(
            newer,
            AgentEvent::ElicitationDeclined {
                reason: DoorDecline::Other
            }
        );
    }
}
