// Languages (issue 16 item 7): the UI speaks Portuguese when the browser prefers it, with
// plural forms through Intl.PluralRules; and no UI string escapes the catalogue — under
// the pseudo-locale en-XA every catalogue string shows as ⟦…⟧, so any other text on any
// page must be data the API returned (task titles, agent text, question wording, ids).

import assert from "node:assert/strict";
import { test } from "node:test";
import { axeViolations, screenshot, sessionWithPendingClarification, sharedStack, waitFor } from "./harness.mjs";

const T = { timeout: 150_000 };
const stack = sharedStack({ env: { KANDEV_FEATURES_ACP_ELICITATION: "true" } });

test("Portuguese is picked from the browser's language: board, question, settings, plurals, dates", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const { session } = await sessionWithPendingClarification(kandev, "/e2e:single", "Escolher o banco de dados");
    await kandev.api.createTask("Sem sessão");
    await page.goto(`${kandev.url}/#/`);
    await page.getByRole("heading", { level: 1, name: "Tarefas" }).waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.lang), "pt");
    assert.match(await page.title(), /Kandev · Quadro/);
    const row = page.locator(`[data-testid=task-row]`).filter({ hasText: "Escolher o banco de dados" });
    assert.match(await row.textContent(), /1 sessão/, "singular through Intl.PluralRules");
    await row.getByText("Aguardando resposta").waitFor();
    // A date written the Portuguese way (day first: dd/mm/aaaa).
    assert.match(await row.locator("time").textContent(), /^\d{2}\/\d{2}\/\d{4}/);
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, "pt-board");

    await kandev.api.startSession(session.task_id, "/e2e:plain");
    await row.getByText("2 sessões").waitFor({ timeout: 20_000 });

    await page.goto(`${kandev.url}/#/sessions/${session.id}`);
    await page.getByRole("heading", { name: "O agente precisa da sua resposta" }).waitFor();
    await page.getByRole("button", { name: "Enviar resposta" }).waitFor();
    await page.getByRole("button", { name: "Pular" }).waitFor();
    await screenshot(page, "pt-session-question");

    await page.goto(`${kandev.url}/#/settings`);
    await page.getByRole("heading", { level: 1, name: "Configurações" }).waitFor();
    await page.getByText("Elicitação de formulários ACP").waitFor();
    assert.deepEqual(page.errors, []);
  }, { locale: "pt-BR" });
});

/** Every text node and user-facing attribute of the page, but icons (aria-hidden), `<time>` and data marked translate="no". */
function shownStrings(page) {
  return page.evaluate(() => {
    const out = [];
    // `translate="no"` marks data shown verbatim (the JSON the agent will receive).
    const skipped = (el) => el.closest('[aria-hidden="true"], script, style, time, [translate="no"]');
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!el || skipped(el) || !n.textContent.trim()) continue;
      out.push({ text: n.textContent, where: `${el.tagName.toLowerCase()}${el.dataset.testid ? `[${el.dataset.testid}]` : ""}.${el.className}` });
    }
    for (const el of document.body.querySelectorAll("[aria-label], [title], [placeholder], [alt]")) {
      if (skipped(el)) continue;
      for (const name of ["aria-label", "title", "placeholder", "alt"]) {
        const value = el.getAttribute(name);
        if (value) out.push({ text: value, where: `${el.tagName.toLowerCase()}@${name}` });
      }
    }
    out.push({ text: document.title, where: "document.title" });
    return out;
  });
}

