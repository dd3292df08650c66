//! Clarifications: the operator-facing record of a pending elicitation, and the
//! respond path (forward first, then settle from agentctl's verdict).

pub mod ask_user_question;
pub mod respond;
pub mod store;

pub use respond::{RespondBody, RespondStatus, respond};
pub use store::{Clarification, ClarificationStatus};
