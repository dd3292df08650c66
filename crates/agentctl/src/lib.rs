//! # kandev-agentctl
//!
//! agentctl runs one ACP agent subprocess per session and serves the **agent stream**
//! (docs/architecture.md §4.2) to the Kandev backend. It is the only process that holds the
//! agent's open ACP requests, so it is where "exactly one response per
//! `elicitation/create`" is won or lost.
//!
//! - [`server`]: the axum WebSocket at `/api/v1/agent/stream` (bearer token, compared in
//!   constant time; 401 before the upgrade) and `GET /healthz`.
//! - [`session`]: one agent session: the ACP client ([`agent`]), its pending
//!   elicitations ([`pending`]) and its event outbox ([`outbox`]), which sends a burst of
//!   streamed text as one event ([`streamed_text`]).
//! - [`capabilities`]: the one function that builds `initialize`'s `clientCapabilities`
//!   from the agent id and the session's `FlagSnapshot` (sent raw, byte for byte).
//! - [`config`]: the answer deadline and ACP idle timeout from agentctl's environment.
//! - [`mcp`] and [`questions`]: the per-session MCP server with the
//!   `ask_user_question_kandev` tool (the clarification path beside elicitation, F3),
//!   and `agentctl mcp-stdio`, its stdio bridge; [`mcp_servers`]: the agent's own MCP
//!   servers (`agents.<id>.mcp_servers`), listed beside it in `session/new`.
//! - [`debug_cli`]: `agentctl elicitation map|respond`, the mapping on stdin/stdout.
//! - [`metrics`]: the Prometheus counters and gauges `agentctl serve --metrics` serves.
//!
//! ## One elicitation
//!
//! The agent sends `elicitation/create`. agentctl decides from the raw params: flag off,
//! not form mode, request scope, malformed, zero questions or too large → `decline` at
//! once, and only `elicitation_declined` with the reason's name is emitted (counted by
//! the backend; nothing reaches an operator). Otherwise it parks the ACP responder under a
//! fresh, time-ordered UUID v7 `pending_id` and emits `elicitation_requested`. Whoever
//! *removes* that pending from the session's [`pending::PendingSet`] is the only one allowed
//! to respond:
//!
//! | who | ACP response | `elicitation_settled.outcome` |
//! |---|---|---|
//! | `agent.elicitations.respond` (valid, F10) | `accept` / `decline` | `answered` / `declined` |
//! | the answer deadline (`KANDEV_ELICITATION_ANSWER_TIMEOUT`) | `decline` | `timed_out` |
//! | the agent's `$/cancel_request` | `cancel` | `agent_cancelled` |
//! | `agent.cancel` (after `session/cancel`) | `cancel` | `turn_cancelled` |
//! | `agent.shutdown`, SIGTERM, SIGINT | `cancel` | `shutdown` |
//! | the agent process exiting | none possible (`null`) | `agent_exited` |
//!
//! An invalid answer is refused with `INVALID_ANSWER` and the pending stays answerable;
//! a second answer finds nothing and gets `NOT_FOUND`. An accepted answer's success
//! response is sent before its `elicitation_settled`, so the backend records the
//! operator's answer first and the event then finds the record settled.
//!
//! ## One `ask_user_question_kandev` call
//!
//! Each session serves an MCP server on `127.0.0.1:<free port>/mcp` (streamable HTTP,
//! its own bearer token) and lists it in `session/new`'s `mcpServers`: `type: http` with
//! an `Authorization` header when the agent's `initialize` result has
//! `agentCapabilities.mcpCapabilities.http: true`, else a stdio server running
//! `agentctl mcp-stdio` with `KANDEV_MCP_URL` / `KANDEV_MCP_TOKEN` in its env. A call
//! with valid input (1–4 questions, 2–6 distinct options each, non-empty prompts; ids
//! `q1…` filled in) gets a fresh `request_id`, is emitted as `ask_user_question_requested`
//! and waits; invalid input is a tool error naming the rule. The call returns:
//!
//! | who | tool result | `ask_user_question_settled.outcome` |
//! |---|---|---|
//! | `agent.questions.respond` | `{"status": "answered", "answers": [...]}` / `{"status": "rejected"}` | `answered` / `declined` |
//! | `agent.questions.cancel` | error `{"status": "operator_cancelled"}` | `operator_cancelled` |
//! | `KANDEV_ASK_USER_QUESTION_TIMEOUT` (default 2h) | error `{"status": "timed_out"}` | `timed_out` |
//! | the MCP client cancelling or hanging up | (nobody reads it) | `agent_cancelled` |
//! | `agent.cancel` | error `{"status": "turn_cancelled"}` | `turn_cancelled` |
//! | `agent.shutdown`, SIGTERM, SIGINT / the agent exiting | error | `shutdown` / `agent_exited` |
//!
//! A waiting call counts as agent activity for the idle timeout. The backend owns the
//! record (its own id, dedup, the answer rules) and names every call waiting on it in one
//! respond or cancel; agentctl takes those calls together, so of two operators answering
//! at once one returns them all and the other gets `NOT_FOUND`. An operator's settlement
//! echoes the answer and `answered_by`, and the backend writes the record from it.
//!
//! ## Sessions outlive streams
//!
//! A stream is bound to a session by `agent.session.start` or `agent.session.attach`.
//! When it drops, the agent keeps running and pending elicitations stay answerable;
//! events (numbered per session; the number is the notification's envelope `id`) are
//! kept, up to 10,000 undelivered, and flushed in order after the attach response. An
//! attach may carry `after_seq` (the last event number the backend processed) to get
//! every later event again, including ones handed to a stream that was already dying.
//! A newer stream attaching closes the older one.
//!
//! ## By hand
//!
//! ```text
//! AGENTCTL_TOKEN=secret agentctl serve --listen 127.0.0.1:7740
//! websocat -H 'Authorization: Bearer secret' ws://127.0.0.1:7740/api/v1/agent/stream
//! {"id":"1","type":"request","action":"agent.session.start","payload":{"session_id":"s1","agent":{"id":"mock","command":["target/debug/mock-agent"]},"flags":{"features.acpElicitation":true}}}
//! {"id":"2","type":"request","action":"agent.prompt","payload":{"text":"/e2e:single"}}
//! {"id":"3","type":"request","action":"agent.elicitations.respond","payload":{"pending_id":"<from elicitation_requested>","answers":[{"question_id":"question_0","selected_options":["Postgres"]}]}}
//! ```

pub mod agent;
pub mod capabilities;
pub mod config;
pub mod debug_cli;
pub mod mcp;
pub mod mcp_servers;
pub mod metrics;
pub mod outbox;
pub mod pending;
pub mod questions;
pub mod server;
pub mod session;
pub mod streamed_text;
