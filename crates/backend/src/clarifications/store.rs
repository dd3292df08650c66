//! Clarification records (ARCHITECTURE §4.3), keyed by agentctl's `pending_id`
//! verbatim (AC-60) and never deduplicated (D4).
//!
//! Settlement is a conditional update from `pending`, so an `elicitation_settled`
//! event and a respond success racing end in one consistent state. A status the
//! backend set provisionally (`settled_by = backend`, e.g. after agentctl said
//! `NOT_FOUND` before its settled event was processed) may still be corrected by
//! agentctl's own event.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::FromRow;

use kandev_agent_stream::{ElicitationRequested, SettleOutcome};

use crate::db::{Db, now};

/// `source` of a record raised by ACP `elicitation/create`.
pub const SOURCE_ELICITATION: &str = "elicitation";

/// Where a record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClarificationStatus {
    /// Waiting for the operator.
    Pending,
    /// The operator's answer was delivered.
    Answered,
    /// The operator skipped.
    Declined,
    /// The agent or the turn withdrew it, or agentctl shut down.
    Cancelled,
    /// The answer deadline passed (agentctl declined it).
    Expired,
    /// agentctl or the agent is gone; it can no longer be answered.
    AgentDisconnected,
}

impl ClarificationStatus {
    /// Every status.
    pub const ALL: [ClarificationStatus; 6] = [
        Self::Pending,
        Self::Answered,
        Self::Declined,
        Self::Cancelled,
        Self::Expired,
        Self::AgentDisconnected,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Answered => "answered",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::AgentDisconnected => "agent_disconnected",
        }
    }

    /// Parses a stored or query-string name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// The status an `elicitation_settled` outcome leaves.
    pub fn from_outcome(outcome: SettleOutcome) -> Self {
        match outcome {
            SettleOutcome::Answered => Self::Answered,
            SettleOutcome::Declined => Self::Declined,
            SettleOutcome::TimedOut => Self::Expired,
            SettleOutcome::AgentCancelled
            | SettleOutcome::TurnCancelled
            | SettleOutcome::Shutdown => Self::Cancelled,
            SettleOutcome::AgentExited => Self::AgentDisconnected,
        }
    }
}

/// Who settled a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettledBy {
    /// agentctl's `elicitation_settled` event: authoritative.
    Agentctl,
    /// A respond that agentctl accepted.
    Operator,
    /// The backend on its own (link lost, agentctl said NOT_FOUND, session stopped).
    Backend,
}

impl SettledBy {
    fn as_str(self) -> &'static str {
        match self {
            Self::Agentctl => "agentctl",
            Self::Operator => "operator",
            Self::Backend => "backend",
        }
    }
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct ClarificationRow {
    /// agentctl's pending id, verbatim.
    pub pending_id: String,
    /// `elicitation` (or `ask_user_question` for legacy records).
    pub source: String,
    /// Its task.
    pub task_id: String,
    /// Its session.
    pub session_id: String,
    /// The `clarification_request` message.
    pub message_id: Option<String>,
    /// The tool call that raised it.
    pub tool_call_id: Option<String>,
    /// The request's message.
    pub message: String,
    /// JSON text: the mapped questions.
    pub questions: String,
    /// A [`ClarificationStatus`] name.
    pub status: String,
    /// Who settled it.
    pub settled_by: Option<String>,
    /// JSON text: the operator's answer.
    pub answer: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub settled_at: Option<String>,
}

impl ClarificationRow {
    /// The parsed status; an unknown stored name reads as `agent_disconnected`.
    pub fn status(&self) -> ClarificationStatus {
        ClarificationStatus::parse(&self.status).unwrap_or(ClarificationStatus::AgentDisconnected)
    }
}

/// A record as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Clarification {
    /// agentctl's pending id.
    pub pending_id: String,
    /// `elicitation` | `ask_user_question`.
    pub source: String,
    /// Its task.
    pub task_id: String,
    /// Its session.
    pub session_id: String,
    /// The `clarification_request` message.
    pub message_id: Option<String>,
    /// The tool call that raised it.
    pub tool_call_id: Option<String>,
    /// The request's message.
    pub message: String,
    /// The mapped questions (§4.3).
    pub questions: Value,
    /// The status.
    pub status: ClarificationStatus,
    /// The operator's answer `{answers, rejected, reject_reason}`, once given.
    pub answer: Value,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, once settled.
    pub settled_at: Option<String>,
}

impl From<ClarificationRow> for Clarification {
    fn from(row: ClarificationRow) -> Self {
        let json = |t: &str| serde_json::from_str(t).unwrap_or(Value::Null);
        Self {
            status: row.status(),
            questions: json(&row.questions),
            answer: row.answer.as_deref().map(json).unwrap_or(Value::Null),
            pending_id: row.pending_id,
            source: row.source,
            task_id: row.task_id,
            session_id: row.session_id,
            message_id: row.message_id,
            tool_call_id: row.tool_call_id,
            message: row.message,
            created_at: row.created_at,
            settled_at: row.settled_at,
        }
    }
}

