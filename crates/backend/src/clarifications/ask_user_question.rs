//! The `ask_user_question_kandev` path (ARCHITECTURE §6 F3, spec AC-57, D4): clarifications
//! raised by the MCP tool agentctl serves, beside elicitation.
//!
//! What differs from an elicitation:
//!
//! - the record id is minted here (UUID v4), never agentctl's: agentctl's id names one
//!   tool call (`request_id`), and several calls may share one record;
//! - creation is deduplicated: a call on the same session whose normalised questions
//!   match a still-pending record of this source joins that record and gets its answer
//!   (D4's other half) — no second message, record or notification;
//! - the backend's own store adjudicates the answer: it is validated by this path's
//!   rules ([`validate_answer`]), the first response wins and a later one gets 409
//!   `NOT_ACTIVE`; the verdict is then sent to every waiting call with
//!   `agent.questions.respond`.
//!
//! Everything the operator sees is the same as for an elicitation: the
//! `clarification_request` message, `pending_action`, the notification, the WS events.

use std::collections::HashSet;

use kandev_agent_stream::action;
use kandev_agent_stream::request::QuestionsRespond;
use kandev_agent_stream::response::Success;
use kandev_agent_stream::{AskUserQuestionRequested, ErrorCode, ErrorPayload, SettleOutcome};
use kandev_elicitation::{Answer, Question};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::agent_link::LinkError;
use crate::clarifications::respond::{RespondBody, RespondStatus};
use crate::clarifications::store::{self, ClarificationRow, ClarificationStatus, SettledBy};
use crate::db::{Db, now};
use crate::error::{AppError, Origin};
use crate::events::{CLARIFICATION_CREATED, MESSAGE_CREATED};
use crate::messages::{self, NewMessage, TYPE_CLARIFICATION_REQUEST, author};
use crate::sessions::link::call;
use crate::sessions::runtime::{LiveSession, SessionRuntime, link_error};

/// `source` of a record raised by the `ask_user_question_kandev` MCP tool.
pub const SOURCE_ASK_USER_QUESTION: &str = "ask_user_question";

/// The longest custom answer this path accepts, in characters.
pub const MAX_CUSTOM_TEXT_CHARS: usize = 2000;

/// A call waits for the operator.
const CALL_WAITING: &str = "waiting";
/// A call returned to the agent (answer delivered, or agentctl settled it).
const CALL_RETURNED: &str = "returned";

/// The dedup identity of a bundle of questions: ids, titles, prompts and options with
/// surrounding and repeated whitespace removed, in order.
pub fn normalised_key(questions: &[Question]) -> String {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let opt = |s: &Option<String>| s.as_deref().map(squash);
    let normal: Vec<Value> = questions
        .iter()
        .map(|q| {
            json!([
                q.id.trim(),
                opt(&q.title),
                squash(&q.prompt),
                q.options
                    .iter()
                    .map(|o| json!([squash(&o.label), opt(&o.description)]))
                    .collect::<Vec<_>>(),
            ])
        })
        .collect();
    Value::Array(normal).to_string()
}

/// Checks an operator answer against this path's rules (F3, AC-57): either
/// `rejected: true` with no answers, or every question answered exactly once with one
/// declared option or custom text (at most [`MAX_CUSTOM_TEXT_CHARS`]), never both.
pub fn validate_answer(questions: &[Question], body: &RespondBody) -> Result<(), String> {
    if body.rejected {
        if !body.answers.is_empty() {
            return Err(
                "`rejected: true` must come alone: send no answers when skipping".to_owned(),
            );
        }
        return Ok(());
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for answer in &body.answers {
        let Some(question) = questions.iter().find(|q| q.id == answer.question_id) else {
            return Err(format!(
                "unknown question `{}`; this clarification asks {}",
                answer.question_id,
                ids(questions)
            ));
        };
        if !seen.insert(answer.question_id.as_str()) {
            return Err(format!(
                "question `{}` is answered more than once",
                answer.question_id
            ));
        }
        check_one(question, answer)?;
    }
    let missing: Vec<&str> = questions
        .iter()
        .map(|q| q.id.as_str())
        .filter(|id| !seen.contains(id))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "every question must be answered (or the whole bundle skipped with `rejected: true`); missing: {}",
            missing.join(", ")
        ));
    }
    Ok(())
}

