// Issue 26, full stack (real kandev, agentctl and mock agent; Chromium): the answer card
// tells the truth about what the agent receives, the keyboard never surprises, fields are
// native and checked as the operator types by the server's rules, secrets stay secret,
// and the board and notifications triage what waits.
// Scenarios: tests/fixtures/scenarios/card-form.json and mcp-deploy-key.json; the embedded
// single, multi and extended.

import assert from "node:assert/strict";
import { copyFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  axeViolations,
  elicitationResults,
  newPage,
  repoRoot,
  screenshot,
  sessionWithPendingClarification,
  waitFor,
  waitForElicitationResult,
  withKandev,
} from "./harness.mjs";

const FLAG_ON = { KANDEV_FEATURES_ACP_ELICITATION: "true" };
const T = { timeout: 180_000 };

async function openQuestion(page, kandev, sessionId) {
  await page.goto(`${kandev.url}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.getByTestId("clarification-overlay").waitFor();
}

const previewContent = async (page) => JSON.parse(await page.getByTestId("clarification-preview").getAttribute("data-content"));

test("the preview line is the content the agent receives: single, Other, multi and typed forms", T, async () => {
  await withKandev({ env: FLAG_ON, viewport: { width: 1280, height: 900 } }, async ({ kandev, page }) => {
    const forms = [
      ["/e2e:single", async () => {
        await page.getByTestId("clarification-option-question_0-SQLite").check();
      }],
      ["/e2e:single", async () => {
        const postgres = page.getByTestId("clarification-option-question_0-Postgres");
        await postgres.check();
        await page.getByTestId("clarification-custom-question_0").fill("CockroachDB");
        assert.equal(await postgres.isChecked(), false, "Other text unticks the option it overrides");
      }],
      ["/e2e:multi", async () => {
        await page.getByTestId("clarification-option-question_1-prod").check();
        await page.getByTestId("clarification-option-question_1-dev").check();
        await page.getByTestId("clarification-option-question_0-SQLite").check();
      }],
      ["/e2e:extended", async () => {
        await page.getByTestId("clarification-option-confirm-true").check();
        await page.getByTestId("clarification-custom-replicas").fill("4");
        await page.getByTestId("clarification-custom-ratio").fill("0.25");
      }],
    ];
    for (const [n, [prompt, answer]] of forms.entries()) {
      const { session } = await sessionWithPendingClarification(kandev, prompt, `Preview ${n}`);
      await openQuestion(page, kandev, session.id);
      await answer();
      const shown = await previewContent(page);
      assert.match(await page.getByTestId("clarification-preview").textContent(), /^The agent will receive: \{/);
      await page.getByTestId("clarification-submit").click();
      const received = await waitForElicitationResult(kandev.agentLog, n + 1);
      assert.equal(received.action, "accept");
      assert.deepEqual(shown, received.content, `${prompt} #${n}: the preview line is what the agent got`);
      await page.getByTestId("clarification-outcome").and(page.locator("[data-outcome=answered]")).waitFor();
    }
    // The history says, per question and labelled, what was delivered.
    const history = page.getByTestId("history-item").first();
    await history.waitFor();
    assert.match(await history.getByTestId("history-answer").textContent(), /What the agent received:.*Confirm.*Yes/);
    assert.deepEqual(page.errors, []);
  });
});

test("an empty Submit asks first and, confirmed, still sends accept {} (AC-12b)", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:single", "Empty answer");
    await openQuestion(page, kandev, session.id);
    assert.match(await page.getByTestId("clarification-preview").textContent(), /nothing/);
    await page.getByTestId("clarification-submit").click();
    const ask = page.getByTestId("clarification-empty-confirm");
    await ask.waitFor();
    assert.match(await ask.textContent(), /Nothing answered — send an empty answer or Skip\?/);
    assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), "clarification-send-empty");
    assert.equal(elicitationResults(kandev.agentLog).length, 0, "nothing sent before the operator confirms");
    await page.getByTestId("clarification-send-empty").click();
    assert.deepEqual(await waitForElicitationResult(kandev.agentLog), { action: "accept", content: {} });
    // Not a green "Answered" beside "nothing": it reads as what the agent makes of it.
    const item = page.locator(`[data-testid=history-item][data-pending-id="${record.pending_id}"]`);
    await item.waitFor();
    assert.match(await item.getByTestId("history-outcome").textContent(), /Answered with nothing/);
    assert.match(await item.getByTestId("history-answer").textContent(), /Nothing was sent/);
    // Focus never falls to <body> after an action.
    assert.notEqual(await page.evaluate(() => document.activeElement.tagName), "BODY");
  });
});

