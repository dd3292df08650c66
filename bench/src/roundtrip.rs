//! The round-trip bench: N sequential elicitations of the two-question bridge form,
//! timed by the agent from writing `elicitation/create` to reading its response.
//!
//! - full stack: agent → agentctl → kandev → operator WebSocket `clarification.created`
//!   → the bench POSTs `/respond` (on a free one of a few keep-alive connections) →
//!   kandev → agentctl → agent;
//! - baseline: the same agent under a standalone agentctl, answered by the bench
//!   straight over the agent stream (`agent.elicitations.respond` on
//!   `elicitation_requested`), no backend.
//!
//! A full-stack pass with the timing events on also yields the per-hop [`Breakdown`].
//!
//! [`interleaved`] runs the paths in turns (direct, each engine, direct, …), so a slow
//! stretch of a shared machine falls on every path alike and the ratios hold still.

use std::collections::HashMap;

use futures::{SinkExt, StreamExt};
use kandev_testkit::RemoteAgentctl;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::agent::wall_ns;
use crate::breakdown::{
    AGENT_RECEIVED, AGENT_SENT, Breakdown, OPERATOR_ANSWERED, OPERATOR_POSTED, OPERATOR_SEEN,
    Timeline,
};
use crate::collector::Collector;
use crate::engine::{Engine, durability_from_log};
use crate::operator::{KeepAlive, clarifications_created};
use crate::stack::{AGENT_ID, STALL, Stack, agent_command, start_kandev, start_session};

/// The answer both paths send: question_0 = Postgres, question_1 = [prod, dev].
pub fn bridge_answers() -> Value {
    json!([
        {"question_id": "question_0", "selected_options": ["Postgres"], "custom_text": ""},
        {"question_id": "question_1", "selected_options": ["prod", "dev"], "custom_text": ""}
    ])
}

/// The form a round trip asks with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The spec's two-question bridge form.
    Bridge,
    /// A 64-question form mixing every kind of the vocabulary (the mapping's limit).
    SixtyFour,
    /// Not an elicitation: one question through the `ask_user_question_kandev` MCP tool.
    ToolCall,
}

/// The operator's answer to every field of the 64-question form.
const SIXTY_FOUR_ANSWER: &str = include_str!("../fixtures/sixty-four-answer.json");

impl Form {
    /// The agent's prompt word and the reports' tag.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Bridge => ("rt", "full"),
            Self::SixtyFour => ("rt64", "full64"),
            Self::ToolCall => ("mcp", "fullmcp"),
        }
    }

    /// The operator's respond body.
    fn answer(self) -> Result<Value, String> {
        match self {
            Self::Bridge => {
                Ok(json!({"answers": bridge_answers(), "rejected": false, "reject_reason": ""}))
            }
            Self::SixtyFour => serde_json::from_str(SIXTY_FOUR_ANSWER)
                .map_err(|err| format!("the 64-question answer fixture: {err}")),
            // The record names its one question `q1`.
            Self::ToolCall => Ok(json!({"answers": [{"question_id": "q1",
                "selected_options": ["Yes"], "custom_text": ""}], "rejected": false, "reject_reason": ""})),
        }
    }
}

/// Keep-alive connections the operator client answers on, as a browser keeps several
/// per host: an answer never waits for the HTTP response to the one before it.
const CONNECTIONS: usize = 4;

/// One agent `rt` report.
#[derive(Debug, Clone, Copy)]
struct Rtt {
    seq: usize,
    ms: f64,
    sent_us: u64,
    recv_us: u64,
}

fn ns_field(report: &Value, field: &str) -> Option<u128> {
    report[field].as_str().and_then(|s| s.parse().ok())
}

