//! The extended form vocabulary (docs/architecture.md §7) at full stack: a boolean, an integer
//! with bounds that is required, and a number, answered through the API as text, arrive
//! at the agent as JSON of the schema's types; out-of-range, unparseable and missing
//! required answers are 400 and leave the pending open.

use kandev_testkit::{Kandev, KandevOptions, TURN_DEADLINE};
use serde_json::{Value, json};

fn question<'a>(record: &'a Value, id: &str) -> &'a Value {
    record["questions"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["id"] == id))
        .unwrap_or_else(|| panic!("question {id} in {record}"))
}

#[tokio::test]
async fn extended_vocabulary_boolean_bounded_required_integer_and_number_arrive_typed_and_out_of_range_is_400()
 {
    let kandev = Kandev::start(KandevOptions::new().flag_env(true)).await;
    let asked = kandev.ask("mock", "/e2e:extended").await;
    let confirm = question(&asked.record, "confirm");
    assert_eq!(confirm["kind"], "boolean");
    assert_eq!(confirm["default"], false);
    let replicas = question(&asked.record, "replicas");
    assert_eq!(replicas["kind"], "integer");
    assert_eq!(replicas["required"], true);
    // Bounds are JSON numbers (the record may spell 1 as 1.0).
    assert_eq!(
        replicas["constraints"]["minimum"].as_f64(),
        Some(1.0),
        "{replicas}"
    );
    assert_eq!(
        replicas["constraints"]["maximum"].as_f64(),
        Some(10.0),
        "{replicas}"
    );
    let ratio = question(&asked.record, "ratio");
    assert_eq!(ratio["kind"], "number");

    let pid = asked.pending_id.as_str();
    for (answers, why) in [
        (vec![("replicas", "11")], "above maximum"),
        (vec![("replicas", "0")], "below minimum"),
        (vec![("replicas", "three")], "not an integer"),
        (vec![("replicas", "2.5")], "not an integer"),
        (
            vec![("replicas", "3"), ("confirm", "maybe")],
            "not a boolean",
        ),
        (
            vec![("replicas", "3"), ("ratio", "1.5")],
            "ratio above maximum",
        ),
        (vec![("confirm", "true")], "required replicas missing"),
    ] {
        let triples: Vec<(&str, &[&str], &str)> = answers
            .iter()
            .map(|(id, text)| (*id, &[][..], *text))
            .collect();
        let r = kandev.answer(pid, &triples).await;
        assert_eq!(r.status, 400, "{why}: {r}");
        assert_eq!(r.body["error"]["code"], "INVALID_ANSWER", "{why}: {r}");
    }
    assert_eq!(kandev.clarification(pid).await["status"], "pending");
    assert!(
        kandev.frames().elicitation_responses().is_empty(),
        "nothing sent yet"
    );

    let r = kandev
        .answer(
            pid,
            &[
                ("confirm", &[], "true"),
                ("replicas", &[], " 7 "),
                ("ratio", &[], "0.25"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{r}");
    let got = kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(
        got,
        json!({"action": "accept", "content": {"confirm": true, "replicas": 7, "ratio": 0.25}})
    );
    let content = &got["content"];
    assert!(content["confirm"].is_boolean());
    assert!(content["replicas"].is_u64() || content["replicas"].is_i64());
    assert!(content["ratio"].is_f64());
}