test("ECMA-262 patterns: prod-45 refused and prod-44 accepted, by the server and in the page; native fields", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:card-form", "Deploy form");
    // The server enforces the lookahead and the backreference (fancy-regex in agentctl).
    const respond = (env) => fetch(`${kandev.apiUrl}/api/v1/clarifications/${record.pending_id}/respond`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ answers: [{ question_id: "env", selected_options: [], custom_text: env }], rejected: false, reject_reason: "" }),
    });
    const refused = await respond("prod-45");
    assert.equal(refused.status, 400);
    assert.match(JSON.stringify(await refused.json()), /pattern/);

    await openQuestion(page, kandev, session.id);
    // Native controls for the formats, one line for short strings, counters for limits.
    const type = (id) => page.getByTestId(`clarification-custom-${id}`).evaluate((el) => `${el.tagName.toLowerCase()}:${el.type}`);
    assert.equal(await type("start"), "input:date");
    assert.equal(await type("window"), "input:datetime-local");
    assert.equal(await type("contact"), "input:email");
    assert.equal(await type("runbook"), "input:url");
    assert.equal(await type("replicas"), "input:number");
    assert.equal(await type("service"), "input:text");
    assert.equal(await type("env"), "input:text");
    assert.deepEqual(await page.getByTestId("clarification-custom-replicas").evaluate((el) => [el.min, el.max, el.step]), ["1", "5", "1"]);
    assert.equal(await page.getByTestId("clarification-counter-service").textContent(), "0 / 20 characters");
    assert.match(await page.getByTestId("clarification-counter-regions").textContent(), /0 chosen, at most 2/);
    // anyOf [string, null] is an optional string (decision 0015).
    assert.equal(await page.locator('[data-question-id="notes"] .required').count(), 0);
    // The request message once; fields without their own description show only their title.
    assert.equal(await page.getByTestId("clarification-overlay").getByText("Set up the").count(), 1);
    assert.equal(await page.locator(".question .prompt").count(), 1, "only env has its own description");

    // Live checks, by the server's rules: shown and cleared as the operator types.
    const env = page.getByTestId("clarification-custom-env");
    const error = page.getByTestId("clarification-error-env");
    await env.fill("prod-45");
    await error.waitFor();
    assert.match(await error.textContent(), /Must match the format the agent asked for/);
    assert.doesNotMatch(await error.locator("> :not(details)").allTextContents().then((t) => t.join("")), /\(\?=/);
    await error.locator("summary").click();
    assert.equal(await error.locator("details code").textContent(), "^prod-(?=[0-9]+$)([0-9])\\1$");
    await env.fill("prod-44");
    await error.waitFor({ state: "hidden" });
    await page.getByTestId("clarification-custom-service").fill("x".repeat(21));
    assert.equal(await page.getByTestId("clarification-counter-service").textContent(), "21 / 20 characters");
    await page.getByTestId("clarification-error-service").waitFor();
    await page.getByTestId("clarification-custom-service").fill("billing");
    await page.getByTestId("clarification-error-service").waitFor({ state: "hidden" });
    await page.getByTestId("clarification-custom-start").fill("2026-12-24");
    await page.getByTestId("clarification-option-regions-eu").check();
    await page.getByTestId("clarification-custom-replicas").fill("3");
    const shown = await previewContent(page);
    await page.getByTestId("clarification-submit").click();
    const received = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(received, { action: "accept", content: { env: "prod-44", start: "2026-12-24", service: "billing", regions: ["eu"], replicas: 3 } });
    assert.deepEqual(shown, received.content, "the typed form's preview is what the agent got");
    assert.deepEqual(page.errors, []);
  });
});

