// Unit tests (Node, no browser) of the answer card's truthful rules: the content the agent
// will receive (the same rule as kandev-elicitation's build_response), secrets, pattern
// checks that fail closed, and the waits and resolutions of triage.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { askedAgo } from "../static/needs-you.js";
import { isResolved } from "../static/notifications.js";
import { buildPayload, deliveredContent, hasOwnPrompt, isSecret, maskedContent, validate } from "../static/answer-rules.js";

const fixture = (name) => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));

describe("what the agent will receive", () => {
  const single = fixture("elicitation-single");
  const multi = fixture("elicitation-multi");

  test("a selection alone is its const; typed Other text goes to the companion and replaces the selection", () => {
    const q = single.questions;
    assert.deepEqual(deliveredContent(q, buildPayload(q, { question_0: { selected: ["Postgres"], text: "" } })), { question_0: "Postgres" });
    assert.deepEqual(deliveredContent(q, buildPayload(q, { question_0: { selected: ["Postgres"], text: "  CockroachDB " } })), { question_0_custom: "CockroachDB" });
    assert.deepEqual(deliveredContent(q, buildPayload(q, {})), {});
  });

  test("multi-select: declaration order, whatever the click order", () => {
    const q = multi.questions;
    assert.deepEqual(deliveredContent(q, buildPayload(q, { question_1: { selected: ["prod", "dev"], text: "" } })), { question_1: ["dev", "prod"] });
  });

  test("typed kinds are JSON-typed; text on options without a companion is dropped", () => {
    const q = [
      { id: "b", kind: "boolean", options: [] },
      { id: "n", kind: "integer", options: [] },
      { id: "s", kind: "single_select", options: [{ id: "a", label: "A" }] },
    ];
    const payload = { answers: [
      { question_id: "b", selected_options: [], custom_text: "true" },
      { question_id: "n", selected_options: [], custom_text: " 3 " },
      { question_id: "s", selected_options: [], custom_text: "dropped" },
    ] };
    assert.deepEqual(deliveredContent(q, payload), { b: true, n: 3 });
  });

  test("secrets: by format, writeOnly or key; masked wherever shown", () => {
    assert.equal(isSecret({ id: "apiKey" }), true);
    assert.equal(isSecret({ id: "GITHUB_TOKEN" }), true);
    assert.equal(isSecret({ id: "password" }), true);
    assert.equal(isSecret({ id: "pin", constraints: { format: "password" } }), true);
    assert.equal(isSecret({ id: "x", constraints: { write_only: true } }), true);
    assert.equal(isSecret({ id: "name" }), false);
    const q = [{ id: "apiKey", kind: "text", options: [] }];
    assert.deepEqual(maskedContent(q, { apiKey: "sk-live-1" }), { apiKey: "••••••" });
  });

  test("a prompt that is only the request message is not the field's own", () => {
    const record = { message: "Configure it." };
    assert.equal(hasOwnPrompt(record, { id: "a", prompt: "Configure it." }), false);
    assert.equal(hasOwnPrompt(record, { id: "a", title: "A", prompt: "A" }), false);
    assert.equal(hasOwnPrompt(record, { id: "a", prompt: "How many?" }), true);
  });
});

describe("patterns are ECMA-262 and fail closed", () => {
  const question = (pattern) => ({ id: "env", kind: "text", options: [], constraints: { pattern } });
  test("lookahead and a backreference: prod-45 refused, prod-44 accepted", () => {
    const q = question("^prod-(?=[0-9]+$)([0-9])\\1$");
    assert.equal(validate({}, q, { text: "prod-45" })?.key, "clar.err.pattern");
    assert.equal(validate({}, q, { text: "prod-44" }), null);
  });
  test("a pattern that does not compile refuses every answer, in words, with the pattern behind", () => {
    const problem = validate({}, question("(unclosed"), { text: "anything" });
    assert.equal(problem?.key, "clar.err.patternUnusable");
    assert.equal(problem?.pattern, "(unclosed");
    assert.equal(validate({}, question("(unclosed"), { text: "" }), null, "left empty, an optional field is fine");
  });
});

describe("triage", () => {
  test("how long a question has waited, in words", () => {
    const now = Date.parse("2026-12-02T10:00:00Z");
    assert.equal(askedAgo("2026-12-02T09:59:40Z", now), "asked just now");
    assert.equal(askedAgo("2026-12-02T09:56:00Z", now), "asked 4 min ago");
    assert.equal(askedAgo("2026-12-02T07:00:00Z", now), "asked 3 h ago");
  });
});

test("a question's notification is resolved once its session has no question open from then", () => {
  const n = { event: "session.clarification_requested", session_id: "s1", created_at: "2026-12-02T10:00:01Z" };
  assert.equal(isResolved(n, [{ session_id: "s1", created_at: "2026-12-02T10:00:00Z" }]), false);
  assert.equal(isResolved(n, [{ session_id: "s2", created_at: "2026-12-02T10:00:00Z" }]), true);
  assert.equal(isResolved(n, [{ session_id: "s1", created_at: "2026-12-02T10:05:00Z" }]), true, "a later question has its own notification");
  assert.equal(isResolved({ ...n, event: "session.turn_finished" }, []), false);
});
