// Full-stack browser tests of the ask_user_question_kandev path (docs/architecture.md §6 F3,
// AC-57): the mock agent calls the MCP tool agentctl serves, the backend raises a
// clarification with source "ask_user_question", and the operator answers it in the same
// surface as an elicitation, under this path's rules. What the agent got back is read from
// its own report in the chat (`ask_user_question a1 result: <JSON>`).

import assert from "node:assert/strict";
import { test } from "node:test";
import { screenshot, sessionWithPendingClarification, waitFor, withKandev } from "./harness.mjs";

const T = { timeout: 120_000 };
const PREFIX = "ask_user_question a1 result: ";

async function openSession(page, kandev, sessionId) {
  await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.getByTestId("session-view").waitFor();
}

/** The JSON the mock reported for its tool call a1. */
async function toolResult(kandev, sessionId) {
  return waitFor(async () => {
    const messages = await kandev.api.messages(sessionId);
    for (const m of messages) {
      const at = m.author_type === "agent" ? (m.content ?? "").indexOf(PREFIX) : -1;
      if (at < 0) continue;
      const rest = m.content.slice(at + PREFIX.length);
      // The JSON is followed by the scenario's next text ("Done.") in the same message.
      for (let end = rest.length; end > 0; end--) {
        if (rest[end - 1] !== "}") continue;
        try {
          return JSON.parse(rest.slice(0, end));
        } catch {
          // not the end of the object yet
        }
      }
    }
    return null;
  }, { timeout: 20_000, message: "the tool result reported by the agent" });
}

test("AC-57 full stack: an ask_user_question_kandev call opens the same surface; typing clears the choice and only the text reaches the agent", T, async () => {
  // The flag stays off: this path never depends on elicitation.
  await withKandev({}, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:ask", "Pick storage");
    assert.equal(record.source, "ask_user_question");
    await openSession(page, kandev, session.id);
    const overlay = page.getByTestId("clarification-overlay");
    await overlay.waitFor();
    assert.equal(await overlay.getAttribute("data-source"), "ask_user_question");
    const postgres = page.getByTestId("clarification-option-q1-Postgres");
    const custom = page.getByTestId("clarification-custom-q1");
    await postgres.check();
    await custom.fill("CockroachDB");
    assert.equal(await postgres.isChecked(), false, "typing cleared the selection (mutual exclusion)");
    await postgres.check();
    assert.equal(await custom.inputValue(), "", "choosing cleared the text");
    await custom.fill("  CockroachDB ");
    await screenshot(page, "ask-user-question-full-stack");
    await page.getByTestId("clarification-submit").click();
    const result = await toolResult(kandev, session.id);
    assert.deepEqual(result, {
      status: "answered",
      answers: [{ question_id: "q1", prompt: "Which database should the new service use?", selected_option: null, custom_text: "CockroachDB" }],
    });
    await overlay.waitFor({ state: "detached" });
    const card = page.getByTestId(`clarification-card-${record.pending_id}`);
    await waitFor(async () => (await card.getAttribute("data-status")) === "answered", { message: "card answered" });
    assert.deepEqual(page.errors, []);
  });
});

test("AC-57 full stack: a chosen option reaches the agent; Skip returns rejected", T, async () => {
  await withKandev({}, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:ask", "Pick storage");
    await openSession(page, kandev, session.id);
    await page.getByTestId("clarification-overlay").waitFor();
    await page.getByTestId("clarification-option-q1-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    const result = await toolResult(kandev, session.id);
    assert.equal(result.answers[0].selected_option, "SQLite");
    assert.equal(result.answers[0].custom_text, null);

    const second = await sessionWithPendingClarification(kandev, "/e2e:ask", "Skip storage");
    await openSession(page, kandev, second.session.id);
    await page.getByTestId("clarification-overlay").waitFor();
    await page.getByTestId("clarification-skip").click();
    const skipped = await toolResult(kandev, second.session.id);
    assert.equal(skipped.status, "rejected");
    const card = page.getByTestId(`clarification-card-${second.record.pending_id}`);
    await waitFor(async () => (await card.getAttribute("data-status")) === "declined", { message: "card declined" });
    assert.deepEqual(page.errors, []);
  });
});
