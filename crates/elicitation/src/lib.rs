//! # kandev-elicitation
//!
//! The pure core of Kandev's ACP form elicitation: no I/O, no async, no panics on
//! any input.
//!
//! - [`map_request`] turns the raw params of an ACP `elicitation/create` request into a
//!   [`MappedElicitation`] (ordered [`Question`]s) or a [`Decline`] with its reason.
//! - [`build_response`] validates an [`OperatorAnswer`] against the mapped questions and
//!   builds the ACP response ([`ElicitationResponse`]) with sparse, verbatim-keyed content.
//! - [`compare_keys`] is the D1 order over schema property keys.
//!
//! Everything works on [`serde_json::Value`], so a malformed body becomes a decline,
//! never a protocol error.

pub mod answer;
pub mod limits;
pub mod order;
pub mod question;
pub mod request;
pub mod response;

mod companion;
mod format;
mod schema;
mod size;

pub use answer::{Answer, OperatorAnswer};
pub use order::compare_keys;
pub use question::{Constraints, CustomAnswer, Question, QuestionKind, QuestionOption};
pub use request::{Decline, DeclineReason, MappedElicitation, map_request};
pub use response::{AnswerError, ElicitationResponse, build_response};