fn ids(questions: &[Question]) -> String {
    questions
        .iter()
        .map(|q| format!("`{}`", q.id))
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_one(question: &Question, answer: &Answer) -> Result<(), String> {
    let id = &question.id;
    let text = answer.custom_text.trim();
    match (answer.selected_options.as_slice(), text.is_empty()) {
        ([], true) => Err(format!(
            "question `{id}` has no answer: choose one option or type a custom answer"
        )),
        ([_, ..], false) => Err(format!(
            "question `{id}`: choose an option or type a custom answer, not both"
        )),
        ([one], true) => {
            if question.options.iter().any(|o| &o.id == one) {
                Ok(())
            } else {
                Err(format!("question `{id}` has no option `{one}`"))
            }
        }
        ([_, _, ..], true) => Err(format!(
            "question `{id}` takes exactly one option, got {}",
            answer.selected_options.len()
        )),
        ([], false) => {
            let chars = text.chars().count();
            if chars > MAX_CUSTOM_TEXT_CHARS {
                Err(format!(
                    "question `{id}`: the custom answer is {chars} characters; at most {MAX_CUSTOM_TEXT_CHARS} are accepted"
                ))
            } else {
                Ok(())
            }
        }
    }
}

// ---- store ---------------------------------------------------------------------------------

async fn call_exists(db: &Db, request_id: &str) -> Result<bool, sqlx::Error> {
    let found: Option<(String,)> =
        sqlx::query_as("SELECT request_id FROM ask_user_question_calls WHERE request_id = $1")
            .bind(request_id)
            .fetch_optional(db)
            .await?;
    Ok(found.is_some())
}

/// The still-pending record of this source on `session_id` with this dedup key.
async fn pending_with_key(
    db: &Db,
    session_id: &str,
    key: &str,
) -> Result<Option<String>, sqlx::Error> {
    let found: Option<(String,)> = sqlx::query_as(
        "SELECT c.clarification_id FROM ask_user_question_calls c \
         JOIN clarifications r ON r.pending_id = c.clarification_id \
         WHERE c.session_id = $1 AND c.dedup_key = $2 AND r.status = $3 AND r.source = $4 \
         ORDER BY r.created_at LIMIT 1",
    )
    .bind(session_id)
    .bind(key)
    .bind(ClarificationStatus::Pending.as_str())
    .bind(SOURCE_ASK_USER_QUESTION)
    .fetch_optional(db)
    .await?;
    Ok(found.map(|(id,)| id))
}

async fn insert_call(
    db: &Db,
    request_id: &str,
    clarification_id: &str,
    session_id: &str,
    key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO ask_user_question_calls (request_id, clarification_id, session_id, dedup_key, status, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (request_id) DO NOTHING",
    )
    .bind(request_id)
    .bind(clarification_id)
    .bind(session_id)
    .bind(key)
    .bind(CALL_WAITING)
    .bind(now())
    .execute(db)
    .await?;
    Ok(())
}

/// The calls of a record still waiting for their answer, oldest first.
async fn waiting_calls(db: &Db, clarification_id: &str) -> Result<Vec<String>, sqlx::Error> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT request_id FROM ask_user_question_calls WHERE clarification_id = $1 AND status = $2 \
         ORDER BY created_at, request_id",
    )
    .bind(clarification_id)
    .bind(CALL_WAITING)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Marks a call returned; yields its record id when this call changed it.
async fn mark_returned(
    db: &Db,
    request_id: &str,
    outcome: &str,
) -> Result<Option<String>, sqlx::Error> {
    let row: Option<(String,)> = sqlx::query_as(
        "UPDATE ask_user_question_calls SET status = $2, outcome = $3 \
         WHERE request_id = $1 AND status = $4 RETURNING clarification_id",
    )
    .bind(request_id)
    .bind(CALL_RETURNED)
    .bind(outcome)
    .bind(CALL_WAITING)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|(id,)| id))
}

