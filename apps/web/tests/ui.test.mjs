// Full-stack browser tests: the operator UI in headless chromium against a real kandev with
// the real agentctl and mock-agent. What reaches the agent is read from the mock agent's
// frame log (MOCK_AGENT_LOG), so each test asserts the operator's gesture end to end.

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  elicitationResults,
  screenshot,
  sessionWithPendingClarification,
  startRemoteAgentctl,
  startTcpProxy,
  waitFor,
  waitForElicitationResult,
  withKandev,
} from "./harness.mjs";

const FLAG_ON = { KANDEV_FEATURES_ACP_ELICITATION: "true" };
const T = { timeout: 120_000 };

test("kandev serves the embedded UI at / with the right content types", T, async () => {
  await withKandev({}, async ({ kandev }) => {
    const index = await fetch(`${kandev.apiUrl}/`);
    assert.equal(index.status, 200);
    assert.match(index.headers.get("content-type"), /^text\/html/);
    assert.match(await index.text(), /<script type="module" src="\/app.js">/);
    for (const [file, type] of [["/app.js", /^text\/javascript/], ["/clarification.js", /^text\/javascript/], ["/style.css", /^text\/css/]]) {
      const res = await fetch(`${kandev.apiUrl}${file}`);
      assert.equal(res.status, 200, file);
      assert.match(res.headers.get("content-type"), type, file);
    }
  });
});

async function openSession(page, kandev, sessionId) {
  await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.getByTestId("session-view").waitFor();
}

test("AC-09: a pending elicitation on a running session shows only task-state-waiting-for-input on the board", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    await page.goto(`${kandev.url}/#/`);
    await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();
    // Created after the board is open: the row and its state arrive over the WebSocket.
    const { task } = await sessionWithPendingClarification(kandev, "/e2e:single", "Pick a datastore");
    const row = page.locator(`[data-testid=task-row][data-task-id="${task.id}"]`);
    await row.getByTestId("task-state-waiting-for-input").waitFor({ timeout: 15_000 });
    assert.equal(await row.getByTestId("task-state-running").count(), 0);
    assert.equal(await row.getByTestId("task-state-background-running").count(), 0);
    assert.equal(await row.locator("[data-testid^=task-state-]").count(), 1, "exactly one state icon");
    await screenshot(page, "board-waiting-for-input");
    assert.deepEqual(page.errors, []);
  });
});

