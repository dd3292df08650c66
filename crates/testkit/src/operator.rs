//! The operator's side of a running [`Kandev`]: its HTTP API as the tests use it (tasks,
//! sessions, clarifications, answers, the flag) and waits on what it reports.

use serde_json::{Value, json};

use crate::http::{ApiResponse, HttpClient};
use crate::kandev::{FLAG_KEY, Kandev};
use crate::wait::{DEADLINE, poll_until};

impl Kandev {
    /// `POST /api/v1/tasks` → the task.
    pub async fn create_task(&self, title: &str) -> Value {
        self.http
            .post(
                "/api/v1/tasks",
                &json!({"title": title, "description": "e2e"}),
            )
            .await
            .expect_status(201, "create task")
    }

    /// `POST /api/v1/tasks/{id}/sessions` with an optional first prompt → the response.
    pub async fn try_start_session(
        &self,
        task_id: &str,
        agent: &str,
        prompt: Option<&str>,
    ) -> ApiResponse {
        let mut body = json!({"agent": agent});
        if let Some(prompt) = prompt {
            body["prompt"] = json!(prompt);
        }
        self.http
            .post(&format!("/api/v1/tasks/{task_id}/sessions"), &body)
            .await
    }

    /// Starts a session of `agent` in the task (with an optional first prompt) and
    /// returns it, asserting the 201.
    pub async fn start_session(&self, task_id: &str, agent: &str, prompt: Option<&str>) -> Value {
        self.try_start_session(task_id, agent, prompt)
            .await
            .expect_status(201, "start session")
    }

    /// A new task with a session of `agent` started on `prompt` → `(task, session)`.
    pub async fn task_with_session(&self, agent: &str, prompt: &str) -> (Value, Value) {
        let task = self.create_task(&format!("e2e: {prompt}")).await;
        let id = task["id"].as_str().expect("task id").to_owned();
        let session = self.start_session(&id, agent, Some(prompt)).await;
        (task, session)
    }

    /// Starts a session of `agent` on `prompt` in a new task and waits for its first
    /// pending clarification.
    pub async fn ask(&self, agent: &str, prompt: &str) -> Asked {
        let (task, session) = self.task_with_session(agent, prompt).await;
        let session_id = session["id"].as_str().expect("session id").to_owned();
        let record = self.wait_pending(&session_id, 1).await.remove(0);
        Asked {
            task_id: task["id"].as_str().expect("task id").to_owned(),
            pending_id: record["pending_id"]
                .as_str()
                .expect("pending_id")
                .to_owned(),
            session_id,
            record,
        }
    }

    /// `GET /api/v1/sessions/{id}`.
    pub async fn session(&self, id: &str) -> Value {
        self.http
            .get(&format!("/api/v1/sessions/{id}"))
            .await
            .expect_status(200, "get session")
    }

    /// `GET /api/v1/tasks/{id}`.
    pub async fn task(&self, id: &str) -> Value {
        self.http
            .get(&format!("/api/v1/tasks/{id}"))
            .await
            .expect_status(200, "get task")
    }

    /// The task as `GET /api/v1/tasks` lists it.
    pub async fn task_in_list(&self, id: &str) -> Value {
        let list = self
            .http
            .get("/api/v1/tasks")
            .await
            .expect_status(200, "list tasks");
        list["tasks"]
            .as_array()
            .and_then(|tasks| tasks.iter().find(|t| t["id"] == id).cloned())
            .unwrap_or_else(|| panic!("task {id} not in the task list: {list}"))
    }

    /// `GET /api/v1/sessions/{id}/messages` → the messages.
    pub async fn messages(&self, session_id: &str) -> Vec<Value> {
        let body = self
            .http
            .get(&format!("/api/v1/sessions/{session_id}/messages"))
            .await
            .expect_status(200, "list messages");
        body["messages"].as_array().cloned().unwrap_or_default()
    }

