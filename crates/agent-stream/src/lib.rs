//! # kandev-agent-stream
//!
//! The wire between the backend and agentctl (docs/architecture.md §4.2): a WebSocket at
//! [`STREAM_PATH`] carrying JSON text frames, each an [`Envelope`].
//!
//! - The backend sends `request` frames whose `action` is one of [`action`] and whose
//!   payload is the matching type of [`request`]; agentctl answers each with a
//!   `response` frame (the matching type of [`response`]) or an `error` frame
//!   ([`ErrorPayload`]) carrying the same `id`.
//! - agentctl sends `notification` frames with action [`action::AGENT_EVENT`] whose
//!   payload is an [`event::AgentEvent`].
//! - [`StreamRequest`] pairs each request type with its action and its response type.

pub mod agent_env;
pub mod envelope;
pub mod event;
pub mod mcp;
pub mod request;
pub mod response;
pub mod typed;

pub use envelope::{Envelope, ErrorCode, ErrorPayload, FrameType};
pub use event::{
    AgentEvent, AskUserQuestionRequested, DoorDecline, ElicitationRequested, SettleOutcome,
};
pub use typed::StreamRequest;

/// The path of the agent-stream WebSocket on agentctl.
pub const STREAM_PATH: &str = "/api/v1/agent/stream";

/// Action names, the `action` field of an [`Envelope`].
pub mod action {
    /// Start the agent for a session: [`crate::request::SessionStart`].
    pub const SESSION_START: &str = "agent.session.start";
    /// Re-attach this stream to a running session: [`crate::request::SessionAttach`].
    pub const SESSION_ATTACH: &str = "agent.session.attach";
    /// Send a prompt; the turn's end arrives as an event: [`crate::request::Prompt`].
    pub const PROMPT: &str = "agent.prompt";
    /// Cancel the current turn; every pending elicitation is answered `cancel` and every
    /// waiting `ask_user_question_kandev` call returns as cancelled: [`crate::request::Cancel`].
    pub const CANCEL: &str = "agent.cancel";
    /// Answer a pending elicitation: [`crate::request::ElicitationsRespond`].
    pub const ELICITATIONS_RESPOND: &str = "agent.elicitations.respond";
    /// Abort a pending elicitation (`{"action": "cancel"}` to the agent):
    /// [`crate::request::ElicitationsCancel`] → `{success: true}`; `NOT_FOUND` when settled.
    pub const ELICITATIONS_CANCEL: &str = "agent.elicitations.cancel";
    /// List pending elicitations: [`crate::request::ElicitationsList`].
    pub const ELICITATIONS_LIST: &str = "agent.elicitations.list";
    /// Return the operator's answer to a record's `ask_user_question_kandev` calls:
    /// [`crate::request::QuestionsRespond`] → `{success: true}`; `NOT_FOUND` when every
    /// call already returned.
    pub const QUESTIONS_RESPOND: &str = "agent.questions.respond";
    /// Abort a record's `ask_user_question_kandev` calls (each returns as cancelled):
    /// [`crate::request::QuestionsCancel`] → `{success: true}`; `NOT_FOUND` when every
    /// call already returned.
    pub const QUESTIONS_CANCEL: &str = "agent.questions.cancel";
    /// List waiting `ask_user_question_kandev` calls: [`crate::request::QuestionsList`].
    pub const QUESTIONS_LIST: &str = "agent.questions.list";
    /// Stop the agent; every pending elicitation is answered `cancel`:
    /// [`crate::request::Shutdown`].
    pub const SHUTDOWN: &str = "agent.shutdown";
    /// agentctl → backend: an [`crate::event::AgentEvent`].
    pub const AGENT_EVENT: &str = "agent.event";

    /// Every request action agentctl serves.
    pub const REQUESTS: &[&str] = &[
        SESSION_START,
        SESSION_ATTACH,
        PROMPT,
        CANCEL,
        ELICITATIONS_RESPOND,
        ELICITATIONS_CANCEL,
        ELICITATIONS_LIST,
        QUESTIONS_RESPOND,
        QUESTIONS_CANCEL,
        QUESTIONS_LIST,
        SHUTDOWN,
    ];
}

/// The read buffer of an agent-stream WebSocket, either end. tungstenite zeroes up to
/// this much of its buffer on every read (128 KiB by default), which for a stream of
/// small frames cost more than the frames; a larger frame still grows the buffer to fit.
pub const READ_BUFFER_BYTES: usize = 8 * 1024;
