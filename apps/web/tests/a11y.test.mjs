// Accessibility audit (issue 16 item 7): axe-core, injected into the page, on every page
// and state of the operator UI — the board, a session with each kind of question, a
// question with its inline errors, answered history, the notifications panel, Settings,
// and the same at phone width — with zero violations of any impact.

import assert from "node:assert/strict";
import { test } from "node:test";
import { axeViolations, launchBrowser, newPage, screenshot, sessionWithPendingClarification, startWebServer, waitFor, withKandev } from "./harness.mjs";

const FLAG_ON = { KANDEV_FEATURES_ACP_ELICITATION: "true" };

/** Each kind of question: scenario → a control its surface shows. */
const QUESTIONS = [
  ["/e2e:single", "clarification-option-question_0-Postgres"],
  ["/e2e:multi", "clarification-option-question_1-dev"],
  ["/e2e:mcp-apikey", "clarification-custom-apiKey"],
  ["/e2e:extended", "clarification-option-confirm-true"],
  ["/e2e:ask", "clarification-option-q1-Postgres"],
];

test("axe-core finds no violation on any page or state, at desktop and phone width", { timeout: 180_000 }, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page, browser }) => {
    const sessions = [];
    for (const [prompt] of QUESTIONS) sessions.push((await sessionWithPendingClarification(kandev, prompt, `Audit ${prompt}`)).session);
    // One answered question, for the history.
    const answered = await sessionWithPendingClarification(kandev, "/e2e:single", "Audit answered");
    await kandev.api.call("POST", `/api/v1/clarifications/${answered.record.pending_id}/respond`, {
      answers: [{ question_id: "question_0", selected_options: ["SQLite"], custom_text: "" }], rejected: false, reject_reason: "",
    });
    await waitFor(async () => (await kandev.api.clarifications(answered.session.id, "answered")).length === 1, { message: "answered" });

    const phone = await newPage(browser, { width: 375, height: 812 });
    const failures = [];
    async function audit(p, name) {
      for (const line of await axeViolations(p)) failures.push(`${name}: ${line}`);
      await screenshot(p, `a11y-${name}`);
    }
    const open = async (p, hash, ready) => {
      await p.goto(`${kandev.url}/${hash}`);
      await p.getByTestId(ready).first().waitFor();
    };

    for (const [p, width] of [[page, "desktop"], [phone, "375"]]) {
      await open(p, "#/", "task-row");
      await audit(p, `board-${width}`);
      await p.getByTestId("connection").and(p.locator("[data-state=online]")).waitFor();
      await sessionWithPendingClarification(kandev, "/e2e:single", `Audit toast ${width}`);
      await p.getByTestId("toast").first().waitFor();
      await audit(p, `board-toast-${width}`);
      await p.getByTestId("notifications-button").click();
      await p.getByTestId("notification-item").first().waitFor();
      await audit(p, `notifications-${width}`);
      await open(p, "#/settings", "flag-list");
      await p.locator("[data-testid^=flag-toggle-]").first().waitFor();
      await audit(p, `settings-${width}`);
      await open(p, `#/sessions/${answered.session.id}`, `clarification-card-${answered.record.pending_id}`);
      await audit(p, `session-answered-${width}`);
    }
    for (const [i, [prompt, control]] of QUESTIONS.entries()) {
      await open(page, `#/sessions/${sessions[i].id}`, control);
      await audit(page, `session-${prompt.slice(5)}`);
    }
    // Inline errors: submit the extended form empty (its integer is required).
    await open(phone, `#/sessions/${sessions[3].id}`, "clarification-custom-replicas");
    await phone.getByTestId("clarification-submit").click();
    await phone.getByTestId("clarification-error-replicas").waitFor();
    await audit(phone, "session-errors-375");

    assert.deepEqual(failures, []);
    assert.deepEqual([...page.errors, ...phone.errors], []);
  });
});

test("the keyboard focus ring is an outline, drawn in forced-colours mode too", { timeout: 60_000 }, async () => {
  const server = await startWebServer();
  const browser = await launchBrowser();
  try {
    const page = await newPage(browser);
    await page.emulateMedia({ forcedColors: "active" });
    await page.goto(`${server.url}/__test__/overlay.html?fixture=elicitation-single`);
    await page.getByTestId("clarification-overlay").waitFor();
    assert.equal(await page.evaluate(() => matchMedia("(forced-colors: active)").matches), true);
    const ring = () => page.evaluate(() => {
      const s = getComputedStyle(document.activeElement);
      return { testid: document.activeElement.dataset.testid, style: s.outlineStyle, width: parseFloat(s.outlineWidth) };
    });
    // The question took focus on arrival; out and back by keyboard, so the ring is the keyboard's.
    await page.keyboard.press("Shift+Tab");
    await page.keyboard.press("Tab");
    const radio = await ring();
    assert.equal(radio.testid, "clarification-option-question_0-Postgres");
    assert.equal(radio.style, "solid");
    assert.ok(radio.width >= 2, `outline ${radio.width}px`);
    await page.getByTestId("clarification-skip").focus();
    await page.keyboard.press("Shift+Tab");
    await page.keyboard.press("Tab");
    const button = await ring();
    assert.equal(button.testid, "clarification-skip");
    assert.equal(button.style, "solid");
    await screenshot(page, "focus-ring-forced-colors");
    await page.context().close();
  } finally {
    await browser.close();
    await server.close();
  }
});
