//! Sessions: the stored row and its API view, the state machine, the transcript
//! aggregation, the link seam, and the runtime that drives live sessions.

pub mod link;
pub mod runtime;
pub mod state;
pub mod store;
pub mod transcript;

pub use runtime::SessionRuntime;
pub use state::SessionState;
pub use store::Session;
