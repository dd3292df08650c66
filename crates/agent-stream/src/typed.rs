//! Which action and which response belong to each request type: [`StreamRequest`].
//!
//! The pairing lives here, once, so neither end names an action string or a response
//! type by hand (as the ACP SDK pairs each request with its response).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::action;
use crate::request::{
    Cancel, ElicitationsCancel, ElicitationsList, ElicitationsRespond, Prompt, QuestionsCancel,
    QuestionsList, QuestionsRespond, SessionAttach, SessionStart, Shutdown,
};
use crate::response::{
    PendingList, PromptAccepted, QuestionList, SessionAttached, SessionStarted, Success,
};

/// A request payload of the agent stream: its `action` name and the payload of the
/// `response` frame that answers it.
pub trait StreamRequest: Serialize + DeserializeOwned + Send + Sync {
    /// The envelope's `action` (one of [`action::REQUESTS`]).
    const ACTION: &'static str;
    /// The payload of a successful answer.
    type Response: Serialize + DeserializeOwned + Send;
}

/// Pairs each request type with its action and its response.
macro_rules! stream_requests {
    ($($request:ty => $action:expr, $response:ty;)*) => {
        $(
            impl StreamRequest for $request {
                const ACTION: &'static str = $action;
                type Response = $response;
            }
        )*

        /// The [`StreamRequest::ACTION`] of every request type, in declaration order.
        pub const ACTIONS: &[&str] = &[$($action),*];
    };
}

stream_requests! {
    SessionStart => action::SESSION_START, SessionStarted;
    SessionAttach => action::SESSION_ATTACH, SessionAttached;
    Prompt => action::PROMPT, PromptAccepted;
    Cancel => action::CANCEL, Success;
    ElicitationsRespond => action::ELICITATIONS_RESPOND, Success;
    ElicitationsCancel => action::ELICITATIONS_CANCEL, Success;
    ElicitationsList => action::ELICITATIONS_LIST, PendingList;
    QuestionsRespond => action::QUESTIONS_RESPOND, Success;
    QuestionsCancel => action::QUESTIONS_CANCEL, Success;
    QuestionsList => action::QUESTIONS_LIST, QuestionList;
    Shutdown => action::SHUTDOWN, Success;
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::json;

    use super::*;

    #[test]
    fn every_request_type_names_a_distinct_served_action() {
        let distinct: HashSet<&str> = ACTIONS.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            ACTIONS.len(),
            "duplicate action: {ACTIONS:?}"
        );
        for name in ACTIONS {
            assert!(action::REQUESTS.contains(name), "`{name}` is not served");
        }
        // Both ways: every served action has its request type.
        assert_eq!(action::REQUESTS.len(), ACTIONS.len());
    }

    #[test]
    fn a_prompt_and_its_answer_round_trip_in_their_wire_shape() {
        let prompt = Prompt { text: "hi".into() };
        let wire = serde_json::to_value(&prompt).expect("encode");
        assert_eq!(wire, json!({"text": "hi"}));
        assert_eq!(
            serde_json::from_value::<Prompt>(wire).expect("decode"),
            prompt
        );
        let answer: <Prompt as StreamRequest>::Response =
            serde_json::from_value(json!({"accepted": true})).expect("decode");
        assert_eq!(answer, PromptAccepted { accepted: true });
        assert_eq!(
            serde_json::to_value(&answer).expect("encode"),
            json!({"accepted": true})
        );
    }

    #[test]
    fn field_less_requests_are_an_empty_object_on_the_wire() {
        for wire in [
            serde_json::to_value(Cancel {}),
            serde_json::to_value(ElicitationsList {}),
            serde_json::to_value(QuestionsList {}),
            serde_json::to_value(Shutdown {}),
        ] {
            assert_eq!(wire.expect("encode"), json!({}));
        }
    }
}