async fn insert_record(
    db: &Db,
    pending_id: &str,
    request: &AskUserQuestionRequested,
    live: &LiveSession,
    message_id: &str,
    message: &str,
) -> Result<(), sqlx::Error> {
    let questions = serde_json::to_string(&request.questions).unwrap_or_else(|_| "[]".into());
    sqlx::query(
        "INSERT INTO clarifications (pending_id, source, task_id, session_id, tool_call_id, message, questions, status, created_at, message_id) \
         VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9)",
    )
    .bind(pending_id)
    .bind(SOURCE_ASK_USER_QUESTION)
    .bind(&live.task_id)
    .bind(&live.id)
    .bind(message)
    .bind(questions)
    .bind(ClarificationStatus::Pending.as_str())
    .bind(now())
    .bind(message_id)
    .execute(db)
    .await?;
    Ok(())
}

// ---- events ------------------------------------------------------------------------------

/// `ask_user_question_requested`: create (or join, D4) the pending record.
pub(crate) async fn on_requested(
    runtime: &SessionRuntime,
    live: &LiveSession,
    request: &AskUserQuestionRequested,
) -> Result<(), sqlx::Error> {
    let span = tracing::info_span!(
        "ask_user_question",
        session_id = %live.id,
        request_id = %request.request_id,
        pending_id = tracing::field::Empty
    );
    async {
        let db = runtime.db();
        let _settling = live.clarifications.lock().await;
        if live.inner.lock().await.ended {
            return Ok(());
        }
        // The same event twice (replayed after a re-attach) is one call.
        if call_exists(db, &request.request_id).await? {
            return Ok(());
        }
        let key = normalised_key(&request.questions);
        if let Some(existing) = pending_with_key(db, &live.id, &key).await? {
            tracing::Span::current().record("pending_id", existing.as_str());
            insert_call(db, &request.request_id, &existing, &live.id, &key).await?;
            tracing::info!(
                "same questions already pending on this session; the call joins that record (D4)"
            );
            return Ok(());
        }
        let pending_id = uuid::Uuid::new_v4().to_string();
        tracing::Span::current().record("pending_id", pending_id.as_str());
        let content = request
            .context
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .or_else(|| request.questions.first().map(|q| q.prompt.as_str()))
            .unwrap_or("")
            .to_owned();
        // The message first, so a visible pending record always has its message.
        let message = messages::insert(
            db,
            NewMessage {
                session_id: &live.id,
                task_id: &live.task_id,
                message_type: TYPE_CLARIFICATION_REQUEST,
                author_type: author::AGENT,
                content: &content,
                requests_input: true,
                metadata: json!({
                    "pending_id": pending_id,
                    "source": SOURCE_ASK_USER_QUESTION,
                    "tool_call_id": null,
                    "questions": request.questions,
                    "status": ClarificationStatus::Pending.as_str(),
                    "answer": null,
                }),
            },
        )
        .await?;
        insert_record(db, &pending_id, request, live, &message.id, &content).await?;
        insert_call(db, &request.request_id, &pending_id, &live.id, &key).await?;
        if let Some(rec) = store::get(db, &pending_id).await? {
            runtime
                .hub()
                .publish(CLARIFICATION_CREATED, store::Clarification::from(rec));
        }
        runtime.hub().publish(MESSAGE_CREATED, &message);
        // Never the question text at info (F9).
        tracing::info!(
            questions = request.questions.len(),
            "clarification requested"
        );
        drop(_settling);
        runtime.clarification_opened(live).await
    }
    .instrument(span)
    .await
}