/// Reads `total` `rt` reports of `tag`.
async fn collect_rtts(
    collector: &mut Collector,
    tag: &str,
    total: usize,
) -> Result<Vec<Rtt>, String> {
    let mut rtts = Vec::with_capacity(total);
    while rtts.len() < total {
        let seen = rtts.len();
        let report = collector.next(STALL).await.ok_or_else(|| {
            format!("{tag}: no agent report for {STALL:?} after {seen} of {total} round trips")
        })?;
        if report["kind"] != "rt" || report["tag"] != tag {
            if report["kind"] == "stray" || report["kind"] == "unknown_prompt" {
                return Err(format!("{tag}: agent reported {report}"));
            }
            continue;
        }
        if report["action"] != "accept" {
            return Err(format!("{tag}: the agent got {report}, not an accept"));
        }
        let (Some(rtt), Some(sent), Some(recv)) = (
            ns_field(&report, "rtt_ns"),
            ns_field(&report, "sent_ns"),
            ns_field(&report, "recv_ns"),
        ) else {
            return Err(format!("{tag}: bad report {report}"));
        };
        rtts.push(Rtt {
            seq: report["seq"].as_u64().unwrap_or(0) as usize,
            ms: rtt as f64 / 1e6,
            sent_us: (sent / 1000) as u64,
            recv_us: (recv / 1000) as u64,
        });
    }
    Ok(rtts)
}

fn measured(rtts: &[Rtt], warmup: usize) -> Vec<f64> {
    rtts.iter()
        .filter(|r| r.seq >= warmup)
        .map(|r| r.ms)
        .collect()
}

/// What one full-stack pass measured.
#[derive(Debug, Clone)]
pub struct FullStack {
    /// The round trips after the warm-up, ms.
    pub samples: Vec<f64>,
    /// Time to visible after the warm-up: the agent writes `elicitation/create` → the
    /// operator's WebSocket reads its `clarification.created`, ms.
    pub visible: Vec<f64>,
    /// With the timing events on: where the time went.
    pub breakdown: Option<Breakdown>,
    /// The commit settings kandev reported for its database.
    pub durability: Option<String>,
}

/// What the operator client saw of one elicitation.
struct Answered {
    pending_id: String,
    message: String,
    seen_ns: u128,
    posted_ns: u128,
    answered_ns: u128,
}