test("AC-55: multi-select clicked prod then dev reaches the agent as [\"dev\",\"prod\"]", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:multi");
    await openSession(page, kandev, session.id);
    const overlay = page.getByTestId("clarification-overlay");
    await overlay.waitFor();
    await page.getByTestId("clarification-option-question_1-prod").click();
    await page.getByTestId("clarification-option-question_1-dev").click();
    assert.equal(await page.getByTestId("clarification-option-question_1-prod").isChecked(), true, "the second click did not replace the first");
    await screenshot(page, "session-ac55-multi-select");
    await page.getByTestId("clarification-submit").click();
    const outcome = page.getByTestId("clarification-outcome");
    await waitFor(async () => (await outcome.getAttribute("data-outcome")) === "answered",
      { message: "the answered outcome", timeout: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}; shown: ${await outcome.textContent()}`);
    });
    const result = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(result, { action: "accept", content: { question_1: ["dev", "prod"] } });
    await overlay.waitFor({ state: "detached" });
    assert.deepEqual(page.errors, []);
  });
});

test("AC-56: a zero-option question renders the free-text field alone and submits {apiKey: T}", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:mcp-apikey");
    await openSession(page, kandev, session.id);
    const overlay = page.getByTestId("clarification-overlay");
    await overlay.waitFor();
    assert.equal(await overlay.locator("input[type=radio], input[type=checkbox], .options").count(), 0, "no empty option list");
    await page.getByTestId("clarification-custom-apiKey").fill("sk-test-123");
    await screenshot(page, "session-ac56-zero-option");
    await page.getByTestId("clarification-submit").click();
    const result = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(result, { action: "accept", content: { apiKey: "sk-test-123" } });
    await overlay.waitFor({ state: "detached" });
  });
});

test("AC-12i: a selection plus custom text reaches the agent as the trimmed companion only", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:single");
    await openSession(page, kandev, session.id);
    await page.getByTestId("clarification-overlay").waitFor();
    await page.getByTestId("clarification-option-question_0-Postgres").check();
    await page.getByTestId("clarification-custom-question_0").fill("  CockroachDB ");
    assert.equal(await page.getByTestId("clarification-option-question_0-Postgres").isChecked(), false, "Other text unticks the option it overrides (issue 26)");
    await page.getByTestId("clarification-submit").click();
    const result = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(result, { action: "accept", content: { question_0_custom: "CockroachDB" } });
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    // The chat card shows the settled outcome.
    const card = page.getByTestId(`clarification-card-${record.pending_id}`);
    await waitFor(async () => (await card.getAttribute("data-status")) === "answered", { message: "card answered" });
    await screenshot(page, "session-answered-card");
  });
});

test("Skip sends rejected:true and the agent receives decline", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:single");
    await openSession(page, kandev, session.id);
    await page.getByTestId("clarification-overlay").waitFor();
    await page.getByTestId("clarification-skip").click();
    const result = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(result, { action: "decline" });
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    const card = page.getByTestId(`clarification-card-${record.pending_id}`);
    await waitFor(async () => (await card.getAttribute("data-status")) === "declined", { message: "card declined" });
  });
});

test("Settings: the flag toggle applies to the next session, which asks a structured question", T, async () => {
  await withKandev({}, async ({ kandev, page }) => {
    // Flag off (profile e2e): the demo agent falls back to prose (§K control).
    const before = await kandev.api.createTask("Before the toggle");
    const prose = await kandev.api.startSession(before.id, "hello");
    await waitFor(async () => (await kandev.api.messages(prose.id)).some((m) => m.content.includes("I don't have the AskUserQuestion tool")),
      { timeout: 20_000, message: "the prose fallback" });

    // A newcomer finds the flag from the board.
    await page.goto(`${kandev.url}/#/`);
    const hint = page.getByTestId("board-flag-hint");
    await hint.waitFor();
    await screenshot(page, "board-flag-off-hint");
    await hint.getByRole("link").click();
    const toggle = page.getByTestId("flag-toggle-features.acpElicitation");
    await toggle.waitFor();
    assert.equal(await toggle.isChecked(), false);
    assert.match(await page.getByTestId("settings-applies-next").textContent(), /sessions started after/);
    await toggle.check();
    await waitFor(async () => (await kandev.api.flags()).find((f) => f.key === "features.acpElicitation")?.value === true,
      { message: "flag on in the API" });
    await page.getByTestId("flag-source-features.acpElicitation").and(page.getByText(/set here/)).waitFor();
    await screenshot(page, "settings-flag-on");

    // A new task and session from the board, with the configured agent.
    await page.goto(`${kandev.url}/#/`);
    await page.getByTestId("task-row").first().waitFor();
    assert.equal(await hint.isHidden(), true, "the hint is gone once the flag is on");
    await page.getByTestId("create-task-title").fill("Choose a colour");
    await page.getByTestId("create-task-description").fill("Demo: the agent asks a structured question.");
    await page.getByTestId("create-task-submit").click();
    const row = page.locator("[data-testid=task-row]").filter({ hasText: "Choose a colour" });
    await row.waitFor();
    await row.getByTestId("start-agent").selectOption("mock");
    await row.getByTestId("start-prompt").fill("Ask me to pick a colour");
    await row.getByTestId("start-session").click();
    await page.getByTestId("session-view").waitFor();
    await page.getByTestId("clarification-overlay").waitFor({ timeout: 20_000 });
    await page.getByTestId("clarification-option-question_0-Red").check();
    await screenshot(page, "session-demo-question");
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("chat").getByText("You picked Red.").waitFor({ timeout: 20_000 });
    await screenshot(page, "session-demo-answered");
    assert.deepEqual(page.errors, []);
  });
});

test("AC-64 in the UI: the surface is withdrawn when the answer deadline passes", T, async () => {
  await withKandev({ env: { ...FLAG_ON, KANDEV_ELICITATION_ANSWER_TIMEOUT: "3s" } }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:single");
    await openSession(page, kandev, session.id);
    const overlay = page.getByTestId("clarification-overlay");
    await overlay.waitFor();
    await overlay.waitFor({ state: "detached", timeout: 20_000 });
    assert.equal(await page.getByTestId("clarification-outcome").getAttribute("data-outcome"), "withdrawn");
    assert.deepEqual(elicitationResults(kandev.agentLog)[0], { action: "decline" });
    // The history says it timed out, and that no operator settled it.
    const item = page.getByTestId("history-item");
    await item.waitFor();
    assert.equal(await item.getAttribute("data-outcome"), "timed_out");
    assert.equal(await item.getByTestId("history-by").count(), 0);
    await screenshot(page, "session-deadline-withdrawn");
  });
});