/// `ask_user_question_settled`: a call returned to the agent. When it returned without
/// the operator's answer (turn cancelled, deadline, caller gone, shutdown) and no other
/// call still waits on its record, the record is withdrawn with that outcome.
pub(crate) async fn on_settled(
    runtime: &SessionRuntime,
    live: &LiveSession,
    request_id: &str,
    outcome: SettleOutcome,
) -> Result<(), sqlx::Error> {
    let returned = CallReturn {
        outcome: serde_json::to_value(outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        status: ClarificationStatus::from_outcome(outcome),
        settled_by: SettledBy::Agentctl,
    };
    settle_call(runtime, live, request_id, &returned).await
}

/// After a re-attach (or a resume after restart): `held` is agentctl's
/// `agent.questions.list`. A listed call the backend does not know yet (its
/// `ask_user_question_requested` was lost) is opened; a call of this session still
/// waiting here but no longer held by agentctl has returned and its
/// `ask_user_question_settled` was lost, so it returns here through the same path as
/// that event, with [`RETURNED_UNSEEN`] and the record `cancelled` (the real outcome is
/// unknown; the tool call can take no answer any more).
pub(crate) async fn reconcile(
    runtime: &SessionRuntime,
    live: &LiveSession,
    held: &[AskUserQuestionRequested],
) -> Result<(), sqlx::Error> {
    for request in held {
        on_requested(runtime, live, request).await?;
    }
    let held: HashSet<&str> = held.iter().map(|r| r.request_id.as_str()).collect();
    let waiting = {
        let _settling = live.clarifications.lock().await;
        waiting_calls_of_session(runtime.db(), &live.id).await?
    };
    let returned = CallReturn {
        outcome: RETURNED_UNSEEN.to_owned(),
        status: ClarificationStatus::Cancelled,
        settled_by: SettledBy::Backend,
    };
    for request_id in waiting.iter().filter(|id| !held.contains(id.as_str())) {
        tracing::info!(session_id = %live.id, request_id = %request_id, "tool call no longer held by agentctl; its settlement was lost");
        settle_call(runtime, live, request_id, &returned).await?;
    }
    Ok(())
}

/// The `outcome` stored on a call that agentctl no longer held after a re-attach
/// (its own `ask_user_question_settled` never arrived).
pub const RETURNED_UNSEEN: &str = "returned_unseen";

/// How a call returned: its stored outcome, and what its record becomes when it was
/// the last call waiting on it.
struct CallReturn {
    outcome: String,
    status: ClarificationStatus,
    settled_by: SettledBy,
}

/// The calls of a session still waiting for their answer, oldest first.
async fn waiting_calls_of_session(db: &Db, session_id: &str) -> Result<Vec<String>, sqlx::Error> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT request_id FROM ask_user_question_calls WHERE session_id = $1 AND status = $2 \
         ORDER BY created_at, request_id",
    )
    .bind(session_id)
    .bind(CALL_WAITING)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// The one settle path of a returned call: marks it returned and, when no other call
/// still waits on its record, settles the record and withdraws its surface.
async fn settle_call(
    runtime: &SessionRuntime,
    live: &LiveSession,
    request_id: &str,
    returned: &CallReturn,
) -> Result<(), sqlx::Error> {
    let span = tracing::info_span!(
        "ask_user_question",
        session_id = %live.id,
        request_id = %request_id,
        pending_id = tracing::field::Empty
    );
    async {
        let db = runtime.db();
        let _settling = live.clarifications.lock().await;
        let Some(pending_id) = mark_returned(db, request_id, &returned.outcome).await? else {
            return Ok(());
        };
        tracing::Span::current().record("pending_id", pending_id.as_str());
        if !waiting_calls(db, &pending_id).await?.is_empty() {
            return Ok(());
        }
        // An answer or skip is normally settled by `respond` itself (holding the lock this
        // waits for, so the record is no longer pending here). It is still pending when the
        // stream dropped before agentctl's reply: the answer did reach the agent, and
        // this settlement, replayed after the re-attach, is the proof.
        let status = returned.status;
        if let Some(rec) = store::settle(db, &pending_id, status, returned.settled_by, None).await?
        {
            tracing::info!(
                status = status.as_str(),
                "clarification settled: its last tool call returned"
            );
            runtime.announce_settled(&rec).await?;
            drop(_settling);
            runtime.refresh_by_id(&live.id).await?;
        }
        Ok(())
    }
    .instrument(span)
    .await
}