    /// `GET /api/v1/clarifications?session_id=&status=` → the records.
    pub async fn clarifications(&self, session_id: &str, status: Option<&str>) -> Vec<Value> {
        let mut path = format!("/api/v1/clarifications?session_id={session_id}");
        if let Some(status) = status {
            path.push_str(&format!("&status={status}"));
        }
        let body = self
            .http
            .get(&path)
            .await
            .expect_status(200, "list clarifications");
        body["clarifications"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `GET /api/v1/clarifications/{pending_id}`.
    pub async fn clarification(&self, pending_id: &str) -> Value {
        self.http
            .get(&format!("/api/v1/clarifications/{pending_id}"))
            .await
            .expect_status(200, "get clarification")
    }

    /// `GET /api/v1/notifications` → the notifications.
    pub async fn notifications(&self) -> Vec<Value> {
        let body = self
            .http
            .get("/api/v1/notifications")
            .await
            .expect_status(200, "list notifications");
        body["notifications"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until the session has `n` pending clarifications and returns them.
    pub async fn wait_pending(&self, session_id: &str, n: usize) -> Vec<Value> {
        poll_until(
            &format!("{n} pending clarification(s) on session {session_id}"),
            DEADLINE,
            || async {
                let pending = self.clarifications(session_id, Some("pending")).await;
                (pending.len() >= n).then_some(pending)
            },
        )
        .await
    }

    /// Waits until the session's state is `state` and returns the session.
    pub async fn wait_session_state(&self, session_id: &str, state: &str) -> Value {
        self.wait_session(&format!("session state {state}"), session_id, |s| {
            s["state"] == state
        })
        .await
    }

    /// Waits until `predicate` holds for the session and returns it.
    pub async fn wait_session(
        &self,
        what: &str,
        session_id: &str,
        predicate: impl Fn(&Value) -> bool,
    ) -> Value {
        poll_until(what, DEADLINE, || async {
            let session = self.session(session_id).await;
            predicate(&session).then_some(session)
        })
        .await
    }

    /// Waits until the clarification's status is `status` and returns the record.
    pub async fn wait_clarification_status(&self, pending_id: &str, status: &str) -> Value {
        poll_until(
            &format!("clarification {pending_id} {status}"),
            DEADLINE,
            || async {
                let record = self.clarification(pending_id).await;
                (record["status"] == status).then_some(record)
            },
        )
        .await
    }

    /// `POST /api/v1/clarifications/{pending_id}/respond` with `body`.
    pub async fn respond(&self, pending_id: &str, body: &Value) -> ApiResponse {
        self.http
            .post(
                &format!("/api/v1/clarifications/{pending_id}/respond"),
                body,
            )
            .await
    }

    /// Answers as an operator: `answers` is `[(question_id, [selected...], custom_text)]`.
    pub async fn answer(&self, pending_id: &str, answers: &[(&str, &[&str], &str)]) -> ApiResponse {
        self.respond(pending_id, &answer_body(answers)).await
    }

    /// Rejects the bundle (the UI's Skip).
    pub async fn reject(&self, pending_id: &str) -> ApiResponse {
        self.respond(
            pending_id,
            &json!({"answers": [], "rejected": true, "reject_reason": "skipped"}),
        )
        .await
    }

    /// `PATCH /api/v1/runtime-flags/features.acpElicitation` with `{"override": value}`.
    pub async fn set_flag_override(&self, value: Value) -> ApiResponse {
        self.http
            .patch(
                &format!("/api/v1/runtime-flags/{FLAG_KEY}"),
                &json!({"override": value}),
            )
            .await
    }

    /// Switches the flag on through the Settings override (the PATCH must be 200).
    pub async fn flag_on(&self) {
        self.set_flag_override(json!(true))
            .await
            .expect_status(200, "flag on");
    }

    /// The flag as `GET /api/v1/runtime-flags` lists it.
    pub async fn flag(&self) -> Value {
        let body = self
            .http
            .get("/api/v1/runtime-flags")
            .await
            .expect_status(200, "list flags");
        body["flags"]
            .as_array()
            .and_then(|flags| flags.iter().find(|f| f["key"] == FLAG_KEY).cloned())
            .unwrap_or_else(|| panic!("{FLAG_KEY} not listed: {body}"))
    }

    /// The agent text of a session (every agent message's content, joined).
    pub async fn agent_text(&self, session_id: &str) -> String {
        self.messages(session_id)
            .await
            .iter()
            .filter(|m| m["author_type"] == "agent")
            .filter_map(|m| m["content"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until the session's agent text contains `needle` and returns the text.
    pub async fn wait_agent_text(&self, session_id: &str, needle: &str) -> String {
        poll_until(
            &format!("agent text containing {needle:?}"),
            DEADLINE,
            || async {
                let text = self.agent_text(session_id).await;
                text.contains(needle).then_some(text)
            },
        )
        .await
    }
}

/// A session waiting on its first clarification.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Its task.
    pub task_id: String,
    /// Its session.
    pub session_id: String,
    /// The clarification's pending id.
    pub pending_id: String,
    /// The clarification record as first listed.
    pub record: Value,
}

/// The respond body for `answers` = `[(question_id, [selected...], custom_text)]`.
pub fn answer_body(answers: &[(&str, &[&str], &str)]) -> Value {
    let answers: Vec<Value> = answers
        .iter()
        .map(|(id, selected, text)| {
            json!({"question_id": id, "selected_options": selected, "custom_text": text})
        })
        .collect();
    json!({"answers": answers, "rejected": false, "reject_reason": ""})
}

/// How each of several answers posted at once to one question ended.
#[derive(Debug, Default)]
pub struct RacedAnswers {
    /// The choices whose answer was delivered (200 `{"status": "answered"}`), in order.
    pub delivered: Vec<&'static str>,
    /// The responses of the answers refused (404), for the test to say why they must be.
    pub refused: Vec<ApiResponse>,
}

/// Posts `n` answers to the one question of `pending_id` all at once, answer `i` choosing
/// `choices[i % len]` for `question_0`, through `clients[i % len]`, and sorts how they
/// ended.
///
/// # Panics
/// On any other outcome than a delivery or a 404.
pub async fn answer_at_once(
    clients: &[HttpClient],
    pending_id: &str,
    n: usize,
    choices: &[&'static str],
) -> RacedAnswers {
    let path = format!("/api/v1/clarifications/{pending_id}/respond");
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (api, path) = (clients[i % clients.len()], path.clone());
            let choice = choices[i % choices.len()];
            tokio::spawn(async move {
                let body = answer_body(&[("question_0", &[choice], "")]);
                (choice, api.post(&path, &body).await)
            })
        })
        .collect();
    let mut raced = RacedAnswers::default();
    for handle in handles {
        let (choice, r) = handle.await.expect("join");
        match r.status {
            200 => {
                assert_eq!(r.body, json!({"status": "answered"}), "{r}");
                raced.delivered.push(choice);
            }
            404 => raced.refused.push(r),
            _ => panic!("unexpected respond outcome {r}"),
        }
    }
    raced
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_body_is_the_respond_payload() {
        let body = answer_body(&[("question_0", &["dev", "prod"], " x ")]);
        assert_eq!(
            body,
            json!({"answers": [{"question_id": "question_0", "selected_options": ["dev", "prod"], "custom_text": " x "}],
                   "rejected": false, "reject_reason": ""})
        );
    }
}