const COLUMNS: &str = "pending_id, source, task_id, session_id, message_id, tool_call_id, message, questions, status, settled_by, answer, created_at, settled_at";

/// Stores a pending record for an `elicitation_requested`. Returns false when a record
/// with this pending id exists already (the same event delivered twice after a re-attach).
pub async fn insert_pending(
    db: &Db,
    request: &ElicitationRequested,
    task_id: &str,
    session_id: &str,
    message_id: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let questions = serde_json::to_string(&request.questions).unwrap_or_else(|_| "[]".into());
    let done = sqlx::query(
        "INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (pending_id) DO NOTHING",
    )
    .bind(&request.pending_id)
    .bind(SOURCE_ELICITATION)
    .bind(task_id)
    .bind(session_id)
    .bind(&request.tool_call_id)
    .bind(&request.message)
    .bind(questions)
    .bind(ClarificationStatus::Pending.as_str())
    .bind(now())
    .bind(message_id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// One record.
pub async fn get(db: &Db, pending_id: &str) -> Result<Option<ClarificationRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM clarifications WHERE pending_id = $1"
    ))
    .bind(pending_id)
    .fetch_optional(db)
    .await
}

/// Records, oldest first, optionally of one session and/or one status.
pub async fn list(
    db: &Db,
    session_id: Option<&str>,
    status: Option<ClarificationStatus>,
) -> Result<Vec<ClarificationRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM clarifications \
         WHERE ($1 IS NULL OR session_id = $1) AND ($2 IS NULL OR status = $2) \
         ORDER BY created_at, pending_id"
    ))
    .bind(session_id)
    .bind(status.map(ClarificationStatus::as_str))
    .fetch_all(db)
    .await
}

/// How many records of a session are pending.
pub async fn count_pending(db: &Db, session_id: &str) -> Result<usize, sqlx::Error> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM clarifications WHERE session_id = $1 AND status = $2")
            .bind(session_id)
            .bind(ClarificationStatus::Pending.as_str())
            .fetch_one(db)
            .await?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// How many records of each session of a task are pending (sessions with none are absent).
pub async fn count_pending_by_session(
    db: &Db,
    task_id: &str,
) -> Result<std::collections::HashMap<String, usize>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT session_id, COUNT(*) FROM clarifications WHERE task_id = $1 AND status = $2 GROUP BY session_id",
    )
    .bind(task_id)
    .bind(ClarificationStatus::Pending.as_str())
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(session, n)| (session, usize::try_from(n).unwrap_or(0)))
        .collect())
}

/// Moves a record out of `pending` (or corrects a provisional backend settlement when
/// agentctl reports the real outcome). Returns the record when this call changed it,
/// `None` when it was already settled (the other writer won; nothing to do).
pub async fn settle(
    db: &Db,
    pending_id: &str,
    status: ClarificationStatus,
    by: SettledBy,
    answer: Option<&Value>,
) -> Result<Option<ClarificationRow>, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE clarifications SET status = $2, settled_by = $3, settled_at = $4, answer = COALESCE($5, answer) \
         WHERE pending_id = $1 AND (status = $6 OR ($3 = $7 AND settled_by = $8 AND status <> $2))",
    )
    .bind(pending_id)
    .bind(status.as_str())
    .bind(by.as_str())
    .bind(now())
    .bind(answer.map(Value::to_string))
    .bind(ClarificationStatus::Pending.as_str())
    .bind(SettledBy::Agentctl.as_str())
    .bind(SettledBy::Backend.as_str())
    .execute(db)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    get(db, pending_id).await
}

