// Page-level tests of the answer surface: the real clarification.js module, in chromium,
// rendering fixture records (tests/fixtures) with `respond` replaced by a recorder.
// These pin the UI rules whatever the backend does; the full-stack tests in
// ui.test.mjs pin what reaches the agent.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { copyFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { launchBrowser, newPage, repoRoot, screenshot, screenshotDir, startWebServer } from "./harness.mjs";

let server;
let browser;

before(async () => {
  server = await startWebServer();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function bench(fixture, viewport, query = "") {
  const page = await newPage(browser, viewport);
  await page.goto(`${server.url}/__test__/overlay.html?fixture=${fixture}${query}`);
  await page.locator("body[data-ready=true]").waitFor();
  await page.getByTestId("clarification-overlay").waitFor();
  return page;
}

const calls = (page) => page.evaluate(() => window.__calls);
const reply = (page, value) => page.evaluate((v) => { window.__reply = v; }, value);

describe("answer surface, ask_user_question rules (AC-57, page-level with a fixture record)", () => {
  test("AC-57: typing clears the chosen option, choosing clears the typed text, only one is sent", async () => {
    const page = await bench("ask-user-question");
    const postgres = page.getByTestId("clarification-option-q1-Postgres");
    const custom = page.getByTestId("clarification-custom-q1");
    await postgres.check();
    await custom.fill("CockroachDB");
    assert.equal(await postgres.isChecked(), false, "typing cleared the selection");
    await postgres.check();
    assert.equal(await custom.inputValue(), "", "selecting cleared the text");
    await custom.fill("CockroachDB");
    await page.getByTestId("clarification-option-q2-eu").check();
    await screenshot(page, "overlay-ask-user-question");
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-outcome").waitFor();
    assert.deepEqual(await calls(page), [{
      pendingId: "7b0f6a1e-4a55-4c1b-9a57-2f3e1d0c9b11",
      payload: {
        answers: [
          { question_id: "q1", selected_options: [], custom_text: "CockroachDB" },
          { question_id: "q2", selected_options: ["eu"], custom_text: "" },
        ],
        rejected: false,
        reject_reason: "",
      },
    }]);
    await page.context().close();
  });

  test("keyboard only: Tab between groups, arrows within a radio group, Space and Enter", async () => {
    const page = await bench("ask-user-question");
    // The question takes focus when it arrives: its first radio group.
    assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), "clarification-option-q1-Postgres");
    await page.keyboard.press("ArrowDown"); // moves and selects
    await page.keyboard.press("Tab"); // q1's custom field
    assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), "clarification-custom-q1");
    await page.keyboard.press("Tab"); // q2's radio group
    await page.keyboard.press("Space");
    await page.keyboard.press("Tab"); // q2's custom field
    await page.keyboard.press("Tab"); // Submit
    assert.equal(await page.evaluate(() => document.activeElement.dataset.testid), "clarification-submit");
    await page.keyboard.press("Enter");
    await page.getByTestId("clarification-outcome").waitFor();
    assert.deepEqual((await calls(page))[0].payload.answers, [
      { question_id: "q1", selected_options: ["SQLite"], custom_text: "" },
      { question_id: "q2", selected_options: ["eu"], custom_text: "" },
    ]);
    await page.context().close();
  });

  test("AC-57: every question must be answered before submit; skip stays available", async () => {
    const page = await bench("ask-user-question");
    await page.getByTestId("clarification-option-q1-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-error-q2").waitFor();
    assert.match(await page.getByTestId("clarification-error-q2").textContent(), /required/i);
    assert.equal((await calls(page)).length, 0, "nothing sent while a question is unanswered");
    await reply(page, { ok: true, body: { status: "declined" } });
    await page.getByTestId("clarification-skip").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.deepEqual((await calls(page))[0].payload, { answers: [], rejected: true, reject_reason: "skipped" });
    assert.match(await page.getByTestId("clarification-outcome").textContent(), /skipped/i);
    await page.context().close();
  });
});

