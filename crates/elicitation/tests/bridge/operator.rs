//! The operator's side of the real-bridge conformance tests: the bridge's AskUserQuestion
//! forms as the operator sees them mapped, what an operator does with each question, and
//! what the tool must then record.

use kandev_elicitation::{Answer, MappedElicitation, OperatorAnswer, QuestionKind, map_request};
use serde_json::{Map, Value, json};

use crate::bridge::{Bridge, inputs};

/// Names of the AskUserQuestion question sets in `inputs.json`, each captured as
/// `v<version>-<name>.json`.
pub(crate) const SETS: [&str; 5] = ["single", "multi", "mixed", "three", "four"];

/// One AskUserQuestion question as the tool input carries it.
pub(crate) struct AskQuestion {
    pub(crate) text: String,
    pub(crate) multi: bool,
    pub(crate) labels: Vec<String>,
}

pub(crate) fn ask_questions(set: &Value) -> Vec<AskQuestion> {
    set.as_array()
        .expect("a question set is an array")
        .iter()
        .map(|q| AskQuestion {
            text: q["question"].as_str().expect("question text").to_owned(),
            multi: q["multiSelect"].as_bool().unwrap_or(false),
            labels: q["options"]
                .as_array()
                .expect("options")
                .iter()
                .map(|o| o["label"].as_str().expect("label").to_owned())
                .collect(),
        })
        .collect()
}

/// What the operator does with one AskUserQuestion question.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    /// Option labels in click order (deliberately not declaration order).
    pub(crate) picks: Vec<String>,
    /// Typed text, untrimmed.
    pub(crate) text: String,
}

/// The bridge's form, built by the real builder, as the operator sees it mapped.
pub(crate) struct Form {
    pub(crate) version: &'static str,
    pub(crate) questions: Vec<AskQuestion>,
    pub(crate) raw_questions: Value,
    pub(crate) request: Value,
    pub(crate) mapped: MappedElicitation,
}

/// The bridge call that builds the form of question set `set` of `inputs` (`inputs.json`).
pub(crate) fn build_call(inputs: &Value, set: &str) -> (&'static str, Value) {
    (
        "build",
        json!({
            "questions": inputs["question_sets"][set],
            "sessionId": inputs["session_id"],
            "toolCallId": inputs["tool_call_id"],
        }),
    )
}

pub(crate) fn build_forms(bridge: &Bridge, version: &'static str) -> Vec<(&'static str, Form)> {
    let inputs = inputs();
    let calls: Vec<(&str, Value)> = SETS.iter().map(|set| build_call(&inputs, set)).collect();
    let requests = bridge.batch(version, &calls);
    SETS.iter()
        .zip(requests)
        .map(|(set, request)| {
            let mapped = map_request(&request)
                .unwrap_or_else(|d| panic!("{version} {set}: the bridge form was declined: {d}"));
            let raw_questions = inputs["question_sets"][set].clone();
            let form = Form {
                version,
                questions: ask_questions(&raw_questions),
                raw_questions,
                request,
                mapped,
            };
            (*set, form)
        })
        .collect()
}

impl Form {
    pub(crate) fn marks_companions(&self) -> bool {
        self.version == "0.65.0"
    }

