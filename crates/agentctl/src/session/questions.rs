//! A session's `ask_user_question_kandev` calls: announced as events, each answered once
//! by the backend's verdict, a cancel, its deadline or the end of the session.

use kandev_agent_stream::request::{QuestionsCancel, QuestionsRespond};
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
        // Time-ordered: kandev keys the call's row by it (docs/decisions/0023).
        let request_id = uuid::Uuid::now_v7().to_string();
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
                    let settled = AgentEvent::AskUserQuestionSettled {
                        request_id: request_id.clone(),
                        outcome: ended,
                        answer: None,
                        answered_by: None,
                        returned_together: Vec::new(),
                    };
                    self.finish_and_settle(call, QuestionVerdict::Ended(ended), settled);
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

    /// `agent.questions.respond`: returns every listed call still waiting with the
    /// operator's answer, each settlement echoing the answer and who gave it.
    pub fn respond_questions(&self, respond: &QuestionsRespond) -> Result<(), ErrorPayload> {
        let outcome = if respond.result.rejected {
            SettleOutcome::Declined
        } else {
            SettleOutcome::Answered
        };
        let verdict = QuestionVerdict::Responded(respond.result.clone());
        self.return_named(&respond.request_ids, verdict, outcome, &respond.answered_by)
    }

    /// `agent.questions.cancel`: the operator aborts the listed calls; each still waiting
    /// returns as cancelled.
    pub fn cancel_questions(&self, cancel: &QuestionsCancel) -> Result<(), ErrorPayload> {
        let outcome = SettleOutcome::OperatorCancelled;
        let verdict = QuestionVerdict::Ended(outcome);
        self.return_named(&cancel.request_ids, verdict, outcome, &cancel.cancelled_by)
    }

    /// An operator's verb: takes the listed calls still waiting, together, and returns each
    /// with `verdict`. Each settlement names the operator, the answer (when there is one)
    /// and every call returned with it. `NOT_FOUND` when none is waiting.
    fn return_named(
        &self,
        request_ids: &[String],
        verdict: QuestionVerdict,
        outcome: SettleOutcome,
        operator: &Option<String>,
    ) -> Result<(), ErrorPayload> {
        let calls = self.questions.take_all(request_ids);
        if calls.is_empty() {
            return Err(ErrorPayload::new(
                ErrorCode::NotFound,
                format!(
                    "no waiting ask_user_question_kandev call among {request_ids:?} (unknown or already returned)"
                ),
            ));
        }
        let together: Vec<String> = calls
            .iter()
            .map(|c| c.requested.request_id.clone())
            .collect();
        let answer = match &verdict {
            QuestionVerdict::Responded(answer) => Some(answer.clone()),
            QuestionVerdict::Ended(_) => None,
        };
        for call in calls {
            let request_id = call.requested.request_id.clone();
            let settled = AgentEvent::AskUserQuestionSettled {
                request_id: request_id.clone(),
                outcome,
                answer: answer.clone(),
                answered_by: operator.clone(),
                returned_together: together.clone(),
            };
            self.finish_and_settle(call, verdict.clone(), settled);
            tracing::info!(session_id = %self.id, request_id, ?outcome, "ask_user_question_kandev returned by the operator");
        }
        Ok(())
    }

    /// Returns a taken call with `verdict` and emits its `settled` event in one outbox
    /// critical section, so the settlement is on the stream before anything the agent
    /// does once its tool call returns.
    fn finish_and_settle(&self, call: TakenCall, verdict: QuestionVerdict, settled: AgentEvent) {
        self.outbox.emit_made(|| {
            if !call.finish(verdict) {
                tracing::warn!("the caller stopped waiting just now");
            }
            Some(settled)
        });
    }

    /// `ask_user_question_kandev` calls still waiting, oldest first.
    pub fn pending_questions(&self) -> Vec<AskUserQuestionRequested> {
        self.questions.list()
    }

    /// [`Session::pending_questions`] handed to `answer` in the stream's order, as
    /// [`Session::pending_in_order`] does for elicitations.
    pub fn pending_questions_in_order(&self, answer: impl FnOnce(Vec<AskUserQuestionRequested>)) {
        self.outbox.in_order(|| answer(self.questions.list()));
    }

    pub(super) fn end_questions(&self, outcome: SettleOutcome) {
        for call in self.questions.drain() {
            let request_id = call.requested.request_id.clone();
            call.finish(QuestionVerdict::Ended(outcome));
            self.emit(AgentEvent::AskUserQuestionSettled {
                request_id,
                outcome,
                answer: None,
                answered_by: None,
                returned_together: Vec::new(),
            });
        }
    }
}

impl QuestionAsker for Session {
    async fn ask(&self, input: AskInput, cancelled: CancellationToken) -> QuestionVerdict {
        self.ask_user_question(input, cancelled).await
    }
}
