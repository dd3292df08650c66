//! A session's `ask_user_question_kandev` calls: announced as events, each answered once
//! by the backend's verdict, a cancel, its deadline or the end of the session.

use kandev_agent_stream::request::QuestionsRespond;
use kandev_agent_stream::{
    AgentEvent, AskUserQuestionRequested, ErrorCode, ErrorPayload, SettleOutcome,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Session, lock};
use crate::mcp::QuestionAsker;
use crate::questions::{AskInput, QuestionVerdict, TakenCall};

impl Session {
    /// One `ask_user_question_kandev` call: announces it, then waits until the backend
    /// returns a verdict, the turn is cancelled, the deadline passes
    /// (`KANDEV_ASK_USER_QUESTION_TIMEOUT`), the caller goes away (`cancelled`) or the
    /// session ends.
    pub async fn ask_user_question(
        &self,
        input: AskInput,
        cancelled: CancellationToken,
    ) -> QuestionVerdict {
        let request_id = uuid::Uuid::new_v4().to_string();
        let span = tracing::info_span!("ask_user_question", session_id = %self.id, request_id = %request_id);
        async {
            if self.is_closed() {
                return QuestionVerdict::Ended(SettleOutcome::Shutdown);
            }
            let requested = AskUserQuestionRequested {
                request_id: request_id.clone(),
                acp_session_id: self.acp_session_id().to_owned(),
                questions: input.questions,
                context: input.context,
                expires_at: Some(crate::config::deadline_after(self.timeouts.ask)),
            };
            let event = AgentEvent::AskUserQuestionRequested(requested.clone());
            let mut verdict = None;
            // Parked and announced in one step, so no settlement can be reported before it.
            self.outbox.emit_if(&event, || {
                verdict = Some(self.questions.insert(requested));
                true
            });
            let Some(mut verdict) = verdict else {
                return QuestionVerdict::Ended(SettleOutcome::Shutdown);
            };
            *lock(&self.last_activity) = Instant::now();
            tracing::info!("ask_user_question_kandev waiting for the operator");
            let ended = tokio::select! {
                result = &mut verdict => return result.unwrap_or(QuestionVerdict::Ended(SettleOutcome::Shutdown)),
                () = tokio::time::sleep(self.timeouts.ask) => SettleOutcome::TimedOut,
                () = cancelled.cancelled() => SettleOutcome::AgentCancelled,
            };
            match self.questions.take(&request_id) {
                Some(call) => {
                    self.finish_and_settle(call, &request_id, QuestionVerdict::Ended(ended), ended);
                    tracing::info!(outcome = ?ended, "ask_user_question_kandev returned without an answer");
                    QuestionVerdict::Ended(ended)
                }
                // Someone else took it at the same moment; its verdict is on the way.
                None => verdict.await.unwrap_or(QuestionVerdict::Ended(ended)),
            }
        }
        .instrument(span)
        .await
    }

    /// `agent.questions.respond`: returns a waiting call with the backend's verdict.
    pub fn respond_questions(&self, respond: &QuestionsRespond) -> Result<(), ErrorPayload> {
        let Some(call) = self.questions.take(&respond.request_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!(
                    "no waiting ask_user_question_kandev call `{}` (unknown or already returned)",
                    respond.request_id
                ),
            ));
        };
        let outcome = if respond.result.rejected {
            SettleOutcome::Declined
        } else {
            SettleOutcome::Answered
        };
        self.finish_and_settle(
            call,
            &respond.request_id,
            QuestionVerdict::Responded(respond.result.clone()),
            outcome,
        );
        tracing::info!(session_id = %self.id, request_id = %respond.request_id, ?outcome, "ask_user_question_kandev answered");
        Ok(())
    }

    /// `agent.questions.cancel`: the operator aborts a waiting call; it returns as cancelled.
    pub fn cancel_question(&self, request_id: &str) -> Result<(), ErrorPayload> {
        let Some(call) = self.questions.take(request_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!(
                    "no waiting ask_user_question_kandev call `{request_id}` (unknown or already returned)"
                ),
            ));
        };
        let outcome = SettleOutcome::OperatorCancelled;
        self.finish_and_settle(call, request_id, QuestionVerdict::Ended(outcome), outcome);
        tracing::info!(session_id = %self.id, request_id, "ask_user_question_kandev cancelled by the operator");
        Ok(())
    }

    /// Returns a taken call with `verdict` and emits `ask_user_question_settled` in one
    /// outbox critical section, so the settlement is on the stream before anything the
    /// agent does once its tool call returns.
    fn finish_and_settle(
        &self,
        call: TakenCall,
        request_id: &str,
        verdict: QuestionVerdict,
        outcome: SettleOutcome,
    ) {
        self.outbox.emit_made(|| {
            if !call.finish(verdict) {
                tracing::warn!(request_id, "the caller stopped waiting just now");
            }
            Some(AgentEvent::AskUserQuestionSettled {
                request_id: request_id.to_owned(),
                outcome,
            })
        });
    }

    /// `ask_user_question_kandev` calls still waiting, oldest first.
    pub fn pending_questions(&self) -> Vec<AskUserQuestionRequested> {
        self.questions.list()
    }

    pub(super) fn end_questions(&self, outcome: SettleOutcome) {
        for call in self.questions.drain() {
            let request_id = call.requested.request_id.clone();
            call.finish(QuestionVerdict::Ended(outcome));
            self.emit(AgentEvent::AskUserQuestionSettled {
                request_id,
                outcome,
            });
        }
    }
}

impl QuestionAsker for Session {
    async fn ask(&self, input: AskInput, cancelled: CancellationToken) -> QuestionVerdict {
        self.ask_user_question(input, cancelled).await
    }
}