    /// The mapped question the operator reads as AskUserQuestion question `i`:
    /// the one whose prompt is that question's text (D10: the field description
    /// in a multi-question form, the request message in a single-question one).
    pub(crate) fn select_id(&self, i: usize) -> String {
        let text = &self.questions[i].text;
        let found: Vec<_> = self
            .mapped
            .questions
            .iter()
            .filter(|q| &q.prompt == text && q.kind.is_select())
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{}: one select question reads {text:?}",
            self.version
        );
        found[0].id.clone()
    }

    /// Where the operator types free text for question `i`: the select question
    /// itself when the bridge marked its companion (0.65.0), else the separate
    /// free-text question. In 0.101.0 the "Other" fields are indistinguishable by
    /// title and prompt, so the only link to their question is the key
    /// `<select key>_custom`, which is how the bridge names them.
    pub(crate) fn text_id(&self, i: usize) -> String {
        let select = self.select_id(i);
        if self.marks_companions() {
            return select;
        }
        let id = format!("{select}_custom");
        let q = self
            .mapped
            .question(&id)
            .unwrap_or_else(|| panic!("0.101.0 maps {id} as its own question"));
        assert_eq!(q.kind, QuestionKind::Text);
        id
    }

    /// The operator's submission for `intents`, addressed the way the mapped form
    /// presents the questions.
    pub(crate) fn operator_answer(&self, intents: &[Option<Intent>]) -> OperatorAnswer {
        let mut answers = Vec::new();
        for (i, intent) in intents.iter().enumerate() {
            let Some(intent) = intent else { continue };
            let select = self.select_id(i);
            let text = self.text_id(i);
            if text == select {
                answers.push(Answer {
                    question_id: select,
                    selected_options: intent.picks.clone(),
                    custom_text: intent.text.clone(),
                });
                continue;
            }
            if !intent.picks.is_empty() {
                answers.push(Answer {
                    question_id: select,
                    selected_options: intent.picks.clone(),
                    custom_text: String::new(),
                });
            }
            if !intent.text.is_empty() {
                answers.push(Answer {
                    question_id: text,
                    selected_options: Vec::new(),
                    custom_text: intent.text.clone(),
                });
            }
        }
        OperatorAnswer {
            answers,
            rejected: false,
            reject_reason: String::new(),
        }
    }

    /// What the tool should record: `(answers, annotations)` keyed by question text.
    pub(crate) fn expected(
        &self,
        intents: &[Option<Intent>],
    ) -> (Map<String, Value>, Map<String, Value>) {
        let mut answers = Map::new();
        let mut notes = Map::new();
        for (q, intent) in self.questions.iter().zip(intents) {
            let Some(intent) = intent else { continue };
            // Declaration order, whatever the click order (F12).
            let picks: Vec<&String> = q
                .labels
                .iter()
                .filter(|l| intent.picks.contains(l))
                .collect();
            let text = intent.text.trim();
            let recorded = if self.marks_companions() {
                // 0.65.0: typed text wins over the selection.
                if !text.is_empty() {
                    Some(text.to_owned())
                } else if !picks.is_empty() {
                    Some(join_plain(&picks))
                } else {
                    None
                }
            } else if q.multi {
                // 0.101.0 multi-select: the typed text joins the picks, quoted when
                // it holds the separator (the CLI's own serialization).
                let mut items: Vec<String> = picks.iter().map(|s| (*s).clone()).collect();
                if !text.is_empty() {
                    items.push(text.to_owned());
                }
                (!items.is_empty()).then(|| join_quoted(&items))
            } else if let Some(pick) = picks.first() {
                // 0.101.0 single-select: the pick stays the answer, the text a note.
                if !text.is_empty() {
                    notes.insert(q.text.clone(), json!({"notes": text}));
                }
                Some((*pick).clone())
            } else {
                (!text.is_empty()).then(|| text.to_owned())
            };
            if let Some(r) = recorded {
                answers.insert(q.text.clone(), Value::String(r));
            }
        }
        (answers, notes)
    }
}

pub(crate) fn join_plain(items: &[&String]) -> String {
    items
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn join_quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|s| {
            if s.contains(", ") || s.contains('"') {
                Value::String(s.clone()).to_string()
            } else {
                s.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A named operator behaviour over a whole form.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) intents: Vec<Option<Intent>>,
}

/// Clicks for question `q`: the first option for a single-select; for a
/// multi-select the last option, any option whose label holds the ", "
/// separator, then the first — so never in declaration order.
pub(crate) fn picks(q: &AskQuestion) -> Vec<String> {
    if !q.multi {
        return vec![q.labels[0].clone()];
    }
    let mut clicks = vec![q.labels[q.labels.len() - 1].clone()];
    clicks.extend(q.labels.iter().filter(|l| l.contains(", ")).cloned());
    clicks.push(q.labels[0].clone());
    clicks.dedup();
    clicks
}

pub(crate) fn scenarios(questions: &[AskQuestion]) -> Vec<Scenario> {
    let each = |f: &dyn Fn(usize, &AskQuestion) -> Option<Intent>| -> Vec<Option<Intent>> {
        questions.iter().enumerate().map(|(i, q)| f(i, q)).collect()
    };
    vec![
        Scenario {
            name: "selections only",
            intents: each(&|_, q| {
                Some(Intent {
                    picks: picks(q),
                    text: String::new(),
                })
            }),
        },
        Scenario {
            name: "custom text only, padded",
            intents: each(&|i, _| {
                Some(Intent {
                    picks: vec![],
                    text: format!("  my own answer {i} \n"),
                })
            }),
        },
        Scenario {
            name: "selection and custom text",
            intents: each(&|i, q| {
                Some(Intent {
                    picks: picks(q),
                    text: format!(" CockroachDB {i} "),
                })
            }),
        },
        Scenario {
            name: "custom text holding the separator",
            intents: each(&|_, q| {
                Some(Intent {
                    picks: picks(q),
                    text: "Redis, not Memcached".into(),
                })
            }),
        },
        Scenario {
            name: "whitespace-only text falls back to the selection",
            intents: each(&|_, q| {
                Some(Intent {
                    picks: picks(q),
                    text: "   ".into(),
                })
            }),
        },
        Scenario {
            name: "first question only",
            intents: each(&|i, q| {
                (i == 0).then(|| Intent {
                    picks: picks(q),
                    text: String::new(),
                })
            }),
        },
        Scenario {
            name: "mixed per question",
            intents: each(&|i, q| {
                Some(match i % 3 {
                    0 => Intent {
                        picks: picks(q),
                        text: String::new(),
                    },
                    1 => Intent {
                        picks: vec![],
                        text: " typed ".into(),
                    },
                    _ => Intent {
                        picks: picks(q),
                        text: "with a note".into(),
                    },
                })
            }),
        },
        Scenario {
            name: "nothing answered",
            intents: each(&|_, _| None),
        },
    ]
}
