//! Clarifications: questions agents ask the operator, from the moment agentctl reports one
//! to the moment it is settled, for both sources.
//!
//! - [`service`]: [`Clarifications`], the one place that settles and announces a record
//!   ([`Clarifications::settle_and_announce`], [`Clarifications::settle_all_pending`]); the
//!   narrow [`SessionAgents`] trait is all it needs of the live sessions.
//! - `verbs`: the operator's verbs ([`Clarifications::respond`],
//!   [`Clarifications::cancel`]), routed to the record's source.
//! - [`elicitation`]: ACP `elicitation/create` — requested, settled, re-attached,
//!   answered forward-first (D5: agentctl adjudicates).
//! - [`open_records`]: [`OpenRecords`], the records opened here and not yet settled, so
//!   a verb need not read its record back while the session is live here.
//! - [`error`]: [`ClarificationError`], why a verb did not go through.
//! - [`ask_user_question`]: the `ask_user_question_kandev` tool — requested (with D4
//!   dedup), settled, reconciled, answered by sending the verb to every waiting call
//!   (agentctl adjudicates, the consumer writes the record).

pub mod ask_user_question;
pub mod elicitation;
pub mod error;
pub mod open_records;
pub mod service;
mod verbs;

pub use error::{ClarificationError, Origin};
pub use open_records::OpenRecords;
pub use service::{CancelStatus, Clarifications, RespondStatus, SessionAgents, SessionRef};

#[cfg(test)]
mod tests;