test("a secret is masked, reaches the agent, and appears nowhere else: page, record reads, logs; the MCP server is named", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const secret = `sk-live-${Date.now()}-quiet`;
    const { session, record } = await sessionWithPendingClarification(kandev, "/e2e:mcp-deploy-key", "Deploy key");
    await openQuestion(page, kandev, session.id);
    const line = page.getByTestId("clarification-requester");
    await line.getByText("through the MCP server “deploy”").waitFor({ timeout: 15_000 });
    assert.equal(await line.getAttribute("data-mcp-server"), "deploy");
    const field = page.getByTestId("clarification-custom-apiKey");
    assert.equal(await field.getAttribute("type"), "password");
    await field.fill(secret);
    assert.deepEqual(await previewContent(page), { apiKey: "••••••" });
    assert.equal(await page.evaluate(() => JSON.stringify(sessionStorage)).then((s) => s.includes("sk-live")), false, "no draft keeps it");
    await page.getByTestId("clarification-submit").click();
    const received = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(received, { action: "accept", content: { apiKey: secret } }, "the agent gets the value");

    const item = page.locator(`[data-testid=history-item][data-pending-id="${record.pending_id}"]`);
    await item.waitFor();
    assert.match(await item.textContent(), /hidden \(a secret\)/);
    const card = page.getByTestId(`clarification-card-${record.pending_id}`);
    await card.and(page.locator("[data-status=answered]")).waitFor();
    // The mock agent prints what it received in its own chat message; what the agent says is
    // its own, so that message is left out. Everything Kandev shows or keeps is checked.
    const html = await page.evaluate(() => {
      const copy = document.documentElement.cloneNode(true);
      copy.querySelectorAll("[data-testid=message-agent]").forEach((el) => el.remove());
      return copy.outerHTML;
    });
    assert.equal(html.includes(secret), false, `not in the page: …${html.slice(Math.max(0, html.indexOf(secret) - 400), html.indexOf(secret) + 100)}…`);
    const reads = [
      await kandev.api.call("GET", `/api/v1/clarifications/${record.pending_id}`),
      await kandev.api.clarifications(session.id),
      (await kandev.api.messages(session.id)).filter((m) => !(m.author_type === "agent" && m.type === "message")),
    ];
    for (const read of reads) assert.equal(JSON.stringify(read).includes(secret), false, "not in a record read");
    assert.equal(JSON.stringify(reads[0]).includes("[redacted]"), true, "stored redacted");
    assert.equal(kandev.logs().includes(secret), false, "not in kandev's logs");
    assert.deepEqual(page.errors, []);
  });
});

test("keyboard: Enter never submits, Ctrl+Enter does, number keys pick; focus on arrival; drafts survive a reload", T, async () => {
  await withKandev({ env: FLAG_ON }, async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:multi", "Keyboard");
    await openQuestion(page, kandev, session.id);
    const focused = () => page.evaluate(() => document.activeElement.dataset.testid ?? document.activeElement.tagName);
    // The question takes focus on arrival.
    await waitFor(async () => (await focused()) === "clarification-option-question_0-Postgres", { message: "focus on the first option" });
    await page.keyboard.press("2"); // number keys pick in a single choice
    assert.equal(await page.getByTestId("clarification-option-question_0-SQLite").isChecked(), true);
    await page.keyboard.press("Enter"); // on a radio: nothing is sent
    await page.getByTestId("clarification-option-question_1-dev").focus();
    await page.keyboard.press("Space");
    await page.keyboard.press("Enter"); // on a checkbox: nothing is sent
    await page.getByTestId("clarification-custom-question_1").focus();
    await page.keyboard.type("qa");
    await page.keyboard.press("Enter"); // in a one-line field: nothing is sent
    assert.equal(await page.getByTestId("clarification-option-question_1-dev").isChecked(), false, "typed Other unticked dev");
    assert.equal(elicitationResults(kandev.agentLog).length, 0, "Enter sent nothing");

    // A reload keeps what was typed (this tab's session storage).
    await page.reload();
    await page.getByTestId("clarification-overlay").waitFor();
    assert.equal(await page.getByTestId("clarification-option-question_0-SQLite").isChecked(), true);
    assert.equal(await page.getByTestId("clarification-custom-question_1").inputValue(), "qa");

    // The tab names the task once the reloaded page has read it; the chat box waits for the question.
    await waitFor(async () => /Keyboard · Kandev/.test(await page.title()), { message: "the tab names the task" });
    await page.getByTestId("prompt-input").fill("carry on");
    await page.getByTestId("prompt-send").click();
    assert.equal(await page.getByTestId("session-notice").textContent(), "Answer the question above first.");
    assert.equal((await kandev.api.messages(session.id)).some((m) => m.author_type === "user" && m.content === "carry on"), false);

    // Stop session with a draft asks first; declined, nothing stops.
    const asked = new Promise((resolve) => page.once("dialog", (d) => {
      resolve(d.message());
      d.dismiss();
    }));
    await page.getByTestId("session-stop").click();
    assert.match(await asked, /will be lost/);
    assert.equal((await kandev.api.clarifications(session.id, "pending")).length, 1, "still waiting");

    await page.getByTestId("clarification-custom-question_1").focus();
    await page.keyboard.press("Control+Enter");
    const received = await waitForElicitationResult(kandev.agentLog);
    assert.deepEqual(received, { action: "accept", content: { question_0: "SQLite", question_1_custom: "qa" } });
    // After the action, focus is on the outcome, not <body>.
    await waitFor(async () => (await focused()) === "clarification-outcome", { message: "focus on the outcome" });
    assert.deepEqual(page.errors, []);
  });
});