// ---- respond -----------------------------------------------------------------------------

/// Answers an `ask_user_question` record: this path's validation, the backend's store
/// decides (first response wins, then 409 `NOT_ACTIVE`), the verdict goes to every call
/// waiting on the record.
pub(crate) async fn respond(
    runtime: &SessionRuntime,
    rec: ClarificationRow,
    body: RespondBody,
) -> Result<RespondStatus, AppError> {
    let db = runtime.db();
    let questions: Vec<Question> = serde_json::from_str(&rec.questions)
        .map_err(|err| AppError::Internal(format!("stored questions do not decode: {err}")))?;
    validate_answer(&questions, &body).map_err(AppError::InvalidAnswer)?;
    let not_active = |status: ClarificationStatus| AppError::Conflict {
        code: "NOT_ACTIVE",
        message: format!(
            "clarification `{}` is {} and takes no more answers",
            rec.pending_id,
            status.as_str()
        ),
    };
    let Some(live) = runtime.live(&rec.session_id) else {
        return Err(not_active(rec.status()));
    };
    // One respond at a time per session: the first one wins, the next sees it settled.
    let _settling = live.clarifications.lock().await;
    let Some(current) = store::get(db, &rec.pending_id).await? else {
        return Err(AppError::not_found(format!(
            "no clarification `{}`",
            rec.pending_id
        )));
    };
    if current.status() != ClarificationStatus::Pending {
        return Err(not_active(current.status()));
    }
    let result = kandev_elicitation::OperatorAnswer {
        answers: body.answers.clone(),
        rejected: body.rejected,
        reject_reason: body.reject_reason.clone(),
    };
    let calls = waiting_calls(db, &rec.pending_id).await?;
    let mut delivered = 0usize;
    let mut gone = 0usize;
    let mut failure = None;
    for request_id in &calls {
        let payload = QuestionsRespond {
            request_id: request_id.clone(),
            result: result.clone(),
        };
        match call::<_, Success>(&*live.link, action::QUESTIONS_RESPOND, &payload).await {
            Ok(_) => {
                let outcome = if body.rejected {
                    "declined"
                } else {
                    "answered"
                };
                mark_returned(db, request_id, outcome).await?;
                delivered += 1;
            }
            Err(LinkError::Remote(ErrorPayload {
                code: ErrorCode::NotFound,
                ..
            })) => {
                // The call already returned; its settled event is on its way.
                gone += 1;
            }
            Err(err) => failure = Some(err),
        }
    }
    if delivered == 0 {
        if let Some(err) = failure {
            tracing::info!(error = %err, "answer not delivered; the record stays pending");
            return Err(link_error(err));
        }
        if gone > 0 || calls.is_empty() {
            tracing::info!("no tool call waits for this record any more");
            if let Some(rec) = store::settle(
                db,
                &rec.pending_id,
                ClarificationStatus::Cancelled,
                SettledBy::Backend,
                None,
            )
            .await?
            {
                runtime.announce_settled(&rec).await?;
            }
            drop(_settling);
            runtime.refresh_by_id(&rec.session_id).await?;
            return Err(AppError::NotFound {
                message: format!(
                    "the tool call behind clarification `{}` already returned to the agent",
                    rec.pending_id
                ),
                origin: Some(Origin::Agentctl),
            });
        }
    }
    let (status, verdict) = if body.rejected {
        (ClarificationStatus::Declined, RespondStatus::Declined)
    } else {
        (ClarificationStatus::Answered, RespondStatus::Answered)
    };
    let answer = json!({"answers": body.answers, "rejected": body.rejected, "reject_reason": body.reject_reason});
    if let Some(rec) = store::settle(
        db,
        &rec.pending_id,
        status,
        SettledBy::Operator,
        Some(&answer),
    )
    .await?
    {
        runtime.announce_settled(&rec).await?;
    }
    tracing::info!(
        status = status.as_str(),
        calls = delivered,
        "answer delivered"
    );
    drop(_settling);
    runtime.refresh_by_id(&rec.session_id).await?;
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_elicitation::{Constraints, QuestionKind, QuestionOption};
    use proptest::prelude::*;

    fn question(id: &str, prompt: &str, labels: &[&str]) -> Question {
        Question {
            id: id.to_owned(),
            kind: QuestionKind::SingleSelect,
            title: None,
            prompt: prompt.to_owned(),
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    id: (*l).to_owned(),
                    label: (*l).to_owned(),
                    description: None,
                })
                .collect(),
            custom_answer: None,
            required: true,
            default: None,
            constraints: Constraints::default(),
        }
    }

    fn answer(id: &str, selected: &[&str], text: &str) -> Answer {
        Answer {
            question_id: id.to_owned(),
            selected_options: selected.iter().map(|s| (*s).to_owned()).collect(),
            custom_text: text.to_owned(),
        }
    }

    fn body(answers: Vec<Answer>, rejected: bool) -> RespondBody {
        RespondBody {
            answers,
            rejected,
            reject_reason: String::new(),
        }
    }

    fn two() -> Vec<Question> {
        vec![
            question("q1", "Which DB?", &["Postgres", "SQLite"]),
            question("q2", "Which cache?", &["Redis", "None"]),
        ]
    }

    #[test]
    fn one_option_or_custom_text_per_question_is_accepted() {
        let ok = body(
            vec![
                answer("q1", &["Postgres"], ""),
                answer("q2", &[], "memcached"),
            ],
            false,
        );
        assert_eq!(validate_answer(&two(), &ok), Ok(()));
        assert_eq!(validate_answer(&two(), &body(vec![], true)), Ok(()));
    }

    #[test]
    fn each_rule_has_its_own_message() {
        let qs = two();
        let cases = [
            (
                body(
                    vec![
                        answer("q1", &["Postgres"], "x"),
                        answer("q2", &["Redis"], ""),
                    ],
                    false,
                ),
                "not both",
            ),
            (
                body(vec![answer("q1", &["Postgres"], "")], false),
                "missing: q2",
            ),
            (
                body(
                    vec![
                        answer("q1", &["Postgres", "SQLite"], ""),
                        answer("q2", &["Redis"], ""),
                    ],
                    false,
                ),
                "exactly one option",
            ),
            (
                body(
                    vec![answer("q1", &["MySQL"], ""), answer("q2", &["Redis"], "")],
                    false,
                ),
                "no option `MySQL`",
            ),
            (
                body(
                    vec![answer("q1", &[], "  "), answer("q2", &["Redis"], "")],
                    false,
                ),
                "has no answer",
            ),
            (
                body(
                    vec![
                        answer("q1", &["Postgres"], ""),
                        answer("q1", &["SQLite"], ""),
                        answer("q2", &["Redis"], ""),
                    ],
                    false,
                ),
                "more than once",
            ),
            (
                body(vec![answer("q9", &["Postgres"], "")], false),
                "unknown question `q9`",
            ),
            (
                body(vec![answer("q1", &["Postgres"], "")], true),
                "must come alone",
            ),
        ];
        for (b, expected) in cases {
            let err = validate_answer(&qs, &b).expect_err(expected);
            assert!(err.contains(expected), "{err:?} should say {expected:?}");
        }
    }

    #[test]
    fn custom_text_is_limited_to_2000_characters() {
        let qs = vec![question("q1", "p", &["a", "b"])];
        let at_limit = "é".repeat(MAX_CUSTOM_TEXT_CHARS);
        assert_eq!(
            validate_answer(&qs, &body(vec![answer("q1", &[], &at_limit)], false)),
            Ok(())
        );
        let over = "é".repeat(MAX_CUSTOM_TEXT_CHARS + 1);
        let err = validate_answer(&qs, &body(vec![answer("q1", &[], &over)], false))
            .expect_err("too long");
        assert!(err.contains("2001 characters"), "{err}");
    }

    #[test]
    fn normalised_key_ignores_whitespace_only() {
        let a = vec![question("q1", "Which  DB?\n", &["Postgres", " SQLite"])];
        let b = vec![question("q1", " Which DB?", &["Postgres", "SQLite "])];
        let c = vec![question("q1", "Which DB?", &["SQLite", "Postgres"])];
        assert_eq!(normalised_key(&a), normalised_key(&b));
        assert_ne!(normalised_key(&a), normalised_key(&c));
    }

    /// A started session on a fake link (no agentctl): its runtime, id and link.
    async fn live_session() -> (
        crate::state::AppState,
        String,
        std::sync::Arc<crate::testing::FakeLink>,
    ) {
        let (state, connector) = crate::testing::app().await;
        let task = crate::tasks::create(&state.db, "t", "")
            .await
            .expect("task");
        let session = state
            .runtime
            .start_session(&task, "mock", None)
            .await
            .expect("session");
        let link = connector.link(&session.id);
        (state, session.id, link)
    }

    fn requested(request_id: &str) -> crate::agent_link::LinkEvent {
        crate::agent_link::LinkEvent::Agent(
            kandev_agent_stream::AgentEvent::AskUserQuestionRequested(AskUserQuestionRequested {
                request_id: request_id.to_owned(),
                acp_session_id: "acp-1".to_owned(),
                questions: vec![question("q1", "Ship it?", &["Yes", "No"])],
                context: None,
            }),
        )
    }

    fn returned(request_id: &str, outcome: SettleOutcome) -> crate::agent_link::LinkEvent {
        crate::agent_link::LinkEvent::Agent(
            kandev_agent_stream::AgentEvent::AskUserQuestionSettled {
                request_id: request_id.to_owned(),
                outcome,
            },
        )
    }

    async fn one_pending(state: &crate::state::AppState, session: &str) -> ClarificationRow {
        crate::testing::eventually("one pending record", || async {
            let list = store::list(&state.db, Some(session), Some(ClarificationStatus::Pending))
                .await
                .expect("list");
            (list.len() == 1).then(|| list[0].clone())
        })
        .await
    }

    #[tokio::test]
    async fn a_shared_record_is_withdrawn_only_when_its_last_call_returns_unanswered() {
        let (state, session, link) = live_session().await;
        link.push(requested("r1"));
        link.push(requested("r2"));
        let rec = one_pending(&state, &session).await;
        crate::testing::eventually("both calls on the record", || async {
            (waiting_calls(&state.db, &rec.pending_id)
                .await
                .expect("calls")
                .len()
                == 2)
                .then_some(())
        })
        .await;
        link.push(returned("r1", SettleOutcome::AgentCancelled));
        crate::testing::eventually("r1 returned", || async {
            (waiting_calls(&state.db, &rec.pending_id)
                .await
                .expect("calls")
                == ["r2"])
            .then_some(())
        })
        .await;
        assert_eq!(
            store::get(&state.db, &rec.pending_id)
                .await
                .expect("get")
                .expect("row")
                .status(),
            ClarificationStatus::Pending,
            "r2 still waits on it"
        );
        link.push(returned("r2", SettleOutcome::TimedOut));
        crate::testing::eventually("the record expired", || async {
            let row = store::get(&state.db, &rec.pending_id).await.expect("get")?;
            (row.status() == ClarificationStatus::Expired).then_some(())
        })
        .await;
    }

    #[tokio::test]
    async fn a_respond_while_the_stream_is_down_is_503_and_the_record_stays_open() {
        let (state, session, link) = live_session().await;
        link.push(requested("r1"));
        let rec = one_pending(&state, &session).await;
        link.down.store(true, std::sync::atomic::Ordering::SeqCst);
        let answer = body(vec![answer("q1", &["Yes"], "")], false);
        let err = crate::clarifications::respond(&state.runtime, &rec.pending_id, answer.clone())
            .await
            .expect_err("not connected");
        assert_eq!(err.code(), "AGENT_STREAM_NOT_CONNECTED");
        assert_eq!(
            one_pending(&state, &session).await.pending_id,
            rec.pending_id
        );
        link.down.store(false, std::sync::atomic::Ordering::SeqCst);
        let status = crate::clarifications::respond(&state.runtime, &rec.pending_id, answer)
            .await
            .expect("delivered now");
        assert_eq!(status, RespondStatus::Answered);
        let sent = link.calls_of(action::QUESTIONS_RESPOND);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["request_id"], "r1");
        assert_eq!(
            sent[0]["result"]["answers"][0]["selected_options"],
            json!(["Yes"])
        );
    }

    #[tokio::test]
    async fn an_answer_whose_reply_was_cut_off_is_settled_by_the_replayed_return() {
        let (state, session, link) = live_session().await;
        link.push(requested("r1"));
        let rec = one_pending(&state, &session).await;
        link.reply(action::QUESTIONS_RESPOND, Err(LinkError::Interrupted));
        let err = crate::clarifications::respond(
            &state.runtime,
            &rec.pending_id,
            body(vec![answer("q1", &["Yes"], "")], false),
        )
        .await
        .expect_err("the reply was lost with the stream");
        assert_eq!(err.code(), "AGENT_STREAM_NOT_CONNECTED");
        assert_eq!(
            one_pending(&state, &session).await.pending_id,
            rec.pending_id,
            "nothing says yet whether the answer arrived"
        );
        // agentctl's settlement of the call, replayed after the re-attach, says it did.
        link.push(returned("r1", SettleOutcome::Answered));
        crate::testing::eventually("the record answered", || async {
            let row = store::get(&state.db, &rec.pending_id).await.expect("get")?;
            (row.status() == ClarificationStatus::Answered).then_some(())
        })
        .await;
    }

    #[tokio::test]
    async fn a_respond_whose_call_already_returned_is_404_and_withdraws_the_record() {
        let (state, session, link) = live_session().await;
        link.push(requested("r1"));
        let rec = one_pending(&state, &session).await;
        link.reply(
            action::QUESTIONS_RESPOND,
            Err(LinkError::Remote(ErrorPayload::new(
                ErrorCode::NotFound,
                "gone",
            ))),
        );
        let err = crate::clarifications::respond(
            &state.runtime,
            &rec.pending_id,
            body(vec![answer("q1", &["No"], "")], false),
        )
        .await
        .expect_err("the call is gone");
        assert_eq!(err.code(), "NOT_FOUND");
        let row = store::get(&state.db, &rec.pending_id)
            .await
            .expect("get")
            .expect("row");
        assert_eq!(row.status(), ClarificationStatus::Cancelled);
    }

    proptest! {
        /// Whatever the answer, it is accepted exactly when every question has one
        /// declared option xor non-blank text of at most 2,000 characters.
        #[test]
        fn accepted_exactly_when_the_rules_hold(
            picks in proptest::collection::vec((proptest::option::of(0usize..3), proptest::option::of("[a-z ]{0,4}")), 2),
        ) {
            let qs = two();
            let labels = [["Postgres", "SQLite", "MySQL"], ["Redis", "None", "Memcached"]];
            let answers: Vec<Answer> = picks.iter().enumerate().map(|(i, (pick, text))| Answer {
                question_id: qs[i].id.clone(),
                selected_options: pick.map(|p| vec![labels[i][p].to_owned()]).unwrap_or_default(),
                custom_text: text.clone().unwrap_or_default(),
            }).collect();
            let expected = picks.iter().all(|(pick, text)| {
                let has_text = text.as_deref().is_some_and(|t| !t.trim().is_empty());
                match pick {
                    Some(p) => *p < 2 && !has_text,
                    None => has_text,
                }
            });
            prop_assert_eq!(validate_answer(&qs, &body(answers, false)).is_ok(), expected);
        }
    }
}