/// Stores the operator's answer on a record that has none yet (a respond whose
/// settlement lost the race against agentctl's settled event).
pub async fn record_answer(db: &Db, pending_id: &str, answer: &Value) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE clarifications SET answer = $2 WHERE pending_id = $1 AND answer IS NULL",
    )
    .bind(pending_id)
    .bind(answer.to_string())
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(pending_id: &str, text: &str) -> ElicitationRequested {
        serde_json::from_value(json!({
            "pending_id": pending_id,
            "acp_session_id": "acp-1",
            "tool_call_id": "tool-1",
            "message": text,
            "questions": [{"id": "question_0", "kind": "single_select", "title": "Colour",
                "prompt": text, "options": [{"id": "Red", "label": "Red", "description": null}],
                "custom_answer": null, "required": false, "default": null, "constraints": {}}]
        }))
        .expect("request")
    }

    #[tokio::test]
    async fn identical_questions_make_two_records_under_agentctls_ids() {
        let (db, task, session) = crate::messages::tests::seeded().await;
        let a = "6f1c0a52-0000-4000-8000-000000000001";
        let b = "6f1c0a52-0000-4000-8000-000000000002";
        assert!(
            insert_pending(&db, &request(a, "Pick a colour"), &task, &session, None)
                .await
                .expect("a")
        );
        assert!(
            insert_pending(&db, &request(b, "Pick a colour"), &task, &session, None)
                .await
                .expect("b")
        );
        // The same event twice (buffer flushed on re-attach) is not a third record.
        assert!(
            !insert_pending(&db, &request(a, "Pick a colour"), &task, &session, None)
                .await
                .expect("dup")
        );
        let all = list(&db, Some(&session), None).await.expect("list");
        assert_eq!(
            all.iter()
                .map(|r| r.pending_id.as_str())
                .collect::<Vec<_>>(),
            [a, b]
        );
        assert_eq!(count_pending(&db, &session).await.expect("count"), 2);
        let by_session = count_pending_by_session(&db, &task).await.expect("counts");
        assert_eq!(by_session.get(&session), Some(&2));
        assert_eq!(by_session.len(), 1);
        let view = Clarification::from(all[0].clone());
        assert_eq!(view.source, "elicitation");
        assert_eq!(view.questions[0]["id"], "question_0");
        assert_eq!(view.status, ClarificationStatus::Pending);
    }

    #[tokio::test]
    async fn settlement_happens_once_and_agentctl_corrects_a_provisional_one() {
        let (db, task, session) = crate::messages::tests::seeded().await;
        let id = "p-1";
        insert_pending(&db, &request(id, "q"), &task, &session, None)
            .await
            .expect("insert");
        let answer = json!({"answers": [], "rejected": false, "reject_reason": ""});
        let won = settle(
            &db,
            id,
            ClarificationStatus::Answered,
            SettledBy::Operator,
            Some(&answer),
        )
        .await
        .expect("settle");
        assert_eq!(
            won.expect("changed").status(),
            ClarificationStatus::Answered
        );
        // agentctl's settled event arriving second changes nothing.
        assert!(
            settle(
                &db,
                id,
                ClarificationStatus::Answered,
                SettledBy::Agentctl,
                None
            )
            .await
            .expect("settle")
            .is_none()
        );
        assert!(
            !record_answer(&db, id, &json!({"other": 1}))
                .await
                .expect("answer")
        );
        let row = get(&db, id).await.expect("get").expect("some");
        assert_eq!(row.settled_by.as_deref(), Some("operator"));
        assert_eq!(Clarification::from(row).answer, answer);

        let id = "p-2";
        insert_pending(&db, &request(id, "q"), &task, &session, None)
            .await
            .expect("insert");
        settle(
            &db,
            id,
            ClarificationStatus::Cancelled,
            SettledBy::Backend,
            None,
        )
        .await
        .expect("provisional")
        .expect("changed");
        // Only agentctl may overwrite a provisional status, and only to a different one.
        assert!(
            settle(
                &db,
                id,
                ClarificationStatus::Answered,
                SettledBy::Operator,
                None
            )
            .await
            .expect("op")
            .is_none()
        );
        let fixed = settle(
            &db,
            id,
            ClarificationStatus::Expired,
            SettledBy::Agentctl,
            None,
        )
        .await
        .expect("fix")
        .expect("changed");
        assert_eq!(fixed.status(), ClarificationStatus::Expired);
        assert!(
            settle(
                &db,
                id,
                ClarificationStatus::Answered,
                SettledBy::Agentctl,
                None
            )
            .await
            .expect("again")
            .is_none()
        );
        assert_eq!(
            list(&db, None, Some(ClarificationStatus::Expired))
                .await
                .expect("l")
                .len(),
            1
        );
        assert_eq!(count_pending(&db, &session).await.expect("count"), 0);
    }

    #[tokio::test]
    async fn an_answer_arriving_after_agentctls_settlement_is_still_recorded() {
        let (db, task, session) = crate::messages::tests::seeded().await;
        insert_pending(&db, &request("p-1", "q"), &task, &session, None)
            .await
            .expect("insert");
        settle(
            &db,
            "p-1",
            ClarificationStatus::Answered,
            SettledBy::Agentctl,
            None,
        )
        .await
        .expect("event")
        .expect("changed");
        let answer = json!({"answers": [], "rejected": false, "reject_reason": ""});
        assert!(
            settle(
                &db,
                "p-1",
                ClarificationStatus::Answered,
                SettledBy::Operator,
                Some(&answer)
            )
            .await
            .expect("respond")
            .is_none()
        );
        assert!(record_answer(&db, "p-1", &answer).await.expect("answer"));
        let row = get(&db, "p-1").await.expect("get").expect("row");
        assert_eq!(row.status(), ClarificationStatus::Answered);
        assert_eq!(Clarification::from(row).answer, answer);
    }

    #[test]
    fn outcomes_map_to_statuses() {
        use ClarificationStatus as S;
        use SettleOutcome as O;
        let cases = [
            (O::Answered, S::Answered),
            (O::Declined, S::Declined),
            (O::TimedOut, S::Expired),
            (O::AgentCancelled, S::Cancelled),
            (O::TurnCancelled, S::Cancelled),
            (O::Shutdown, S::Cancelled),
            (O::AgentExited, S::AgentDisconnected),
        ];
        for (o, s) in cases {
            assert_eq!(ClarificationStatus::from_outcome(o), s);
        }
        for s in ClarificationStatus::ALL {
            assert_eq!(ClarificationStatus::parse(s.as_str()), Some(s));
        }
    }
}
