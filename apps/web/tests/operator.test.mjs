// The operator surface of docs/architecture.md §13, full stack: Cancel (the agent gets
// `{"action":"cancel"}`), who asks (the agent's id and ACP agentInfo, the tool call), and
// the history of settled questions with answer, outcome, by whom and when.
// (tests/fixtures/scenarios/settle-each-way.json settles five questions five ways.)

import assert from "node:assert/strict";
import { test } from "node:test";
import { elicitationResults, screenshot, sessionWithPendingClarification, waitFor, waitForElicitationResult, withKandev } from "./harness.mjs";

const FLAG_ON = { KANDEV_FEATURES_ACP_ELICITATION: "true" };
const T = { timeout: 120_000 };

async function openSession(page, kandev, sessionId) {
  await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.getByTestId("session-view").waitFor();
  await recordOutcomes(page);
}

/**
 * Keep every outcome the line shows, in order: a question the agent withdraws 100 ms after
 * it opens replaces the previous outcome sooner than a loaded machine may poll the page.
 */
async function recordOutcomes(page) {
  const outcome = page.getByTestId("clarification-outcome");
  await outcome.waitFor({ state: "attached" });
  await outcome.evaluate((el) => {
    window.__outcomes = { shown: [], seen: 0 };
    new MutationObserver(() => window.__outcomes.shown.push(el.dataset.outcome))
      .observe(el, { attributes: true, attributeFilter: ["data-outcome"] });
  });
}

/**
 * The next outcome shown (after the last one this waited for) is `kind`; outcomes listed in
 * `passing` may come first (a question withdrawn before or after the page showed it).
 */
async function outcomeIs(page, kind, { passing = [] } = {}) {
  const next = () => page.evaluate(() => {
    const o = window.__outcomes;
    return o.shown.length > o.seen ? o.shown[o.seen++] : null;
  });
  for (;;) {
    const shown = await waitFor(next, { message: `outcome ${kind}`, timeout: 20_000 }).catch(async (err) => {
      const all = await page.evaluate(() => window.__outcomes.shown);
      throw new Error(`${err.message}; shown so far: ${JSON.stringify(all)}`);
    });
    if (shown !== kind && passing.includes(shown)) continue;
    assert.equal(shown, kind, `the next outcome shown; line now: ${await page.getByTestId("clarification-outcome").textContent()}`);
    return;
  }
}

test("Cancel reaches the agent as {action: cancel}; a second cancel is 404 from agentctl", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:single");
    await openSession(page, kandev, session.id);
    await page.getByTestId("clarification-overlay").waitFor();
    await page.getByTestId("clarification-cancel").click();
    await outcomeIs(page, "cancelled");
    assert.deepEqual(await waitForElicitationResult(kandev.agentLog), { action: "cancel" });
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    const card = page.getByTestId(`clarification-card-${record.pending_id}`);
    await card.and(page.locator("[data-status=cancelled]")).waitFor();
    assert.match(await card.textContent(), /Cancelled by the operator/);

    const again = await fetch(`${kandev.apiUrl}/api/v1/clarifications/${record.pending_id}/cancel`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    assert.equal(again.status, 404);
    assert.equal((await again.json()).error?.origin ?? null, "agentctl");
    assert.equal(elicitationResults(kandev.agentLog).length, 1, "the agent got one answer");
    assert.deepEqual(page.errors, []);
  });
});

test("who asks: the card names the tool call the question belongs to and shows it in the chat", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:stream-while-asking", "Who asks");
    await openSession(page, kandev, session.id);
    const line = page.getByTestId("clarification-requester");
    await line.getByText(/for the tool call “Choose the datastore/).waitFor({ timeout: 15_000 });
    assert.equal(await line.getAttribute("data-tool-call-id"), "tool-7");
    await page.getByTestId("clarification-show-tool-call").click();
    assert.deepEqual(await page.evaluate(() => [document.activeElement?.dataset.testid, document.activeElement?.dataset.toolCallId]), ["message-tool-call", "tool-7"]);
    assert.deepEqual(page.errors, []);
  });
});

test("who asks: the card and the header name the agent by its id and its ACP agentInfo", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:single", "Named agent");
    const info = await waitFor(async () => (await kandev.api.session(session.id)).agent_info, { message: "agent_info on the session" });
    assert.equal(info.name, "mock-agent");
    await openSession(page, kandev, session.id);
    const line = page.getByTestId("clarification-requester");
    await line.waitFor();
    assert.match(await line.textContent(), new RegExp(`^Asked by mock \\(mock-agent ${info.version.replace(/\./g, "\\.")}\\) for the tool call tool-42`));
    assert.match(await page.getByTestId("session-agent").textContent(), /Agent: mock \(mock-agent /);
    await screenshot(page, "session-who-asks");
  });
});

test("history: each settled question with its answer, outcome, by whom and when (answered, skipped, agent cancelled, cancelled, withdrawn)", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:settle-each-way", "History");
    await openSession(page, kandev, session.id);
    const overlay = page.getByTestId("clarification-overlay");
    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    await outcomeIs(page, "answered");
    await page.getByTestId("clarification-custom-name").waitFor({ timeout: 20_000 });
    await page.getByTestId("clarification-skip").click();
    await outcomeIs(page, "declined");
    // e3 is withdrawn by the agent on its own; then e4 waits.
    await page.getByTestId("clarification-option-deploy-true").waitFor({ timeout: 20_000 });
    await page.getByTestId("clarification-cancel").click();
    await outcomeIs(page, "cancelled", { passing: ["withdrawn"] });
    await page.getByTestId("clarification-custom-region").waitFor({ timeout: 20_000 });
    await kandev.api.call("POST", `/api/v1/sessions/${session.id}/stop`, {});
    await overlay.waitFor({ state: "detached", timeout: 20_000 });

    const items = page.getByTestId("history-item");
    await waitFor(async () => (await items.count()) === 5, { message: "five settled questions", timeout: 20_000 });
    const rows = await items.evaluateAll((els) => els.map((el) => ({
      outcome: el.dataset.outcome,
      shown: el.querySelector("[data-testid=history-outcome]").textContent,
      answer: el.querySelector("[data-testid=history-answer]").textContent,
      by: el.querySelector("[data-testid=history-by]")?.textContent ?? null,
      when: Boolean(el.querySelector("time[datetime]")?.textContent),
    })));
    const local = "By the operator (no sign-in)";
    assert.deepEqual(rows, [
      { outcome: "answered", shown: "Answered", answer: "What the agent received:DatastoreSQLite", by: local, when: true },
      { outcome: "skipped", shown: "Skipped", answer: "No answer was given.", by: local, when: true },
      { outcome: "agent_cancelled", shown: "Withdrawn by the agent", answer: "No answer was given.", by: null, when: true },
      { outcome: "cancelled", shown: "Cancelled by the operator", answer: "No answer was given.", by: local, when: true },
      { outcome: "withdrawn", shown: "Closed: the session ended or the agent is gone", answer: "No answer was given.", by: null, when: true },
    ]);
    await screenshot(page, "session-history");
    // What the agent was told, in order: accept, decline, (its own cancel), cancel.
    const results = elicitationResults(kandev.agentLog);
    assert.deepEqual(results.slice(0, 2), [{ action: "accept", content: { question_0: "SQLite" } }, { action: "decline" }]);
    assert.deepEqual(results[3], { action: "cancel" });
    assert.deepEqual(page.errors, []);
  });
});
