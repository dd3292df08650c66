//! `POST /api/v1/answer-links/open` and `…/respond`: the answer page a webhook's signed link
//! opens (docs/decisions/0016-answer-links.md). No operator credentials: the link is the
//! credential, for one question, once, until the question's deadline. The token travels in
//! the body, never in a URL kandev sees, and is never logged.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use kandev_elicitation::OperatorAnswer;
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::http::ApiJson;
use crate::http::error::{AppError, Origin};
use crate::model::Timestamp;
use crate::reach::answer_links::{self, AnswerGrant, LinkRefused};
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/answer-links/open", post(open))
        .route("/answer-links/respond", post(respond))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Open {
    token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Respond {
    token: String,
    answer: OperatorAnswer,
}

impl From<LinkRefused> for AppError {
    fn from(refused: LinkRefused) -> Self {
        let message = refused.to_string();
        match refused {
            LinkRefused::Malformed => Self::BadRequest(message),
            LinkRefused::Used => Self::Conflict {
                code: "ANSWER_LINK_USED",
                message,
            },
            LinkRefused::Expired => Self::Forbidden {
                code: "ANSWER_LINK_EXPIRED",
                message,
            },
            LinkRefused::UnknownHook | LinkRefused::Tampered | LinkRefused::OtherRecord => {
                Self::Forbidden {
                    code: "ANSWER_LINK_INVALID",
                    message,
                }
            }
        }
    }
}

fn grant(state: &AppState, token: &str) -> Result<AnswerGrant, LinkRefused> {
    answer_links::verify(
        token,
        None,
        Timestamp::now().instant().timestamp(),
        &state.config.notifications.webhooks,
        state.config.auth.session_secret.as_deref(),
    )
}

/// The question the link answers, to show its card.
async fn open(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Open>,
) -> Result<Json<Value>, AppError> {
    let grant = grant(&state, &body.token)?;
    let record = state
        .clarifications
        .record_of(&*state.sessions, &grant.pending_id)
        .await?
        .ok_or_else(|| AppError::NotFound {
            message: "the question is gone".into(),
            origin: Some(Origin::Backend),
        })?;
    Ok(Json(
        json!({ "clarification": record, "answered_by": grant.answered_by }),
    ))
}

/// Answers the link's question, once, as the hook's recipient, through the operator's own
/// forward-first path.
async fn respond(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Respond>,
) -> Result<Json<Value>, AppError> {
    let grant = grant(&state, &body.token)?;
    let span =
        tracing::info_span!("answer_link", pending_id = %grant.pending_id, hook = %grant.hook);
    use_once(&state, grant, body.answer).instrument(span).await
}

async fn use_once(
    state: &AppState,
    grant: AnswerGrant,
    answer: OperatorAnswer,
) -> Result<Json<Value>, AppError> {
    // Marked used before the answer is forwarded: two uses racing, one wins here.
    if !state
        .stores
        .outbox
        .use_answer_link(&grant.nonce, &grant.pending_id, Timestamp::now())
        .await?
    {
        tracing::info!("answer link refused: used already");
        return Err(LinkRefused::Used.into());
    }
    let status = state
        .clarifications
        .respond(
            &*state.sessions,
            &grant.pending_id,
            answer,
            &grant.answered_by,
        )
        .await?;
    Ok(Json(json!({ "status": status })))
}