describe("answer surface, elicitation rules (page-level)", () => {
  test("typed Other text wins at the agent, so it unticks the options it overrides; the preview says what is sent", async () => {
    const page = await bench("elicitation-single");
    const postgres = page.getByTestId("clarification-option-question_0-Postgres");
    const preview = page.getByTestId("clarification-preview");
    await postgres.check();
    assert.deepEqual(JSON.parse(await preview.getAttribute("data-content")), { question_0: "Postgres" });
    await page.getByTestId("clarification-custom-question_0").fill("  CockroachDB ");
    assert.equal(await postgres.isChecked(), false, "the overridden option is unticked");
    assert.deepEqual(JSON.parse(await preview.getAttribute("data-content")), { question_0_custom: "CockroachDB" });
    assert.match(await preview.textContent(), /^The agent will receive: \{"question_0_custom":"CockroachDB"\}$/);
    await screenshot(page, "overlay-elicitation-other-wins");
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.deepEqual((await calls(page))[0].payload.answers, [
      { question_id: "question_0", selected_options: [], custom_text: "CockroachDB" },
    ]);
    await page.context().close();
  });

  test("multi-select accumulates and is sent in declaration order; maxItems checked inline", async () => {
    const page = await bench("elicitation-multi");
    await page.getByTestId("clarification-option-question_1-prod").check();
    await page.getByTestId("clarification-option-question_1-dev").check();
    await page.getByTestId("clarification-option-question_1-staging").check();
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-error-question_1").waitFor();
    assert.match(await page.getByTestId("clarification-error-question_1").textContent(), /at most 2/);
    assert.equal((await calls(page)).length, 0);
    await page.getByTestId("clarification-option-question_1-staging").uncheck();
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.deepEqual((await calls(page))[0].payload.answers, [
      { question_id: "question_1", selected_options: ["dev", "prod"], custom_text: "" },
    ]);
    await page.context().close();
  });

  test("AC-56 (page-level): a zero-option question renders the free-text field alone and submits it", async () => {
    const page = await bench("elicitation-apikey");
    const overlay = page.getByTestId("clarification-overlay");
    assert.equal(await overlay.locator("input[type=radio], input[type=checkbox], .options").count(), 0, "no option list");
    await page.getByTestId("clarification-custom-apiKey").fill("sk-123");
    await page.getByTestId("clarification-submit").click();
    await overlay.waitFor({ state: "detached" });
    assert.deepEqual((await calls(page))[0].payload.answers, [{ question_id: "apiKey", selected_options: [], custom_text: "sk-123" }]);
    await page.context().close();
  });

  test("boolean, integer, number and text fields: defaults pre-filled, required marked, constraints checked before submit", async () => {
    const page = await bench("elicitation-extended");
    assert.equal(await page.getByTestId("clarification-option-confirm-true").isChecked(), true, "boolean default");
    assert.equal(await page.getByTestId("clarification-custom-replicas").inputValue(), "3", "integer default");
    assert.equal(await page.locator('[data-question-id="replicas"] .required').count(), 1, "required marker");
    await page.getByTestId("clarification-custom-replicas").fill("12");
    await page.getByTestId("clarification-custom-ratio").fill("1.5");
    await page.getByTestId("clarification-custom-contact").fill("not-an-email");
    await page.getByTestId("clarification-custom-ticket").fill("JIRA-1");
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-error-replicas").waitFor();
    assert.match(await page.getByTestId("clarification-error-replicas").textContent(), /10 or less/);
    assert.match(await page.getByTestId("clarification-error-ratio").textContent(), /1 or less/i);
    assert.match(await page.getByTestId("clarification-error-contact").textContent(), /email/i);
    assert.match(await page.getByTestId("clarification-error-ticket").textContent(), /format the agent asked for/i);
    await screenshot(page, "overlay-extended-errors");
    assert.equal((await calls(page)).length, 0, "nothing is sent while a field is invalid");

    await page.getByTestId("clarification-custom-replicas").fill("");
    await page.getByTestId("clarification-submit").click();
    assert.match(await page.getByTestId("clarification-error-replicas").textContent(), /required/i);

    await page.getByTestId("clarification-custom-replicas").fill("4");
    await page.getByTestId("clarification-custom-ratio").fill("0.25");
    await page.getByTestId("clarification-custom-contact").fill("oncall@example.com");
    await page.getByTestId("clarification-custom-ticket").fill("OPS-42");
    await page.getByTestId("clarification-option-confirm-false").check();
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.deepEqual((await calls(page))[0].payload.answers, [
      { question_id: "confirm", selected_options: [], custom_text: "false" },
      { question_id: "replicas", selected_options: [], custom_text: "4" },
      { question_id: "ratio", selected_options: [], custom_text: "0.25" },
      { question_id: "contact", selected_options: [], custom_text: "oncall@example.com" },
      { question_id: "ticket", selected_options: [], custom_text: "OPS-42" },
    ]);
    await page.context().close();
  });
});

