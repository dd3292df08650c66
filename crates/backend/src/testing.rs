//! Test doubles for unit tests: a fake agentctl link whose replies are scripted
//! and whose events the test pushes, and an [`AppState`] on in-memory SQLite.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kandev_agent_stream::StreamRequest;
use kandev_flags::{FlagService, Profile, Profiles};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::agent_link::{
    AgentConnector, DynLink, ExecutorConfig, LinkError, LinkEvent, SessionLink,
};
use crate::config::Config;
use crate::state::AppState;
use crate::store::{StoredOverrides, Stores};

/// One fake agentctl per session.
#[derive(Default)]
pub struct FakeLink {
    /// Every request sent: `(action, payload)`.
    pub calls: Mutex<Vec<(String, Value)>>,
    /// Scripted replies per action, used once each; otherwise a default success.
    pub replies: Mutex<HashMap<String, VecDeque<Result<Value, LinkError>>>>,
    /// Whether the stream is up; requests fail `NotConnected` when not.
    pub down: AtomicBool,
    /// The event sender of this session.
    pub events: Mutex<Option<UnboundedSender<LinkEvent>>>,
    /// Set by `shutdown`.
    pub shut: AtomicBool,
    /// What `delivered_seq` reports.
    pub delivered: Mutex<Option<u64>>,
    /// When set, the next `agent.prompt` request waits for it before it is answered (the
    /// agent's events can then outrun the prompt's reply).
    pub prompt_gate: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

impl FakeLink {
    /// Scripts the next reply to a request of type `R`.
    pub fn reply<R: StreamRequest>(&self, reply: Result<Value, LinkError>) {
        self.replies
            .lock()
            .expect("lock")
            .entry(R::ACTION.to_owned())
            .or_default()
            .push_back(reply);
    }

    /// Delivers a link event to the session's consumer.
    pub fn push(&self, event: LinkEvent) {
        if let Some(tx) = self.events.lock().expect("lock").as_ref() {
            let _ = tx.send(event);
        }
    }

    /// The payloads of the requests of type `R` so far, as they went on the wire.
    pub fn calls_of<R: StreamRequest>(&self) -> Vec<Value> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(a, _)| a == R::ACTION)
            .map(|(_, p)| p.clone())
            .collect()
    }
}

impl FakeLink {
    /// What agentctl does after accepting an operator's verb: it emits
    /// `elicitation_settled`, or one `ask_user_question_settled` per call named, echoing
    /// the answer and who gave it.
    fn settle_as_agentctl(&self, action: &str, payload: &Value) {
        use kandev_agent_stream::request::{
            ElicitationsCancel, ElicitationsRespond, QuestionsCancel, QuestionsRespond,
        };
        use kandev_agent_stream::{AgentEvent, SettleOutcome, action as name};
        let calls_settled =
            |request_ids: Vec<String>, outcome, answer: Option<_>, by: Option<String>| {
                for request_id in &request_ids {
                    self.push(LinkEvent::Agent(AgentEvent::AskUserQuestionSettled {
                        request_id: request_id.clone(),
                        outcome,
                        answer: answer.clone(),
                        answered_by: by.clone(),
                        returned_together: request_ids.clone(),
                    }));
                }
            };
        let event = match action {
            name::ELICITATIONS_RESPOND => {
                let Ok(respond) = serde_json::from_value::<ElicitationsRespond>(payload.clone())
                else {
                    return;
                };
                let outcome = if respond.answer.rejected {
                    SettleOutcome::Declined
                } else {
                    SettleOutcome::Answered
                };
                AgentEvent::ElicitationSettled {
                    pending_id: respond.pending_id,
                    outcome,
                    response: Value::Null,
                    answer: Some(respond.answer),
                    answered_by: respond.answered_by,
                }
            }
            name::ELICITATIONS_CANCEL => {
                let Ok(cancel) = serde_json::from_value::<ElicitationsCancel>(payload.clone())
                else {
                    return;
                };
                AgentEvent::ElicitationSettled {
                    pending_id: cancel.pending_id,
                    outcome: SettleOutcome::OperatorCancelled,
                    response: json!({"action": "cancel"}),
                    answer: None,
                    answered_by: cancel.cancelled_by,
                }
            }
            name::QUESTIONS_RESPOND => {
                let Ok(respond) = serde_json::from_value::<QuestionsRespond>(payload.clone())
                else {
                    return;
                };
                let outcome = if respond.result.rejected {
                    SettleOutcome::Declined
                } else {
                    SettleOutcome::Answered
                };
                let answer = Some(respond.result);
                return calls_settled(respond.request_ids, outcome, answer, respond.answered_by);
            }
            name::QUESTIONS_CANCEL => {
                let Ok(cancel) = serde_json::from_value::<QuestionsCancel>(payload.clone()) else {
                    return;
                };
                let outcome = SettleOutcome::OperatorCancelled;
                return calls_settled(cancel.request_ids, outcome, None, cancel.cancelled_by);
            }
            _ => return,
        };
        self.push(LinkEvent::Agent(event));
    }
}