test("triage: Needs you lists the longest wait first; a settled question's notification resolves and clears", T, async () => {
  await withKandev({ env: FLAG_ON, viewport: { width: 1280, height: 900 } }, async ({ kandev, page }) => {
    const first = await sessionWithPendingClarification(kandev, "/e2e:single", "Waiting longest");
    const second = await sessionWithPendingClarification(kandev, "/e2e:multi", "Waiting since now");
    await page.goto(`${kandev.url}/#/`);
    const items = page.getByTestId("needs-you-item");
    await waitFor(async () => (await items.count()) === 2, { message: "two waiting" });
    assert.deepEqual(await items.evaluateAll((els) => els.map((el) => el.dataset.pendingId)), [first.record.pending_id, second.record.pending_id]);
    assert.match(await items.first().textContent(), /Waiting longest.*Datastore.*asked (just now|1 min ago)/);
    assert.equal(await page.getByTestId("needs-you").evaluate((el) => el.compareDocumentPosition(document.querySelector("[data-testid=task-list]")) & Node.DOCUMENT_POSITION_FOLLOWING), 4, "above the task list");
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, "board-needs-you");

    // Answered elsewhere: it leaves Needs you, and its notification says it is resolved.
    await kandev.api.call("POST", `/api/v1/clarifications/${first.record.pending_id}/respond`, {
      answers: [{ question_id: "question_0", selected_options: ["SQLite"], custom_text: "" }], rejected: false, reject_reason: "",
    });
    await waitFor(async () => (await items.count()) === 1, { message: "one left" });
    await page.getByTestId("notifications-button").click();
    const notes = page.getByTestId("notification-item");
    await waitFor(async () => (await notes.count()) === 2, { message: "two notifications" });
    const resolved = await notes.evaluateAll((els) => els.map((el) => [el.querySelector("a").getAttribute("href"), el.dataset.resolved]));
    assert.deepEqual(resolved.sort(), [
      [`#/sessions/${encodeURIComponent(first.session.id)}`, "true"],
      [`#/sessions/${encodeURIComponent(second.session.id)}`, "false"],
    ].sort());
    await page.getByTestId("notifications-clear").click();
    await page.getByText("No notifications yet.").waitFor();

    assert.deepEqual(page.errors, []);
  });
});

test("triage: a question arriving keeps the Needs you link a keyboard user is on (and its focus)", T, async () => {
  await withKandev({ env: FLAG_ON, viewport: { width: 1280, height: 900 } }, async ({ kandev, page }) => {
    const first = await sessionWithPendingClarification(kandev, "/e2e:single", "Asked first");
    const second = await sessionWithPendingClarification(kandev, "/e2e:multi", "Asked second");
    await page.goto(`${kandev.url}/#/`);
    const items = page.getByTestId("needs-you-item");
    await waitFor(async () => (await items.count()) === 2, { message: "two waiting" });
    const link = items.nth(1).getByTestId("needs-you-link");
    await link.focus();
    const held = await link.elementHandle();

    // A third question comes in while the operator is on the second one's link.
    const third = await sessionWithPendingClarification(kandev, "/e2e:single", "Asked third");
    await waitFor(async () => (await items.count()) === 3, { message: "three waiting" });
    assert.deepEqual(await items.evaluateAll((els) => els.map((el) => el.dataset.pendingId)), [first.record.pending_id, second.record.pending_id, third.record.pending_id]);
    assert.equal(await held.evaluate((el) => el.isConnected && document.activeElement === el), true, "the focused link was rebuilt");

    // One answered elsewhere leaves; the link keeps its focus still, and Enter follows it.
    await kandev.api.call("POST", `/api/v1/clarifications/${first.record.pending_id}/respond`, {
      answers: [{ question_id: "question_0", selected_options: ["SQLite"], custom_text: "" }], rejected: false, reject_reason: "",
    });
    await waitFor(async () => (await items.count()) === 2, { message: "two left" });
    assert.equal(await held.evaluate((el) => el.isConnected && document.activeElement === el), true, "the focused link was rebuilt");
    await page.keyboard.press("Enter");
    await waitFor(async () => page.url().endsWith(`#/sessions/${encodeURIComponent(second.session.id)}`), { message: "Enter opened the second question's session" });
    assert.deepEqual(page.errors, []);
  });
});

