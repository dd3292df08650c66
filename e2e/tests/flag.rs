//! The runtime flag `features.acpElicitation` at full stack: off by default (the spec's
//! §K control), the Settings toggle applies to the next session (§K), the env lock (409),
//! AC-01, AC-02, AC-20.

use kandev_testkit::kandev::TURN_DEADLINE;
use kandev_testkit::{Kandev, KandevOptions, bins};
use serde_json::{Value, json};

const PROSE: &str = "I don't have the AskUserQuestion tool available in this session";

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

/// agentctl's checked-in flag-off capability fixture of one agent family (AC-02).
fn capability_fixture(name: &str) -> String {
    let path = bins::repo_root()
        .join("crates/agentctl/tests/fixtures/capabilities")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim_end()
        .to_owned()
}

/// The clientCapabilities the agent received in `initialize`, from its own frame log.
fn initialize_capabilities(kandev: &Kandev) -> Value {
    kandev
        .frames()
        .initialize()
        .expect("the agent received initialize")["params"]["clientCapabilities"]
        .clone()
}

#[tokio::test]
async fn flag_off_by_default_no_elicitation_capability_and_demo_agent_asks_in_prose_section_k_control_ac_02()
 {
    // Two more agent families on the mock agent: their capabilities are agentctl's.
    let mock = bins::mock_agent().display().to_string();
    let kandev = Kandev::start(KandevOptions::new().toml(&format!(
        "[agents.cursor-acp]\ncommand = [{mock:?}]\n[agents.claude-acp]\ncommand = [{mock:?}]\n"
    )))
    .await;
    let flag = kandev.flag().await;
    assert_eq!(flag["value"], false, "{flag}");
    assert_eq!(flag["locked"], false, "{flag}");
    assert_eq!(flag["mutable"], true, "{flag}");
    assert_eq!(flag["restart_required"], false, "{flag}");

    let (_, session) = kandev
        .task_with_session("mock", "Pick a colour for me")
        .await;
    let sid = id(&session);
    let text = kandev.wait_agent_text(&sid, PROSE).await;
    assert!(text.contains("Pick a colour — Red or Blue?"), "{text}");
    let session = kandev.wait_session_state(&sid, "IDLE").await;

    // AC-02 at the wire: exactly the pinned flag-off capabilities, no `elicitation` key.
    let caps = &session["client_capabilities"];
    assert!(caps.get("elicitation").is_none(), "{caps}");
    assert_eq!(caps, &json!({"_meta": {"terminal_output": true}}));
    assert_eq!(caps.to_string(), capability_fixture("default.json"));
    assert_eq!(
        initialize_capabilities(&kandev),
        *caps,
        "session shows what was sent"
    );
    assert!(kandev.frames().elicitation_requests().is_empty());
    assert!(kandev.clarifications(&sid, None).await.is_empty());
    assert_eq!(session["pending_action"], Value::Null);

    // AC-02 for each agent family: its pinned fixture byte for byte, also as stored.
    let task = kandev.create_task("capabilities per family").await;
    for (agent, fixture) in [
        ("cursor-acp", "cursor-acp.json"),
        ("claude-acp", "default.json"),
    ] {
        let session = kandev.start_session(&id(&task), agent, None).await;
        let caps = &session["client_capabilities"];
        assert_eq!(
            caps.to_string(),
            capability_fixture(fixture),
            "{agent}: byte for byte"
        );
        assert!(caps.get("elicitation").is_none(), "{agent}: {caps}");
        let stored = kandev.session(&id(&session)).await;
        assert_eq!(
            stored["client_capabilities"].to_string(),
            capability_fixture(fixture),
            "{agent}: the store gives it back byte for byte"
        );
    }
}

