//! The operator's verbs on a clarification — [`Clarifications::respond`] and
//! [`Clarifications::cancel`] — routed by the record's source, each forward-first.

use kandev_elicitation::OperatorAnswer;
use tracing::Instrument;

use super::error::ClarificationError;
use super::service::{CancelStatus, Clarifications, RespondStatus, SessionAgents};
use crate::model::{Clarification, Source};
use crate::store::StoreError;

impl Clarifications {
    /// Record `pending_id`: the one opened here while its session is live here (this
    /// process then makes every settlement of it), else as the database has it.
    pub async fn record_of(
        &self,
        agents: &dyn SessionAgents,
        pending_id: &str,
    ) -> Result<Option<Clarification>, StoreError> {
        if let Some(record) = self.open.get(pending_id) {
            if agents.link_of(&record.session_id).is_some() {
                return Ok(Some(record));
            }
            self.open.forget_session(&record.session_id);
        }
        self.stores.clarifications.clarification(pending_id).await
    }

    async fn record(
        &self,
        agents: &dyn SessionAgents,
        pending_id: &str,
    ) -> Result<Clarification, ClarificationError> {
        self.record_of(agents, pending_id).await?.ok_or_else(|| {
            ClarificationError::not_found(format!("no clarification `{pending_id}`"))
        })
    }

    /// `POST /api/v1/clarifications/{pending_id}/respond` by `operator`.
    pub async fn respond(
        &self,
        agents: &dyn SessionAgents,
        pending_id: &str,
        answer: OperatorAnswer,
        operator: &str,
    ) -> Result<RespondStatus, ClarificationError> {
        // Hop span (kandev_log::hops): the verb, from its start to its answer.
        let _hop = tracing::debug_span!(target: "kandev::timing", "backend.respond", pending_id = %pending_id);
        let record = self.record(agents, pending_id).await?;
        let span = tracing::info_span!("respond", pending_id = %pending_id, session_id = %record.session_id);
        match record.source {
            Source::Elicitation => {
                super::elicitation::respond(self, agents, record, answer, operator)
                    .instrument(span)
                    .await
            }
            Source::AskUserQuestion => {
                super::ask_user_question::respond(self, agents, record, answer, operator)
                    .instrument(span)
                    .await
            }
        }
    }

    /// `POST /api/v1/clarifications/{pending_id}/cancel` by `operator` (docs/architecture.md §13).
    pub async fn cancel(
        &self,
        agents: &dyn SessionAgents,
        pending_id: &str,
        operator: &str,
    ) -> Result<CancelStatus, ClarificationError> {
        let record = self.record(agents, pending_id).await?;
        let span = tracing::info_span!("cancel", pending_id = %pending_id, session_id = %record.session_id);
        match record.source {
            Source::Elicitation => {
                super::elicitation::cancel(self, agents, record, operator)
                    .instrument(span)
                    .await
            }
            Source::AskUserQuestion => {
                super::ask_user_question::cancel(self, agents, record, operator)
                    .instrument(span)
                    .await
            }
        }
    }
}
