//! `POST /api/v1/clarifications/{pending_id}/respond` (ARCHITECTURE §3 step 5).
//!
//! For an elicitation the answer is ALWAYS forwarded first as
//! `agent.elicitations.respond`, with no local already-answered check in front
//! (D5, AC-61, AC-12g): agentctl is the one place that adjudicates duplicates.
//! The record is then settled from agentctl's verdict.

use kandev_agent_stream::action;
use kandev_agent_stream::request::ElicitationsRespond;
use kandev_agent_stream::response::Success;
use kandev_agent_stream::{ErrorCode, ErrorPayload};
use kandev_elicitation::Answer;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::agent_link::LinkError;
use crate::clarifications::store::{self, ClarificationRow, ClarificationStatus, SettledBy};
use crate::error::{AppError, Origin};
use crate::sessions::link::call;
use crate::sessions::runtime::{SessionRuntime, link_error};

/// The operator's submission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondBody {
    /// Per-question answers.
    #[serde(default)]
    pub answers: Vec<Answer>,
    /// Skip the whole form (`decline`).
    #[serde(default)]
    pub rejected: bool,
    /// Why, for the record.
    #[serde(default)]
    pub reject_reason: String,
}

impl RespondBody {
    fn as_record(&self) -> Value {
        json!({"answers": self.answers, "rejected": self.rejected, "reject_reason": self.reject_reason})
    }
}

/// What became of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RespondStatus {
    /// Delivered; the agent got the answer.
    Answered,
    /// Delivered as a skip (`decline`).
    Declined,
    /// The agent is gone; the answer is recorded on the message only.
    NotDelivered,
}

/// Answers clarification `pending_id`.
pub async fn respond(
    runtime: &SessionRuntime,
    pending_id: &str,
    body: RespondBody,
) -> Result<RespondStatus, AppError> {
    let span = tracing::info_span!(
        "respond",
        pending_id = %pending_id,
        session_id = tracing::field::Empty
    );
    respond_inner(runtime, pending_id, body)
        .instrument(span)
        .await
}

async fn respond_inner(
    runtime: &SessionRuntime,
    pending_id: &str,
    body: RespondBody,
) -> Result<RespondStatus, AppError> {
    let db = runtime.db();
    let Some(rec) = store::get(db, pending_id).await? else {
        return Err(AppError::NotFound {
            message: format!("no clarification `{pending_id}`"),
            origin: Some(Origin::Backend),
        });
    };
    tracing::Span::current().record("session_id", rec.session_id.as_str());
    if rec.source == super::ask_user_question::SOURCE_ASK_USER_QUESTION {
        return super::ask_user_question::respond(runtime, rec, body).await;
    }
    let answer = body.as_record();
    if rec.status() == ClarificationStatus::AgentDisconnected {
        return not_delivered(runtime, &rec, &answer).await;
    }
    let Some(live) = runtime.live(&rec.session_id) else {
        if rec.status() == ClarificationStatus::Pending {
            // Its session has no link any more: nothing can deliver the answer.
            let rec = store::settle(
                db,
                pending_id,
                ClarificationStatus::AgentDisconnected,
                SettledBy::Backend,
                None,
            )
            .await?
            .unwrap_or(rec);
            runtime.announce_settled(&rec).await?;
            runtime.refresh_by_id(&rec.session_id).await?;
            return not_delivered(runtime, &rec, &answer).await;
        }
        return Err(AppError::NotFound {
            message: format!(
                "clarification `{pending_id}` is {} and its session has ended",
                rec.status().as_str()
            ),
            origin: Some(Origin::Backend),
        });
    };
    let _settling = live.clarifications.lock().await;
    let payload = ElicitationsRespond {
        pending_id: pending_id.to_owned(),
        answers: body.answers.clone(),
        rejected: body.rejected,
        reject_reason: body.reject_reason.clone(),
    };
    match call::<_, Success>(&*live.link, action::ELICITATIONS_RESPOND, &payload).await {
        Ok(_) => {
            let (status, verdict) = if body.rejected {
                (ClarificationStatus::Declined, RespondStatus::Declined)
            } else {
                (ClarificationStatus::Answered, RespondStatus::Answered)
            };
            match store::settle(db, pending_id, status, SettledBy::Operator, Some(&answer)).await? {
                Some(rec) => runtime.announce_settled(&rec).await?,
                // agentctl's settled event got there first; the answer is still ours to record.
                None => {
                    if store::record_answer(db, pending_id, &answer).await?
                        && let Some(rec) = store::get(db, pending_id).await?
                    {
                        runtime.announce_settled(&rec).await?;
                    }
                }
            }
            tracing::info!(status = status.as_str(), "answer delivered");
            drop(_settling);
            runtime.refresh_by_id(&rec.session_id).await?;
            Ok(verdict)
        }
        Err(LinkError::Remote(ErrorPayload {
            code: ErrorCode::NotFound,
            message,
        })) => {
            tracing::info!("agentctl does not hold this pending (already settled or unknown)");
            // agentctl no longer holds it: withdraw the surface provisionally; agentctl's
            // own settled event, if still on its way, corrects the status.
            if let Some(rec) = store::settle(
                db,
                pending_id,
                ClarificationStatus::Cancelled,
                SettledBy::Backend,
                None,
            )
            .await?
            {
                runtime.announce_settled(&rec).await?;
                drop(_settling);
                runtime.refresh_by_id(&rec.session_id).await?;
            }
            Err(AppError::NotFound {
                message,
                origin: Some(Origin::Agentctl),
            })
        }
        Err(err) => {
            tracing::info!(error = %err, "answer not delivered; the record stays as it was");
            Err(link_error(err))
        }
    }
}

async fn not_delivered(
    runtime: &SessionRuntime,
    rec: &ClarificationRow,
    answer: &Value,
) -> Result<RespondStatus, AppError> {
    tracing::info!("agent is gone; answer recorded, not delivered");
    runtime.record_undelivered(rec, answer).await?;
    Ok(RespondStatus::NotDelivered)
}