impl SessionLink for FakeLink {
    fn request_value<'a>(
        &'a self,
        action: &'a str,
        payload: Value,
    ) -> BoxFuture<'a, Result<Value, LinkError>> {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                return Err(LinkError::NotConnected);
            }
            self.calls
                .lock()
                .expect("lock")
                .push((action.to_owned(), payload.clone()));
            if action == "agent.prompt" {
                let gate = self.prompt_gate.lock().expect("lock").take();
                if let Some(gate) = gate {
                    let _ = gate.await;
                }
            }
            let scripted = self
                .replies
                .lock()
                .expect("lock")
                .get_mut(action)
                .and_then(VecDeque::pop_front);
            if let Some(reply) = scripted {
                if reply.is_ok() {
                    self.settle_as_agentctl(action, &payload);
                }
                return reply;
            }
            self.settle_as_agentctl(action, &payload);
            Ok(match action {
                "agent.session.start" => {
                    let on = payload["flags"]["features.acpElicitation"] == json!(true);
                    let mut caps = json!({"_meta": {"terminal_output": true}});
                    if on {
                        caps["elicitation"] = json!({"form": {}});
                    }
                    json!({"acp_session_id": "acp-1", "client_capabilities": caps})
                }
                "agent.prompt" => json!({"accepted": true}),
                "agent.elicitations.list" => json!({"pending": []}),
                _ => json!({"success": true}),
            })
        })
    }

    fn is_connected(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }

    fn delivered_seq(&self) -> Option<u64> {
        *self.delivered.lock().expect("lock")
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.shut.store(true, Ordering::SeqCst);
        })
    }
}

/// Hands out [`FakeLink`]s and remembers them by session id.
#[derive(Default)]
pub struct FakeConnector {
    /// Links by session id.
    pub links: Mutex<BTreeMap<String, Arc<FakeLink>>>,
    /// When set, `connect` and `resume` fail with `Unreachable`.
    pub unreachable: AtomicBool,
    /// Every `resume`: `(session_id, after_seq)`.
    pub resumed: Mutex<Vec<(String, Option<u64>)>>,
}

impl FakeConnector {
    /// The link of `session_id`.
    pub fn link(&self, session_id: &str) -> Arc<FakeLink> {
        Arc::clone(
            self.links
                .lock()
                .expect("lock")
                .get(session_id)
                .expect("a link for the session"),
        )
    }
}

impl FakeConnector {
    fn fresh_link(&self, session_id: &str) -> (DynLink, UnboundedReceiver<LinkEvent>) {
        let (tx, rx) = unbounded_channel();
        let link = Arc::new(FakeLink::default());
        *link.events.lock().expect("lock") = Some(tx);
        self.links
            .lock()
            .expect("lock")
            .insert(session_id.to_owned(), Arc::clone(&link));
        (link as DynLink, rx)
    }
}

impl AgentConnector for FakeConnector {
    fn connect<'a>(
        &'a self,
        _executor: &'a ExecutorConfig,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<(DynLink, UnboundedReceiver<LinkEvent>), LinkError>> {
        Box::pin(async move {
            if self.unreachable.load(Ordering::SeqCst) {
                return Err(LinkError::Unreachable("connection refused".into()));
            }
            Ok(self.fresh_link(session_id))
        })
    }

    /// A fresh fake link for the session (replacing any earlier one in `links`); the
    /// test pushes the `Reattached` a real link would report first.
    fn resume<'a>(
        &'a self,
        _executor: &'a ExecutorConfig,
        session_id: &'a str,
        after_seq: Option<u64>,
    ) -> BoxFuture<'a, Result<(DynLink, UnboundedReceiver<LinkEvent>), LinkError>> {
        Box::pin(async move {
            self.resumed
                .lock()
                .expect("lock")
                .push((session_id.to_owned(), after_seq));
            if self.unreachable.load(Ordering::SeqCst) {
                return Err(LinkError::Unreachable("connection refused".into()));
            }
            Ok(self.fresh_link(session_id))
        })
    }
}

/// An app on in-memory SQLite with a fake connector; `env` is the flag env tier.
pub async fn app_with(
    env: BTreeMap<String, String>,
    config: Config,
) -> (AppState, Arc<FakeConnector>) {
    let stores = memory_stores().await;
    let flags = FlagService::new(
        Profile::Dev,
        Profiles::empty(),
        env,
        StoredOverrides(stores.flag_overrides.clone()),
    );
    let connector = Arc::new(FakeConnector::default());
    let state = AppState::new(
        stores,
        config,
        flags,
        Arc::clone(&connector) as Arc<dyn AgentConnector>,
    );
    (state, connector)
}

/// A second app over `stores` (another process on the same database), with the default
/// config and its own fake connector.
pub async fn app_on(stores: Stores) -> (AppState, Arc<FakeConnector>) {
    let flags = FlagService::new(
        Profile::Dev,
        Profiles::empty(),
        BTreeMap::new(),
        StoredOverrides(stores.flag_overrides.clone()),
    );
    let connector = Arc::new(FakeConnector::default());
    let state = AppState::new(
        stores,
        Config::default(),
        flags,
        Arc::clone(&connector) as Arc<dyn AgentConnector>,
    );
    (state, connector)
}

/// Every store on one in-memory SQLite database.
pub async fn memory_stores() -> Stores {
    Stores::from_engine(Arc::new(
        crate::store::sqlite::SqliteDb::memory()
            .await
            .expect("in-memory database"),
    ))
}

/// [`app_with`] with no flag env var and the default config.
pub async fn app() -> (AppState, Arc<FakeConnector>) {
    app_with(BTreeMap::new(), Config::default()).await
}

/// Polls `check` until it returns `Some`, failing after two seconds.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    within(what, std::time::Duration::from_secs(2), check).await
}

/// Polls `check` until it returns `Some`, failing after `within`, naming `what`: the test
/// kit's one poll loop ([`kandev_testkit::wait::poll_until`]).
pub async fn within<T, F, Fut>(what: &str, within: std::time::Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    kandev_testkit::wait::poll_until(what, within, check).await
}
