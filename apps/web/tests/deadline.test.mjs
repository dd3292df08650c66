// Deadlines (docs/architecture.md §15), full stack: agentctl's answer deadline reaches the
// card as a live countdown naming what it brings, and the board lists the task waiting on
// the sooner deadline first.

import assert from "node:assert/strict";
import { test } from "node:test";
import { screenshot, sessionWithPendingClarification, waitFor, withKandev } from "./harness.mjs";

const T = { timeout: 120_000 };
// agentctl declines an unanswered question after this long.
const ENV = { KANDEV_FEATURES_ACP_ELICITATION: "true", KANDEV_ELICITATION_ANSWER_TIMEOUT: "50m" };

test("the card counts down to agentctl's deadline and says the agent is then declined", T, async () => {
  await withKandev({ env: ENV }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:single");
    const expires = Date.parse(record.expires_at);
    assert.ok(!Number.isNaN(expires), `the record carries expires_at: ${JSON.stringify(record)}`);
    const minutes = (expires - Date.parse(record.created_at)) / 60_000;
    assert.ok(minutes > 49 && minutes <= 50.1, `about 50 minutes after it was asked: ${minutes}`);
    // The page's clock is the test's: it is moved on four minutes below.
    await page.clock.install({ time: Date.now() });
    await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(session.id)}`);
    const line = page.getByTestId("clarification-deadline");
    await line.waitFor();
    const text = await line.textContent();
    assert.match(text, /^Declines in (49|50) min$/, text);
    assert.equal(await line.getAttribute("data-expires-at"), record.expires_at);
    await page.clock.fastForward("04:00");
    await waitFor(async () => /^Declines in (45|46) min$/.test(await line.textContent()), { message: "the countdown to move" })
      .catch(async (err) => { throw new Error(`${err.message}; shows ${await line.textContent()}`); });
    await screenshot(page, "deadline-countdown");
  });
});

test("an agent whose deadline cancels has a card that says so", T, async () => {
  await withKandev({ env: { ...ENV, KANDEV_AGENTS__MOCK__ON_DEADLINE: "cancel" } }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:single");
    assert.equal(record.on_deadline, "cancel", `agentctl said what its deadline answers: ${JSON.stringify(record)}`);
    await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(session.id)}`);
    const line = page.getByTestId("clarification-deadline");
    await line.waitFor();
    assert.match(await line.textContent(), /^Cancels in (49|50) min$/);
  });
});

test("the board lists the task waiting on the soonest deadline first", T, async () => {
  await withKandev({ env: ENV }, async ({ kandev, page }) => {
    const first = await sessionWithPendingClarification(kandev, "/e2e:single");
    const second = await sessionWithPendingClarification(kandev, "/e2e:single");
    assert.ok(first.record.expires_at < second.record.expires_at, "asked first, expires first");
    await page.goto(`${kandev.url}/#/`);
    const order = async () => page.getByTestId("task-row").evaluateAll((rows) => rows.map((r) => r.dataset.taskId));
    await waitFor(async () => {
      const ids = await order();
      return ids.indexOf(first.task.id) === 0 && ids.indexOf(second.task.id) === 1;
    }, { message: "the sooner deadline first" }).catch(async (err) => {
      throw new Error(`${err.message}; rows: ${JSON.stringify(await order())}`);
    });
    const deadline = await page.locator(`[data-task-id="${first.task.id}"]`).getAttribute("data-deadline");
    assert.equal(Date.parse(deadline), Date.parse(first.record.expires_at));
  });
});
