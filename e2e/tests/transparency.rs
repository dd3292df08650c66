//! AC-19: an agent that never elicits behaves the same with the flag on and off — the
//! same ordered JSON-RPC method names, final session state, ordered message types and
//! `pending_action`; the only difference on the wire is `initialize`'s clientCapabilities.

use kandev_testkit::{Kandev, KandevOptions};
use serde_json::Value;

struct Run {
    methods: Vec<String>,
    initialize: Value,
    state: Value,
    pending_action: Value,
    message_types: Vec<(Value, Value)>,
    task_state: Value,
}

async fn run_plain(flag: bool) -> (Kandev, Run) {
    let kandev = Kandev::start(KandevOptions::new().flag_env(flag)).await;
    let (task, session) = kandev.task_with_session("mock", "/e2e:plain").await;
    let sid = session["id"].as_str().expect("id").to_owned();
    kandev
        .wait_agent_text(&sid, "nothing here needs your input")
        .await;
    let session = kandev.wait_session_state(&sid, "IDLE").await;
    // The turn's last frame is the prompt's response; wait until it is logged.
    kandev_testkit::poll_until(
        "the prompt response in the frame log",
        kandev_testkit::DEADLINE,
        || async {
            kandev
                .frames()
                .frames()
                .iter()
                .any(|f| f.dir == "send" && f.frame["result"]["stopReason"].is_string())
                .then_some(())
        },
    )
    .await;
    let messages = kandev.messages(&sid).await;
    let run = Run {
        methods: kandev.frames().methods(),
        initialize: kandev.frames().initialize().expect("initialize")["params"].clone(),
        state: session["state"].clone(),
        pending_action: session["pending_action"].clone(),
        message_types: messages
            .iter()
            .map(|m| (m["type"].clone(), m["author_type"].clone()))
            .collect(),
        task_state: kandev.task(task["id"].as_str().expect("id")).await["state"].clone(),
    };
    (kandev, run)
}

#[tokio::test]
async fn ac_19_a_non_eliciting_agent_runs_identically_with_the_flag_on_and_off() {
    let ((_off_kandev, off), (_on_kandev, on)) = tokio::join!(run_plain(false), run_plain(true));
    assert!(!off.methods.is_empty());
    assert_eq!(on.methods, off.methods, "ordered JSON-RPC method names");
    assert!(
        !on.methods.iter().any(|m| m.contains("elicitation")),
        "{:?}",
        on.methods
    );
    assert_eq!(on.state, off.state, "final session state");
    assert_eq!(on.state, "IDLE");
    assert_eq!(on.pending_action, off.pending_action);
    assert_eq!(on.pending_action, Value::Null);
    assert_eq!(on.message_types, off.message_types, "ordered message types");
    assert_eq!(on.task_state, off.task_state);

    // The only permitted difference: clientCapabilities in initialize.
    let mut a = on.initialize.clone();
    let mut b = off.initialize.clone();
    let caps_on = a
        .as_object_mut()
        .and_then(|o| o.remove("clientCapabilities"));
    let caps_off = b
        .as_object_mut()
        .and_then(|o| o.remove("clientCapabilities"));
    assert_eq!(a, b, "initialize differs only in clientCapabilities");
    let mut caps_on = caps_on.expect("caps on");
    let caps_off = caps_off.expect("caps off");
    assert!(caps_on["elicitation"]["form"].is_object());
    caps_on.as_object_mut().map(|o| o.remove("elicitation"));
    assert_eq!(
        caps_on, caps_off,
        "the capability is added, nothing else changes"
    );
}