#[tokio::test]
async fn flag_patch_on_applies_to_the_next_session_which_advertises_form_and_asks_a_structured_question_section_k_ac_01()
 {
    let kandev = Kandev::start_default().await;
    let task = kandev.create_task("settings toggle").await;
    let tid = id(&task);

    // A session started before the toggle keeps its snapshot (off).
    let before = kandev
        .try_start_session(&tid, "mock", Some("Pick a colour"))
        .await
        .expect_status(201, "session before");
    kandev.wait_agent_text(&id(&before), PROSE).await;

    let patched = kandev
        .set_flag_override(json!(true))
        .await
        .expect_status(200, "PATCH on");
    assert_eq!(
        (&patched["value"], &patched["source"]),
        (&json!(true), &json!("override")),
        "{patched}"
    );
    let flag = kandev.flag().await;
    assert_eq!(flag["value"], true, "PATCH answered {patched}; now {flag}");
    assert_eq!(flag["source"], "override", "{flag}");

    let ws = kandev.ws().await;
    let after = kandev
        .try_start_session(&tid, "mock", Some("Pick a colour"))
        .await
        .expect_status(201, "session after");
    let sid = id(&after);
    let pending = kandev.wait_pending(&sid, 1).await;
    let record = &pending[0];
    assert_eq!(record["source"], "elicitation");
    assert_eq!(record["tool_call_id"], "toolu-ask-colour");
    assert_eq!(record["questions"][0]["id"], "question_0");
    assert_eq!(record["questions"][0]["kind"], "single_select");
    assert_eq!(record["questions"][0]["title"], "Colour");

    // AC-01: `elicitation.form` is an object in what the agent received, and nothing else changed.
    let session = kandev.session(&sid).await;
    let caps = &session["client_capabilities"];
    assert_eq!(
        caps,
        &json!({"_meta": {"terminal_output": true}, "elicitation": {"form": {}}}),
        "flag on adds elicitation.form and nothing else"
    );
    let sent: Vec<Value> = kandev
        .frames()
        .frames()
        .into_iter()
        .filter(|f| f.dir == "recv" && f.method() == Some("initialize"))
        .map(|f| f.frame["params"]["clientCapabilities"].clone())
        .collect();
    assert_eq!(sent.len(), 2, "two sessions, two initializes");
    assert!(
        sent[0].get("elicitation").is_none(),
        "first session: {}",
        sent[0]
    );
    assert!(
        sent[1]["elicitation"]["form"].is_object(),
        "second: {}",
        sent[1]
    );
    assert!(sent[1]["elicitation"].get("url").is_none(), "never url");
    assert_eq!(
        &sent[1], caps,
        "the session reports exactly what initialize sent"
    );
    assert_eq!(session["flags"], json!({"features.acpElicitation": true}));
    ws.wait_for_type("clarification.created", TURN_DEADLINE, |d| {
        d["pending_id"] == record["pending_id"]
    })
    .await;

    // PATCH null clears the override again: the next session is off, the running one
    // keeps its snapshot.
    kandev
        .set_flag_override(Value::Null)
        .await
        .expect_status(200, "PATCH null");
    assert_eq!(kandev.flag().await["value"], false);
    let back = kandev.start_session(&tid, "mock", None).await;
    assert!(back["client_capabilities"].get("elicitation").is_none());

    // §K: the answer continues the same turn and the agent acts on it.
    let pid = record["pending_id"].as_str().expect("pending_id");
    let r = kandev.answer(pid, &[("question_0", &["Red"], "")]).await;
    assert_eq!(r.status, 200, "{r}");
    kandev.wait_agent_text(&sid, "You picked Red.").await;
    kandev.wait_session_state(&sid, "IDLE").await;
    // Three sessions, two of them prompted once each: the answer added no session/prompt.
    assert_eq!(kandev.frames().prompt_requests().len(), 2);
    assert_eq!(
        kandev.session(&sid).await["flags"],
        json!({"features.acpElicitation": true})
    );

    // The earlier session is untouched: still no capability.
    let first = kandev.session(&id(&before)).await;
    assert!(first["client_capabilities"].get("elicitation").is_none());
}

#[tokio::test]
async fn flag_env_lock_makes_patch_409_and_keeps_the_env_value() {
    let kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let flag = kandev.flag().await;
    assert_eq!(flag["value"], true, "{flag}");
    assert_eq!(flag["source"], "env", "{flag}");
    assert_eq!(flag["locked"], true, "{flag}");
    for value in [json!(false), json!(true), Value::Null] {
        let r = kandev.set_flag_override(value.clone()).await;
        assert_eq!(r.status, 409, "PATCH {value} while env-locked: {r}");
        assert_eq!(r.body["error"]["code"], "FLAG_LOCKED", "{r}");
    }
    assert_eq!(kandev.flag().await["value"], true, "unchanged");
    // Sessions follow the env value.
    let task = kandev.create_task("locked").await;
    let session = kandev.start_session(&id(&task), "mock", None).await;
    assert_eq!(
        session["client_capabilities"]["elicitation"],
        json!({"form": {}})
    );
    let unknown = kandev
        .api()
        .patch(
            "/api/v1/runtime-flags/features.nope",
            &json!({"override": true}),
        )
        .await;
    assert_eq!(unknown.status, 404, "{unknown}");
}

#[tokio::test]
async fn ac_20_flag_off_an_unadvertised_form_elicitation_is_declined_with_no_message_pending_action_or_notification()
 {
    let kandev = Kandev::start(KandevOptions::new().flag_env(false)).await;
    let ws = kandev.ws().await;
    let (task, session) = kandev.task_with_session("mock", "/e2e:single").await;
    let sid = id(&session);
    assert!(session["client_capabilities"].get("elicitation").is_none());
    let response = kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(response, json!({"action": "decline"}));
    let session = kandev.wait_session_state(&sid, "IDLE").await;
    assert_eq!(session["pending_action"], Value::Null);
    assert!(kandev.clarifications(&sid, None).await.is_empty());
    let all = kandev
        .api()
        .get("/api/v1/clarifications")
        .await
        .expect_status(200, "list clarifications");
    assert_eq!(
        all["clarifications"],
        json!([]),
        "no record anywhere: {all}"
    );
    let messages = kandev.messages(&sid).await;
    assert!(
        messages
            .iter()
            .all(|m| m["type"] != "clarification_request"),
        "{messages:?}"
    );
    assert!(
        kandev.notifications().await.is_empty(),
        "no notification for a declined elicitation"
    );
    assert!(ws.of_type("clarification.created").is_empty());
    assert_eq!(kandev.task(&id(&task)).await["pending_action"], Value::Null);
}