test("AC-20a in the UI: while the agent stream is cut a submit shows 503 and the question stays open", T, async () => {
  const agentctl = await startRemoteAgentctl();
  const proxy = await startTcpProxy(agentctl.addr);
  try {
    await withKandev({ env: FLAG_ON, executor: { kind: "remote", url: proxy.url, token: agentctl.token } }, async ({ kandev, page }) => {
      const { session } = await sessionWithPendingClarification(kandev, "/e2e:single");
      await openSession(page, kandev, session.id);
      await page.getByTestId("clarification-overlay").waitFor();
      proxy.cut();
      await page.getByTestId("clarification-option-question_0-SQLite").check();
      await page.getByTestId("clarification-submit").click();
      const outcome = page.getByTestId("clarification-outcome");
      await waitFor(async () => (await outcome.getAttribute("data-outcome")) === "not_connected", { message: "the 503 outcome" });
      assert.match(await outcome.textContent(), /did not reach the agent; the question stays open/);
      assert.equal(await page.getByTestId("clarification-overlay").isVisible(), true);
      assert.equal(elicitationResults(kandev.agentLog).length, 0, "nothing reached the agent");
      await screenshot(page, "session-503-stream-cut");

      // Restored: the same question, answered again, now arrives.
      proxy.restore();
      await waitFor(async () => {
        if ((await outcome.getAttribute("data-outcome")) === "answered") return true;
        if (await page.getByTestId("clarification-submit").isEnabled()) await page.getByTestId("clarification-submit").click();
        return false;
      }, { timeout: 30_000, interval: 500, message: "the answer delivered after the stream is restored" });
      assert.deepEqual(await waitForElicitationResult(kandev.agentLog), { action: "accept", content: { question_0: "SQLite" } });
    });
  } finally {
    await proxy.close();
    await agentctl.stop();
  }
});

test("Notifications: a toast and a list entry for session.clarification_requested link to the session", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    await page.goto(`${kandev.url}/#/`);
    await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:single", "Notify me");
    const toast = page.getByTestId("toast").first();
    await toast.waitFor({ timeout: 15_000 });
    assert.equal(await toast.getAttribute("data-session-id"), session.id);
    await screenshot(page, "board-toast");
    await page.getByTestId("notifications-button").click();
    const item = page.getByTestId("notification-item").first();
    await item.waitFor();
    assert.equal(await item.getAttribute("data-event"), "session.clarification_requested");
    await screenshot(page, "notifications-panel");
    await item.getByTestId("notification-link").click();
    await page.getByTestId("clarification-overlay").waitFor();
    assert.equal(new URL(page.url()).hash, `#/sessions/${session.id}`);
  });
});

test("Session view: chat with agent text and tool calls, prompt box, cancel turn and stop session", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const task = await kandev.api.createTask("Plain run");
    const session = await kandev.api.startSession(task.id, "/e2e:plain");
    await openSession(page, kandev, session.id);
    await page.getByTestId("message-tool-call").first().waitFor({ timeout: 20_000 });
    await page.getByTestId("message-agent").first().waitFor();
    await page.getByTestId("prompt-input").fill("/e2e:plain");
    await page.getByTestId("prompt-send").click();
    await page.getByTestId("message-user").nth(1).waitFor({ timeout: 20_000 });
    await screenshot(page, "session-chat");
    await page.getByTestId("session-cancel").click();
    await page.getByTestId("session-notice").and(page.getByText(/Cancel requested|Something went wrong/)).waitFor();
    await page.getByTestId("session-stop").click();
    await waitFor(async () => ["COMPLETED", "CANCELLED"].includes((await kandev.api.session(session.id)).state), { message: "session stopped" });
    await page.locator("[data-testid=task-state-completed], [data-testid=task-state-cancelled]").first().waitFor();
    assert.equal(await page.getByTestId("prompt-send").isDisabled(), true);
  });
});

test("Board and settings are readable at 375px (phone width); an env-set flag is locked with its reason", T, async () => {
  await withKandev({ env: FLAG_ON, viewport: { width: 375, height: 812 } }, async ({ kandev, page }) => {
    await sessionWithPendingClarification(kandev, "/e2e:multi", "A task with a fairly long title that has to wrap on a phone");
    for (const [hash, name, ready] of [["#/", "board-375", "[data-testid=task-row]"], ["#/settings", "settings-375", "[data-testid^=flag-toggle-]"]]) {
      await page.goto(`${kandev.url}/${hash}`);
      await page.locator(ready).first().waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(overflow <= 0, `${hash} overflows by ${overflow}px`);
      await screenshot(page, name);
    }
    // The flag is set by the environment here: the toggle is locked and says why.
    assert.equal(await page.getByTestId("flag-toggle-features.acpElicitation").isDisabled(), true);
    assert.match(await page.getByTestId("flag-lock-features.acpElicitation").textContent(), /KANDEV_FEATURES_ACP_ELICITATION/);
  });
});