describe("text that reads well (page-level)", () => {
  test("line breaks kept; emphasis, code and lists rendered; links shown as text with their URL; markup stays text", async () => {
    const page = await bench("elicitation-text");
    const message = page.locator(".clar-message");
    assert.equal(await message.locator("strong").textContent(), "merge");
    assert.equal(await message.locator("code").first().textContent(), "feature/login");
    assert.deepEqual(await message.locator("ul > li").allTextContents(), ["CI is green", "the design doc (https://example.com/doc?id=7) is approved"]);
    assert.equal(await page.getByTestId("clarification-overlay").locator("a").count(), 0, "no link an agent could make the operator click");
    assert.match(await message.locator("p").first().innerText(), /two things:\nthe branch is/, "the line break is kept");
    assert.match(await message.textContent(), /<img src=x onerror="window.__injected=1"> stays text\./);
    assert.equal(await message.locator("img").count(), 0);
    assert.equal(await page.evaluate(() => window.__injected), undefined);
    // A question's prompt too, and an option's description (inline only, inside its label).
    assert.equal(await page.locator('[data-question-id="branch"] .prompt em').textContent(), "main");
    assert.equal(await page.locator('[data-question-id="strategy"] .option-desc code').textContent(), "main");
    await screenshot(page, "overlay-text-reads-well");
    await page.context().close();
  });

  test("free text is multi-line; Ctrl+Enter submits; Escape never discards what was typed", async () => {
    const page = await bench("elicitation-text");
    const notes = page.getByTestId("clarification-custom-notes");
    assert.equal(await notes.evaluate((el) => el.tagName), "TEXTAREA");
    await notes.click();
    await page.keyboard.type("Fixes the login form.");
    await page.keyboard.press("Enter");
    await page.keyboard.type("Adds a test.");
    await page.keyboard.press("Escape");
    assert.equal(await notes.inputValue(), "Fixes the login form.\nAdds a test.", "Enter adds a line, Escape keeps the text");
    assert.equal((await calls(page)).length, 0, "Enter alone did not submit");
    await page.keyboard.press("Control+Enter");
    await page.getByTestId("clarification-outcome").waitFor();
    assert.deepEqual((await calls(page))[0].payload.answers, [
      { question_id: "branch", selected_options: [], custom_text: "main" },
      { question_id: "notes", selected_options: [], custom_text: "Fixes the login form.\nAdds a test." },
      { question_id: "strategy", selected_options: ["squash"], custom_text: "" },
    ]);
    await page.context().close();
  });

  test("defaults are pre-filled and shown as the agent's", async () => {
    const page = await bench("elicitation-text");
    const branch = page.getByTestId("clarification-custom-branch");
    assert.equal(await branch.inputValue(), "main");
    const described = await branch.evaluate((el) => el.getAttribute("aria-describedby").split(" ").map((id) => document.getElementById(id)?.textContent ?? "").join(" | "));
    assert.match(described, /Pre-filled with the agent's default: main/, "the field says its value is the default");
    assert.equal(await page.getByTestId("clarification-option-strategy-squash").isChecked(), true);
    assert.equal(await page.locator('[data-question-id="strategy"] .option:has([value=squash]) .default-tag').textContent(), "default");
    assert.equal(await page.locator('[data-question-id="strategy"] .default-tag').count(), 1, "only the default option is tagged");
    await page.context().close();
  });

  test("what was typed survives the surface being rendered again while the question is open", async () => {
    const page = await bench("elicitation-text");
    await page.getByTestId("clarification-custom-notes").fill("Half a thought");
    await page.getByTestId("clarification-option-strategy-rebase").check();
    await page.evaluate(() => window.__area.update([])); // e.g. the operator left the session
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    await page.evaluate(() => fetch("/__fixtures__/elicitation-text.json").then((r) => r.json()).then((rec) => window.__area.update([rec])));
    assert.equal(await page.getByTestId("clarification-custom-notes").inputValue(), "Half a thought");
    assert.equal(await page.getByTestId("clarification-option-strategy-rebase").isChecked(), true);
    await page.context().close();
  });
});

describe("Submit, Skip, Cancel and who asks (page-level)", () => {
  test("three controls, each explained in one line that is its description", async () => {
    const page = await bench("elicitation-single");
    const explained = {};
    for (const id of ["clarification-submit", "clarification-skip", "clarification-cancel"]) {
      explained[id] = await page.getByTestId(id).evaluate((el) => document.getElementById(el.getAttribute("aria-describedby")).textContent);
    }
    assert.deepEqual(explained, {
      "clarification-submit": "The agent gets your answers and carries on.",
      "clarification-skip": "The agent is told you declined; it carries on without an answer.",
      "clarification-cancel": "The agent's request is aborted: the tool call it came from stops.",
    });
    await page.context().close();
  });

  test("Cancel sends a cancel (not a respond), says the agent was told to abort, and withdraws the surface", async () => {
    const page = await bench("elicitation-single");
    await page.getByTestId("clarification-custom-question_0").fill("typed, then cancelled");
    await reply(page, { ok: true, body: { status: "cancelled" } });
    // Something was typed: Cancel asks before throwing it away.
    const asked = new Promise((resolve) => page.once("dialog", (d) => {
      resolve(d.message());
      d.accept();
    }));
    await page.getByTestId("clarification-cancel").click();
    assert.match(await asked, /What you typed will be lost/);
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.deepEqual(await calls(page), [{ pendingId: "0d7c1c7e-0c38-4f43-8d7b-5a0f3f1b2c01", cancel: true }]);
    const outcome = page.getByTestId("clarification-outcome");
    assert.equal(await outcome.getAttribute("data-outcome"), "cancelled");
    assert.match(await outcome.textContent(), /cancelled the request; the agent was told to abort it/);
    await page.context().close();
  });

  test("a cancel after the question was settled elsewhere (404 from agentctl) says it is no longer open", async () => {
    const page = await bench("elicitation-single");
    await reply(page, { ok: false, status: 404, code: "NOT_FOUND", message: "no such pending" });
    await page.getByTestId("clarification-cancel").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.equal(await page.getByTestId("clarification-outcome").getAttribute("data-outcome"), "not_found");
    await page.context().close();
  });

  test("the card names who asks: the agent's id and agentInfo, and the tool call, which it can show", async () => {
    const page = await bench("elicitation-single", undefined, "&agent=mock");
    const line = page.getByTestId("clarification-requester");
    assert.equal(await line.getAttribute("data-tool-call-id"), "tool-42");
    assert.match(await line.textContent(), /^Asked by mock \(mock-agent 0\.3\.0\) for the tool call “Choose the datastore” Show the tool call$/);
    await page.getByTestId("clarification-show-tool-call").click();
    assert.deepEqual(await page.evaluate(() => window.__shown), ["tool-42"]);
    await screenshot(page, "overlay-who-asks");
    await page.context().close();
  });
});

describe("history of settled questions (page-level, tests/fixtures/history.json)", () => {
  test("each with its answer, outcome, by whom and when, in the order they settled; pending ones left out", async () => {
    const page = await newPage(browser);
    await page.goto(`${server.url}/__test__/history.html`);
    await page.locator("body[data-ready=true]").waitFor();
    const rows = await page.getByTestId("history-item").evaluateAll((els) => els.map((el) => [
      el.dataset.pendingId,
      el.dataset.outcome,
      el.querySelector("[data-testid=history-outcome]").textContent,
      el.querySelector("[data-testid=history-answer]").textContent,
      el.querySelector("[data-testid=history-by]")?.textContent ?? null,
      el.querySelector("time")?.getAttribute("datetime") ?? null,
    ]));
    assert.deepEqual(rows, [
      ["p1", "answered", "Answered", "What the agent received:DatastoreSQLite (embedded) (not sent: with WAL)", "By alice", "2026-01-05T10:01:30.000000Z"],
      ["p2", "skipped", "Skipped", "No answer was given.", "By the operator (no sign-in)", "2026-01-05T10:02:30.000000Z"],
      ["p3", "cancelled", "Cancelled by the operator", "No answer was given.", "By the operator (no sign-in)", "2026-01-05T10:03:30.000000Z"],
      ["p4", "timed_out", "Timed out", "No answer was given.", null, "2026-01-05T10:04:30.000000Z"],
      ["p5", "agent_cancelled", "Withdrawn by the agent", "No answer was given.", null, "2026-01-05T10:05:30.000000Z"],
      ["p6", "withdrawn", "Closed: the session ended or the agent is gone", "No answer was given.", null, "2026-01-05T10:06:30.000000Z"],
      ["p7", "skipped", "Skipped", "No answer was given.", null, "2026-01-05T10:07:30.000000Z"],
    ]);
    assert.equal(await page.getByRole("heading", { name: "Questions in this session" }).count(), 1);
    await screenshot(page, "history-fixture");
    await page.context().close();
  });
});

describe("the README's picture of the card", () => {
  // Always saved under target/browser-screenshots/; UPDATE_DOCS_SCREENSHOTS=1 also copies
  // it to docs/screenshots/ (the README's), so a normal run never dirties the tree.
  test("the card: who asks, markdown message, defaults shown, Submit / Skip / Cancel explained", async () => {
    const page = await bench("clarification-card", { width: 760, height: 1000 }, "&agent=mock");
    const overlay = page.getByTestId("clarification-overlay");
    assert.match(await page.getByTestId("clarification-requester").textContent(), /Asked by mock \(mock-agent 0\.3\.0\)/);
    assert.equal(await page.getByTestId("clarification-option-question_0-SQLite").isChecked(), true, "the default is pre-filled");
    await page.getByTestId("clarification-custom-name").focus();
    mkdirSync(screenshotDir, { recursive: true });
    const file = path.join(screenshotDir, "clarification-card.png");
    await overlay.screenshot({ path: file });
    if (process.env.UPDATE_DOCS_SCREENSHOTS === "1") {
      mkdirSync(path.join(repoRoot, "docs", "screenshots"), { recursive: true });
      copyFileSync(file, path.join(repoRoot, "docs", "screenshots", "clarification-card.png"));
    }
    await page.context().close();
  });
});

describe("answer surface outcomes (page-level)", () => {
  test("400 shows the server's message and keeps the surface", async () => {
    const page = await bench("elicitation-single");
    await reply(page, { ok: false, status: 400, code: "INVALID_ANSWER", message: "option Nope is not declared" });
    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    const outcome = page.getByTestId("clarification-outcome");
    await outcome.waitFor();
    assert.match(await outcome.textContent(), /option Nope is not declared/);
    assert.equal(await outcome.getAttribute("data-outcome"), "invalid");
    assert.equal(await page.getByTestId("clarification-overlay").isVisible(), true);
    assert.equal(await page.getByTestId("clarification-submit").isEnabled(), true, "the operator can correct and resubmit");
    await page.context().close();
  });

  test("503 says the answer did not reach the agent and keeps the surface open", async () => {
    const page = await bench("elicitation-single");
    await reply(page, { ok: false, status: 503, code: "AGENT_STREAM_NOT_CONNECTED", message: "agent stream not connected" });
    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    const outcome = page.getByTestId("clarification-outcome");
    await outcome.waitFor();
    assert.match(await outcome.textContent(), /did not reach the agent; the question stays open/);
    assert.equal(await page.getByTestId("clarification-overlay").isVisible(), true);
    assert.equal(await page.getByTestId("clarification-option-question_0-SQLite").isChecked(), true, "the answer is kept for a retry");
    await page.context().close();
  });

  test("404 says it was already answered elsewhere and withdraws the surface", async () => {
    const page = await bench("elicitation-single");
    await reply(page, { ok: false, status: 404, code: "NOT_FOUND", message: "no such pending" });
    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.match(await page.getByTestId("clarification-outcome").textContent(), /already answered elsewhere/);
    await page.context().close();
  });

  test("not_delivered says the agent disconnected and the answer was recorded only", async () => {
    const page = await bench("elicitation-single");
    await reply(page, { ok: true, body: { status: "not_delivered" } });
    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.match(await page.getByTestId("clarification-outcome").textContent(), /agent disconnected; your answer was recorded but not delivered/);
    await page.context().close();
  });

  test("a settlement by another route withdraws the surface and says why", async () => {
    const page = await bench("elicitation-single");
    await page.evaluate(() => window.__area.settle("0d7c1c7e-0c38-4f43-8d7b-5a0f3f1b2c01", "expired"));
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.equal(await page.getByTestId("clarification-outcome").textContent(), "Time ran out: nobody answered before the deadline.");
    await page.context().close();
  });

  test("a settlement arriving while our answer is in flight: the response explains it, no 'closed' flicker", async () => {
    const page = await bench("elicitation-single");
    const id = "0d7c1c7e-0c38-4f43-8d7b-5a0f3f1b2c01";
    const outcome = page.getByTestId("clarification-outcome");
    await reply(page, { defer: true, ok: true, body: { status: "answered" } });
    await page.getByTestId("clarification-option-question_0-SQLite").check();
    await page.getByTestId("clarification-submit").click();
    await page.waitForFunction(() => typeof window.__release === "function");
    await page.evaluate((pid) => window.__area.settle(pid, "answered"), id);
    assert.equal(await outcome.isHidden(), true, "no 'closed' message while our request is in flight");
    await page.evaluate(() => window.__release());
    await page.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.equal(await outcome.getAttribute("data-outcome"), "answered");
    await page.context().close();

    // Expired while in flight, then 404: say it expired, not "answered elsewhere".
    const page2 = await bench("elicitation-single");
    await reply(page2, { defer: true, ok: false, status: 404, message: "gone" });
    await page2.getByTestId("clarification-option-question_0-SQLite").check();
    await page2.getByTestId("clarification-submit").click();
    await page2.waitForFunction(() => typeof window.__release === "function");
    await page2.evaluate((pid) => window.__area.settle(pid, "expired"), id);
    await page2.evaluate(() => window.__release());
    await page2.getByTestId("clarification-overlay").waitFor({ state: "detached" });
    assert.equal(await page2.getByTestId("clarification-outcome").textContent(), "Time ran out: nobody answered before the deadline.");
    await page2.context().close();
  });

  test("readable at 375px: no horizontal scrolling", async () => {
    const page = await bench("elicitation-extended", { width: 375, height: 800 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `page overflows by ${overflow}px`);
    await screenshot(page, "overlay-375");
    await page.context().close();
  });
});
