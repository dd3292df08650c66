// Who answered a settled question, as the history shows it: an operator by name, an
// auto-answer rule (`rule:<name>`) and the deadline's choice (`deadline:<choice>`) each with
// their own badge kind.

import assert from "node:assert/strict";
import { test } from "node:test";
import { answererKind, settledBy } from "../static/history.js";

test("rules and deadline choices are told apart from operators", () => {
  assert.equal(answererKind("rule:confirm-deploys"), "rule");
  assert.equal(answererKind("deadline:defaults"), "deadline");
  assert.equal(answererKind("alice"), "operator");
  assert.equal(answererKind(undefined), "operator");
  assert.equal(settledBy({ answered_by: "rule:confirm-deploys" }), "confirm-deploys");
  assert.equal(settledBy({ answered_by: "deadline:defaults" }), "the deadline (the defaults were sent)");
  assert.equal(settledBy({ answered_by: "deadline:cancel" }), "the deadline (cancelled)");
  assert.equal(settledBy({ answered_by: "alice" }), "alice");
  assert.equal(settledBy({ answered_by: null }), null);
});