const NEUTRAL = /^[\s\p{P}\p{S}\p{N}]*$/u;
const norm = (s) => s.replace(/[*_`]/g, "").replace(/\s+/g, " ");

/** The parts of `text` that are neither a catalogue string (⟦…⟧) nor punctuation nor data. */
function escapes(text, data) {
  let rest = text;
  for (let prev = null; prev !== rest;) {
    prev = rest;
    rest = rest.replace(/⟦[^⟦⟧]*⟧/g, "\u0000"); // innermost first: a string can hold another
  }
  return rest.split("\u0000")
    .map((run) => norm(run).replace(/^[\s\p{P}\p{S}]+|[\s\p{P}\p{S}]+$/gu, ""))
    .filter((run) => !NEUTRAL.test(run) && !data.includes(run));
}

/** Everything the API says that the UI may show as it is. */
async function dataOf(kandev, sessionIds) {
  const parts = [];
  const add = (...values) => values.forEach((v) => v !== undefined && v !== null && parts.push(typeof v === "string" ? v : JSON.stringify(v)));
  for (const task of await kandev.api.tasks()) {
    add(task.id, task.title, task.description);
    for (const s of task.sessions) add(s.id, s.agent, s.agent_info?.name, s.agent_info?.title, s.agent_info?.version);
  }
  for (const id of sessionIds) {
    for (const m of await kandev.api.messages(id)) add(m.content, m.metadata?.title, m.metadata?.tool_call_id);
    for (const r of await kandev.api.clarifications(id)) {
      add(r.message, r.tool_call_id, r.answered_by);
      for (const q of r.questions) {
        add(q.id, q.title, q.prompt, q.default, q.custom_answer?.title, q.custom_answer?.description, q.constraints?.pattern);
        for (const o of q.options ?? []) add(o.id, o.label, o.description, o.preview);
        for (const a of r.answer?.answers ?? []) add(a.custom_text);
      }
    }
  }
  for (const f of await kandev.api.flags()) add(f.key, f.env_var);
  add("mock");
  return norm(parts.join("\n"));
}

test("no UI string escapes the catalogue (pseudo-locale en-XA) on any page", T, async () => {
  await stack.run(async ({ kandev, page }) => {
    const single = await sessionWithPendingClarification(kandev, "/e2e:single", "Pseudo single");
    const extended = await sessionWithPendingClarification(kandev, "/e2e:extended", "Pseudo extended");
    const ask = await sessionWithPendingClarification(kandev, "/e2e:ask", "Pseudo ask");
    const plainTask = await kandev.api.createTask("Pseudo plain", "Runs the plain scenario.");
    const plain = await kandev.api.startSession(plainTask.id, "/e2e:plain");
    await kandev.api.createTask("Pseudo without session");
    // An answered question, for the history and the settled card.
    const answered = await sessionWithPendingClarification(kandev, "/e2e:single", "Pseudo answered");
    await kandev.api.call("POST", `/api/v1/clarifications/${answered.record.pending_id}/respond`, {
      answers: [{ question_id: "question_0", selected_options: ["SQLite"], custom_text: "" }], rejected: false, reject_reason: "",
    });
    await waitFor(async () => (await kandev.api.messages(plain.id)).some((m) => m.content.includes("All done")), { message: "plain run done" });

    const found = [];
    const check = async (name) => {
      const data = await dataOf(kandev, [single.session.id, extended.session.id, ask.session.id, plain.id, answered.session.id]);
      for (const { text, where } of await shownStrings(page)) {
        for (const run of escapes(text, data)) found.push(`${name} ${where}: ${JSON.stringify(run)} in ${JSON.stringify(text)}`);
      }
    };
    await page.goto(`${kandev.url}/#/`);
    await page.getByTestId("task-row").first().waitFor();
    await page.getByTestId("connection").and(page.locator("[data-state=online]")).waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.lang), "en-XA");
    await check("board");
    await sessionWithPendingClarification(kandev, "/e2e:multi", "Pseudo toast");
    await page.getByTestId("toast").first().waitFor();
    await page.getByTestId("notifications-button").click();
    await page.getByTestId("notification-item").first().waitFor();
    await check("board+notifications+toast");
    await screenshot(page, "pseudo-board");

    for (const [name, id] of [["single", single.session.id], ["extended", extended.session.id], ["ask", ask.session.id], ["plain", plain.id], ["answered", answered.session.id]]) {
      await page.goto(`${kandev.url}/#/sessions/${id}`);
      await page.getByTestId("chat").locator("li[data-key]").first().waitFor();
      if (name === "answered") await page.getByTestId("history-item").waitFor();
      await check(`session-${name}`);
    }
    // The surface's inline errors and hints.
    await page.goto(`${kandev.url}/#/sessions/${extended.session.id}`);
    await page.getByTestId("clarification-custom-ratio").fill("2");
    await page.getByTestId("clarification-submit").click();
    await page.getByTestId("clarification-error-replicas").waitFor();
    await check("session-errors");
    await screenshot(page, "pseudo-session-errors");

    await page.goto(`${kandev.url}/#/settings`);
    await page.getByTestId("flag-list").locator("li").first().waitFor();
    await check("settings");

    assert.deepEqual(found, []);
    assert.deepEqual(page.errors, []);
  }, { locale: "en-XA" });
});
