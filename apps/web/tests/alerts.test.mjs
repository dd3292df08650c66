// Waiting is visible away from the tab (issue 16 item 4): the tab title counts the
// questions waiting; after opting in under Settings a desktop notification names the task,
// never the question; an optional chime. The permission flow runs against chromium's
// real Notification API with a granted (context.grantPermissions) and a refused permission;
// an init script records each notification and chime, and plays a tab in the background.

import assert from "node:assert/strict";
import { test } from "node:test";
import { screenshot, sessionWithPendingClarification, sharedStack, skipAllPending, waitFor } from "./harness.mjs";

const T = { timeout: 120_000 };
const stack = sharedStack({ env: { KANDEV_FEATURES_ACP_ELICITATION: "true" } });
const QUESTION_TEXT = "Which database should the new service use?"; // /e2e:single's question

test("the tab title counts the waiting questions, from load and from events", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const first = await sessionWithPendingClarification(kandev, "/e2e:single", "Count one");
    await page.goto(`${kandev.url}/#/`);
    await waitFor(async () => (await page.title()) === "(1) Kandev · Board", { message: "(1) from the first load" });
    const second = await sessionWithPendingClarification(kandev, "/e2e:multi", "Count two");
    await waitFor(async () => (await page.title()) === "(2) Kandev · Board", { message: "(2) after clarification.created" });
    await page.goto(`${kandev.url}/#/sessions/${second.session.id}`);
    // On a session the tab names its task.
    await waitFor(async () => (await page.title()) === "(2) Count two · Kandev", { message: "the count on every page" });
    await kandev.api.call("POST", `/api/v1/clarifications/${first.record.pending_id}/respond`, { answers: [], rejected: true, reject_reason: "skipped" });
    await waitFor(async () => (await page.title()) === "(1) Count two · Kandev", { message: "(1) after clarification.settled" });
    await page.getByTestId("clarification-skip").click();
    await waitFor(async () => (await page.title()) === "Count two · Kandev", { message: "no count when nothing waits" });
    assert.deepEqual(page.errors, []);
  });
});

/** A page whose tab is in the background, recording notifications and chimes. */
async function backgroundPage(browser, { grant, origin }) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  if (grant) await context.grantPermissions(["notifications"], { origin });
  await context.addInitScript(() => {
    window.__notifications = [];
    window.__chimes = 0;
    const Real = window.Notification;
    class Recorded extends Real {
      constructor(title, options = {}) {
        super(title, options);
        window.__notifications.push({ title, body: options.body, tag: options.tag, open: () => this.onclick?.() });
      }
    }
    window.Notification = Recorded;
    const start = OscillatorNode.prototype.start;
    OscillatorNode.prototype.start = function (...args) {
      window.__chimes += 1;
      return start.apply(this, args);
    };
    // The operator is elsewhere: the tab is hidden and not focused.
    Object.defineProperty(document, "visibilityState", { get: () => "hidden" });
    Object.defineProperty(document, "hidden", { get: () => true });
    document.hasFocus = () => false;
  });
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (err) => page.errors.push(String(err)));
  return page;
}

test("desktop notification after opting in (permission granted): names the task, never the question; chime; click opens the session", T, async () => {
  const { kandev, browser } = stack;
  const page = await backgroundPage(browser, { grant: true, origin: kandev.url });
  try {
    await page.goto(`${kandev.url}/#/settings`);
    const desktop = page.getByTestId("alerts-desktop");
    assert.equal(await desktop.isChecked(), false, "off until the operator opts in");
    // The scenario's precondition. Once, under the whole suite's load, the switch came back
    // off straight after the click, as it does when the browser refuses the permission.
    await waitFor(() => page.evaluate(() => Notification.permission === "granted"), { message: "the context's granted permission reaches the page" });
    await desktop.check();
    await page.getByTestId("alerts-desktop-status").and(page.getByText("Desktop notifications are on.")).waitFor();
    await page.getByTestId("alerts-sound").check();
    await waitFor(() => page.evaluate(() => window.__chimes === 1), { message: "the chime is played once when turned on" });
    await screenshot(page, "settings-alerts-on");
    await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();

    const { session } = await sessionWithPendingClarification(kandev, "/e2e:single", "Deploy the payments service");
    const [shown] = await waitFor(() => page.evaluate(() => (window.__notifications.length ? window.__notifications.map(({ title, body, tag }) => ({ title, body, tag })) : null)),
      { message: "a desktop notification" });
    assert.equal(shown.title, "Kandev: input needed");
    assert.equal(shown.body, "The agent working on “Deploy the payments service” is waiting for your answer.");
    assert.ok(!`${shown.title} ${shown.body}`.includes(QUESTION_TEXT), "never the question text");
    assert.ok(shown.tag, "tagged by question");
    await waitFor(() => page.evaluate(() => window.__chimes === 2), { message: "a chime for the question" });

    await page.evaluate(() => window.__notifications[0].open());
    await page.getByTestId("clarification-overlay").waitFor();
    assert.equal(new URL(page.url()).hash, `#/sessions/${session.id}`);

    // The choice is kept in this browser.
    await page.goto(`${kandev.url}/#/settings`);
    assert.equal(await page.getByTestId("alerts-desktop").isChecked(), true);
    assert.equal(await page.getByTestId("alerts-sound").isChecked(), true);
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
    await skipAllPending(kandev);
  }
});

test("desktop notifications refused by the browser: the switch stays off and says how to allow them; nothing is shown", T, async () => {
  const { kandev, browser } = stack;
  const page = await backgroundPage(browser, { grant: false, origin: kandev.url });
  try {
    await page.goto(`${kandev.url}/#/settings`);
    await page.getByTestId("alerts-desktop").check();
    const status = page.getByTestId("alerts-desktop-status");
    await status.and(page.getByText(/blocks notifications for this site/)).waitFor();
    assert.equal(await page.getByTestId("alerts-desktop").isChecked(), false);
    assert.notEqual(await page.evaluate(() => Notification.permission), "granted");
    await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();
    await sessionWithPendingClarification(kandev, "/e2e:single", "Refused");
    await waitFor(async () => (await page.title()).startsWith("(1) "), { message: "the title still counts" });
    assert.equal(await page.evaluate(() => window.__notifications.length), 0);
    assert.equal(await page.evaluate(() => window.__chimes), 0, "no chime unless turned on");
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
    await skipAllPending(kandev);
  }
});
