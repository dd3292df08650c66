//! agentctl ⇄ mock-agent over real processes: the capabilities agentctl advertises in
//! `initialize`, flag on and off, asserted on the mock agent's own wire log against the
//! pinned fixtures.

use kandev_testkit::FrameLog;
use kandev_testkit::agentctl::{AgentCtl, Harness};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/capabilities/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .expect("fixture")
        .trim_end()
        .to_owned()
}

/// `received` has no `elicitation` and serializes to the pinned fixture `name`, byte for byte.
fn assert_is_fixture(received: &Value, name: &str) {
    assert!(received.get("elicitation").is_none(), "{name}: {received}");
    assert_eq!(
        serde_json::to_string(received).expect("json"),
        fixture(name)
    );
}

/// The `clientCapabilities` the agent received in `initialize`.
async fn received_capabilities(log: &FrameLog) -> Value {
    let initialize = log.wait_for_received("initialize").await;
    initialize["params"]["clientCapabilities"].clone()
}

/// A `plain` session of agent `agent_id` with the flag at `elicitation`; returns it and the
/// `clientCapabilities` its agent received.
async fn start_for(agent_id: &str, elicitation: bool) -> (Harness, Value) {
    let h = Harness::start_on(AgentCtl::start(&[]), "plain", elicitation, |payload| {
        payload["agent"]["id"] = json!(agent_id);
    })
    .await;
    let received = received_capabilities(&h.log).await;
    (h, received)
}

#[tokio::test]
async fn ac01_flag_on_initialize_advertises_elicitation_form_object() {
    let (h, received) = start_for("claude-acp", true).await;
    assert!(
        received["elicitation"]["form"].is_object(),
        "initialize carried {received}"
    );
    assert!(
        received["elicitation"].get("url").is_none(),
        "url is never advertised"
    );
    assert_eq!(
        h.started["client_capabilities"], received,
        "the start response reports exactly what was sent"
    );
    let session = h.started["acp_session_id"].as_str().unwrap_or_default();
    assert!(!session.is_empty(), "{}", h.started);
}

/// Flag off, agent `agent_id`'s `initialize` carries its fixture `name` byte for byte, and
/// the start response reports exactly that.
async fn flag_off_initialize_is_the_fixture(agent_id: &str, name: &str) {
    let (h, received) = start_for(agent_id, false).await;
    assert_is_fixture(&received, name);
    assert_eq!(h.started["client_capabilities"], received);
}

#[tokio::test]
async fn ac02_flag_off_default_agent_initialize_matches_fixture_byte_for_byte() {
    flag_off_initialize_is_the_fixture("claude-acp", "default.json").await;
}

#[tokio::test]
async fn ac02_flag_off_cursor_initialize_matches_fixture_byte_for_byte() {
    flag_off_initialize_is_the_fixture("cursor-acp", "cursor-acp.json").await;
}

#[tokio::test]
async fn ac02a_flag_on_cursor_is_its_fixture_plus_form_and_nothing_else() {
    let (_h, mut received) = start_for("cursor-acp", true).await;
    let elicitation = received
        .as_object_mut()
        .expect("object")
        .remove("elicitation");
    assert_eq!(elicitation, Some(json!({"form": {}})));
    assert_is_fixture(&received, "cursor-acp.json");
}

/// Runs `plain` (never elicits) to its end; returns the wire's method names, the
/// `initialize` request and the kinds of the events that reached the backend.
async fn plain_run(elicitation: bool) -> (Vec<String>, Value, Vec<Value>) {
    let mut h = Harness::start("plain", elicitation).await;
    h.prompt("hello").await;
    let events = h.stream.events_until("turn_completed").await;
    assert_eq!(
        events.last().expect("one")["payload"]["stop_reason"],
        "end_turn"
    );
    let kinds = events
        .iter()
        .map(|f| f["payload"]["event"].clone())
        .collect();
    let initialize = h.log.initialize().expect("initialize");
    (h.log.methods(), initialize, kinds)
}

#[tokio::test]
async fn ac19_never_eliciting_agent_sees_the_same_wire_with_flag_on_and_off() {
    let (on_methods, mut on_init, on_events) = plain_run(true).await;
    let (off_methods, mut off_init, off_events) = plain_run(false).await;
    assert_eq!(
        on_methods, off_methods,
        "ordered JSON-RPC method names differ"
    );
    assert!(on_methods.contains(&"recv session/prompt".to_owned()));
    assert_eq!(
        on_events, off_events,
        "the events reaching the backend differ"
    );
    // The only permitted difference: initialize's clientCapabilities.
    // JSON-RPC ids are random per run.
    let mut caps = Vec::new();
    for init in [&mut on_init, &mut off_init] {
        init.as_object_mut().expect("frame").remove("id");
        let params = init["params"].as_object_mut().expect("params");
        caps.push(params.remove("clientCapabilities"));
    }
    assert_eq!(
        on_init, off_init,
        "initialize differs outside clientCapabilities"
    );
    assert_ne!(caps[0], caps[1]);
}

#[tokio::test]
async fn f5_agentctl_reads_the_flag_from_session_start_never_from_its_environment() {
    // The env var must not leak into initialize.
    let env = [("KANDEV_FEATURES_ACP_ELICITATION", "true")];
    let h = Harness::start_env("single", false, &env).await;
    assert_is_fixture(&received_capabilities(&h.log).await, "default.json");
}