test("Settings: a toggle keeps keyboard focus and shows its Saved line", T, async () => {
  // No flag in the environment, so the toggle is not locked.
  await withKandev({}, async ({ kandev, page }) => {
    await page.goto(`${kandev.url}/#/settings`);
    const toggle = page.getByTestId("flag-toggle-features.acpElicitation");
    const value = page.getByTestId("flag-value-features.acpElicitation");
    // Hold the PATCH's response until the `runtime_flags.updated` event has re-rendered the
    // list: the "Saved" line must survive a re-render that lands while its save is in flight.
    await page.route("**/api/v1/runtime-flags/**", async (route) => {
      const response = await route.fetch();
      await waitFor(async () => (await value.textContent()) === "On", { message: "re-rendered by the event" });
      await route.fulfill({ response });
    });
    await toggle.waitFor();
    await toggle.focus();
    await page.keyboard.press("Space");
    await page.getByTestId("flag-status-features.acpElicitation").getByText(/Saved/).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), "flag-toggle-features.acpElicitation");
    assert.deepEqual(page.errors, []);
  });
});

test("Settings: a re-read that changes nothing keeps the rows, so a key press across it still toggles", T, async () => {
  await withKandev({}, async ({ kandev, page }) => {
    // The page reads the list twice on arrival (its mount, then the socket's connect). Hold
    // the second read while Space is down: the CI failure of the test above was a key press
    // whose toggle was rebuilt between keydown and keyup, which toggles nothing.
    let reads = 0;
    let held = false;
    let release;
    const releaseRead = new Promise((resolve) => (release = resolve));
    await page.route(/\/api\/v1\/runtime-flags$/, async (route) => {
      reads += 1;
      if (reads === 2) {
        held = true;
        await releaseRead;
      }
      await route.continue();
    });
    await page.goto(`${kandev.url}/#/settings`);
    const list = page.getByTestId("flag-list");
    const toggle = page.getByTestId("flag-toggle-features.acpElicitation");
    await toggle.waitFor();
    await waitFor(async () => held, { message: "the second read held" });
    const row = await toggle.elementHandle();
    await toggle.focus();
    await page.keyboard.down("Space");
    release();
    await waitFor(async () => (await list.getAttribute("aria-busy")) === null, { message: "the second read rendered" });
    assert.equal(await row.evaluate((el) => el.isConnected), true, "the unchanged list was rebuilt");
    await page.keyboard.up("Space");
    await page.getByTestId("flag-status-features.acpElicitation").getByText(/Saved/).waitFor();
    assert.equal(await page.getByTestId("flag-value-features.acpElicitation").textContent(), "On");
    assert.deepEqual(page.errors, []);
  });
});

test("axe finds nothing on the card at 1280×900 and 390×844; screenshots for docs/screenshots", T, async () => {
  await withKandev({ env: FLAG_ON, viewport: { width: 1280, height: 900 } }, async ({ kandev, page, browser }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:card-form", "Set up the deploy");
    const single = await sessionWithPendingClarification(kandev, "/e2e:single", "Choose the datastore");
    const phone = await newPage(browser, { width: 390, height: 844 });
    const docs = path.join(repoRoot, "docs", "screenshots");
    mkdirSync(docs, { recursive: true });
    for (const [p, width] of [[page, 1280], [phone, 390]]) {
      await openQuestion(p, kandev, session.id);
      await p.getByTestId("clarification-custom-env").fill("prod-45");
      await p.getByTestId("clarification-error-env").waitFor();
      await p.getByTestId("clarification-custom-service").fill("billing");
      await p.getByTestId("clarification-option-regions-eu").check();
      assert.deepEqual(await axeViolations(p), [], `card at ${width}`);
      copyFileSync(await screenshot(p, `answer-card-${width}`), path.join(docs, `answer-card-${width}.png`));
      await openQuestion(p, kandev, single.session.id);
      await p.getByTestId("clarification-preview-question_0-SQLite").waitFor();
      await p.getByTestId("clarification-option-question_0-SQLite").check();
      assert.deepEqual(await axeViolations(p), [], `single with previews at ${width}`);
      copyFileSync(await screenshot(p, `answer-card-preview-${width}`), path.join(docs, `answer-card-preview-${width}.png`));
    }
    assert.deepEqual([...page.errors, ...phone.errors], []);
  });
});