/// The full-stack round trip on `engine`: `n` measured after `warmup`; with `timing`,
/// kandev and agentctl log their hops and the pass returns the breakdown too.
pub async fn full_stack(
    n: usize,
    warmup: usize,
    engine: Engine,
    timing: bool,
    form: Form,
) -> Result<FullStack, String> {
    let (word, tag) = form.words();
    let mut collector = Collector::start()
        .await
        .map_err(|err| format!("collector: {err}"))?;
    let kandev = start_kandev(Stack {
        report: collector.addr(),
        engine,
        timing,
        remote: None,
        replica: None,
    })
    .await?;
    let mut created = clarifications_created(kandev.addr()).await?;
    let (free, mut connections) = mpsc::unbounded_channel::<KeepAlive>();
    for _ in 0..CONNECTIONS {
        let http = KeepAlive::connect(kandev.addr())
            .await
            .map_err(|err| format!("connect: {err}"))?;
        let _ = free.send(http);
    }
    let total = n + warmup;
    let answer = form.answer()?;
    start_session(&kandev, &format!("{word} {total} {tag}")).await?;
    let operator = async {
        let mut posts = Vec::with_capacity(total);
        for i in 0..total {
            let event = tokio::time::timeout(STALL, created.recv())
                .await
                .ok()
                .flatten()
                .ok_or_else(|| {
                    format!("full stack: no clarification.created #{i} within {STALL:?}")
                })?;
            let mut http = connections
                .recv()
                .await
                .ok_or("full stack: the operator's connections are gone")?;
            let (free, answer) = (free.clone(), answer.clone());
            posts.push(tokio::spawn(async move {
                let pending = event.data["pending_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let posted_ns = wall_ns();
                let response = http
                    .post(
                        &format!("/api/v1/clarifications/{pending}/respond"),
                        &answer,
                    )
                    .await;
                let answered_ns = wall_ns();
                let _ = free.send(http);
                match response {
                    Ok((200, body)) if body["status"] == "answered" => Ok(Answered {
                        pending_id: pending,
                        message: event.data["message"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        seen_ns: event.seen_ns,
                        posted_ns,
                        answered_ns,
                    }),
                    other => Err(format!("respond #{i}: {other:?}")),
                }
            }));
        }
        let mut answered = Vec::with_capacity(total);
        for post in posts {
            answered.push(post.await.map_err(|err| format!("respond task: {err}"))??);
        }
        Ok::<_, String>(answered)
    };
    let (answered, rtts) = tokio::join!(operator, collect_rtts(&mut collector, tag, total));
    // The agent's report says more than the operator's wait when both failed.
    let rtts = rtts?;
    let answered = answered?;
    let log = kandev.log();
    let by_message: HashMap<String, &Rtt> = rtts
        .iter()
        .map(|r| (format!("{tag}/{}", r.seq), r))
        .collect();
    let visible = answered
        .iter()
        .filter_map(|a| by_message.get(&a.message).map(|r| (a, r)))
        .filter(|(_, r)| r.seq >= warmup)
        .map(|(a, r)| (a.seen_ns / 1000).saturating_sub(u128::from(r.sent_us)) as f64 / 1e3)
        .collect();
    let breakdown = timing.then(|| {
        let mut timeline = Timeline::from_log(&log);
        let mut ids = Vec::new();
        for a in &answered {
            let Some(rtt) = by_message.get(&a.message) else {
                continue;
            };
            if rtt.seq < warmup {
                continue;
            }
            let us = |ns: u128| (ns / 1000) as u64;
            timeline.add(&a.pending_id, AGENT_SENT, rtt.sent_us);
            timeline.add(&a.pending_id, AGENT_RECEIVED, rtt.recv_us);
            timeline.add(&a.pending_id, OPERATOR_SEEN, us(a.seen_ns));
            timeline.add(&a.pending_id, OPERATOR_POSTED, us(a.posted_ns));
            timeline.add(&a.pending_id, OPERATOR_ANSWERED, us(a.answered_ns));
            ids.push(a.pending_id.as_str());
        }
        timeline.breakdown(ids)
    });
    Ok(FullStack {
        samples: measured(&rtts, warmup),
        visible,
        breakdown,
        durability: durability_from_log(&log),
    })
}

/// The baseline: a standalone agentctl, answered over the agent stream.
pub async fn baseline(n: usize, warmup: usize) -> Result<Vec<f64>, String> {
    let mut collector = Collector::start()
        .await
        .map_err(|err| format!("collector: {err}"))?;
    let agentctl = RemoteAgentctl::start(&[("RUST_LOG", "warn")]).await;
    let url = format!("ws://{}/api/v1/agent/stream", agentctl.addr());
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|err| format!("{url}: {err}"))?;
    let bearer = format!("Bearer {}", agentctl.token())
        .parse()
        .map_err(|err| format!("token header: {err}"))?;
    request.headers_mut().insert("Authorization", bearer);
    // Read as kandev's own agent link reads the stream, so the two paths differ only in
    // what kandev adds.
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(kandev_agent_stream::READ_BUFFER_BYTES);
    let (socket, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true)
        .await
        .map_err(|err| format!("agent stream {url}: {err}"))?;
    let (mut write, mut read) = socket.split();
    let total = n + warmup;
    let start = json!({"id": "start", "type": "request", "action": "agent.session.start", "payload": {
        "session_id": "bench-baseline",
        "agent": {"id": AGENT_ID, "command": agent_command()?,
                  "env": {crate::agent::REPORT_ENV: collector.addr().to_string()}},
        "flags": {"features.acpElicitation": true}}});
    let prompt = json!({"id": "prompt", "type": "request", "action": "agent.prompt",
        "payload": {"text": format!("rt {total} base")}});
    // The prompt goes only once the session is bound to this stream.
    for frame in [start, prompt] {
        let id = frame["id"].clone();
        write
            .send(Message::text(frame.to_string()))
            .await
            .map_err(|err| format!("agent stream send: {err}"))?;
        loop {
            let reply = tokio::time::timeout(STALL, read.next())
                .await
                .ok()
                .flatten()
                .and_then(Result::ok)
                .ok_or_else(|| format!("agent stream: no reply to {id} within {STALL:?}"))?;
            let Message::Text(text) = reply else {
                continue;
            };
            let reply: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
            if reply["id"] == id {
                if reply["type"] != "response" {
                    return Err(format!("agent stream: {id} answered {reply}"));
                }
                break;
            }
        }
    }
    let answers = bridge_answers();
    let answerer = tokio::spawn(async move {
        let mut k = 0u64;
        while let Some(Ok(message)) = read.next().await {
            let Message::Text(text) = message else {
                continue;
            };
            let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            if frame["type"] == "error" {
                return Err(format!("agent stream error: {frame}"));
            }
            let payload = &frame["payload"];
            if payload["event"] == "elicitation_requested" {
                k += 1;
                let respond = json!({"id": format!("r{k}"), "type": "request",
                    "action": "agent.elicitations.respond", "payload": {
                        "pending_id": payload["pending_id"], "answers": answers,
                        "rejected": false, "reject_reason": ""}});
                if write
                    .send(Message::text(respond.to_string()))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
        Ok(())
    });
    let rtts = collect_rtts(&mut collector, "base", total).await;
    if !answerer.is_finished() {
        answerer.abort();
    } else if let Ok(Err(err)) = answerer.await {
        return Err(err);
    }
    drop(agentctl);
    rtts.map(|rtts| measured(&rtts, warmup))
}

/// How `n` measured round trips are shared among `rounds` turns: as evenly as possible,
/// the first turns taking the remainder; never a turn of none.
pub fn turns(n: usize, rounds: usize) -> Vec<usize> {
    let rounds = rounds.clamp(1, n.max(1));
    (0..rounds)
        .map(|i| n / rounds + usize::from(i < n % rounds))
        .collect()
}

/// The sequential round trips of the direct path and of each engine's full stack.
#[derive(Debug)]
pub struct Interleaved {
    /// The direct path, ms.
    pub baseline: Result<Vec<f64>, String>,
    /// Per engine of the call, in its order.
    pub full: Vec<Result<FullStack, String>>,
}

/// `n` round trips per path in `rounds` turns: the direct path, then each of `engines`,
/// and again; each turn starts its own processes and discards its own `warmup`. A path
/// that breaks stops taking turns and reports the break.
pub async fn interleaved(
    n: usize,
    warmup: usize,
    rounds: usize,
    engines: &[Engine],
) -> Interleaved {
    let mut baseline: Result<Vec<f64>, String> = Ok(Vec::with_capacity(n));
    let mut full: Vec<Result<FullStack, String>> = engines
        .iter()
        .map(|_| {
            Ok(FullStack {
                samples: Vec::with_capacity(n),
                visible: Vec::with_capacity(n),
                breakdown: None,
                durability: None,
            })
        })
        .collect();
    let all = turns(n, rounds);
    for (round, &size) in all.iter().enumerate() {
        eprintln!(
            "kandev-bench: round trip, turn {} of {}: {size} per path",
            round + 1,
            all.len()
        );
        if let Ok(samples) = &mut baseline {
            match self::baseline(size, warmup).await {
                Ok(more) => samples.extend(more),
                Err(err) => baseline = Err(format!("turn {}: {err}", round + 1)),
            }
        }
        for (&engine, path) in engines.iter().zip(full.iter_mut()) {
            let Ok(sofar) = path else { continue };
            match full_stack(size, warmup, engine, false, Form::Bridge).await {
                Ok(pass) => {
                    sofar.samples.extend(pass.samples);
                    sofar.visible.extend(pass.visible);
                    sofar.durability = sofar.durability.take().or(pass.durability);
                }
                Err(err) => *path = Err(format!("turn {}: {err}", round + 1)),
            }
        }
    }
    Interleaved { baseline, full }
}

#[cfg(test)]
mod tests {
    use super::turns;
    use proptest::prelude::*;

    #[test]
    fn a_run_is_shared_evenly_among_its_turns() {
        assert_eq!(turns(1000, 5), [200; 5]);
        assert_eq!(turns(10, 3), [4, 3, 3]);
        assert_eq!(turns(2, 5), [1, 1]);
        assert_eq!(turns(7, 0), [7]);
    }

    proptest! {
        #[test]
        fn turns_add_up_and_differ_by_at_most_one(n in 1usize..5000, rounds in 0usize..50) {
            let t = turns(n, rounds);
            prop_assert_eq!(t.iter().sum::<usize>(), n);
            prop_assert!(t.iter().all(|&k| k > 0));
            let (lo, hi) = (t.iter().min().copied().unwrap_or(0), t.iter().max().copied().unwrap_or(0));
            prop_assert!(hi - lo <= 1);
        }
    }
}
