// Unit tests of the UI's pure rules, in Node (no browser): answer building and checks,
// outcomes, state icons, routing, backoff, coalesced refetch, and the message catalogue.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  answerFor,
  buildPayload,
  controlFor,
  hasCustomField,
  matchesFormat,
  outcomeOf,
  skipPayload,
  validate,
} from "../static/answer-rules.js";
import { catalogueOf, has, LOCALES, locale, pickLocale, PSEUDO_LOCALE, setLocale, t } from "../static/i18n.js";
import { compareMessages, supersedes } from "../static/live.js";
import { coalesce } from "../static/refresh.js";
import { parseRoute } from "../static/route.js";
import { latestSession, stateVariant } from "../static/state.js";
import { parseBlocks, parseInline } from "../static/text.js";
import { backoffDelay } from "../static/ws.js";

const staticDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../static");
const fixture = (name) => JSON.parse(readFileSync(new URL(`./fixtures/${name}.json`, import.meta.url), "utf8"));

const envs = { id: "question_1", kind: "multi_select", options: ["dev", "staging", "prod"].map((id) => ({ id, label: id })), constraints: {} };
const elicitation = { source: "elicitation" };
const askUser = { source: "ask_user_question" };

function shuffled(items, seed) {
  const out = items.slice();
  let s = seed;
  for (let i = out.length - 1; i > 0; i -= 1) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

describe("answers", () => {
  test("multi-select answers are in declaration order whatever the click order (AC-55, property over 200 orders)", () => {
    for (let seed = 1; seed <= 200; seed += 1) {
      const subset = shuffled(["dev", "staging", "prod"], seed).slice(0, 1 + (seed % 3));
      const clicked = shuffled(subset, seed * 7);
      const a = answerFor(envs, { selected: clicked, text: "" });
      assert.deepEqual(a.selected_options, ["dev", "staging", "prod"].filter((o) => subset.includes(o)), `clicked ${clicked}`);
    }
  });

  test("prod then dev gives [dev, prod]", () => {
    assert.deepEqual(answerFor(envs, { selected: ["prod", "dev"], text: "" }).selected_options, ["dev", "prod"]);
  });

  test("unanswered questions are left out; text is trimmed; whitespace-only is no answer", () => {
    const q0 = { id: "a", kind: "text", options: [] };
    const q1 = { id: "b", kind: "text", options: [] };
    const q2 = { id: "c", kind: "text", options: [] };
    assert.deepEqual(buildPayload([q0, q1, q2], { a: { text: "   " }, b: { text: " x " } }), {
      answers: [{ question_id: "b", selected_options: [], custom_text: "x" }],
      rejected: false,
      reject_reason: "",
    });
    assert.deepEqual(buildPayload([q0], {}), { answers: [], rejected: false, reject_reason: "" });
  });

  test("skip is rejected with no answers", () => {
    assert.deepEqual(skipPayload(), { answers: [], rejected: true, reject_reason: "skipped" });
  });

  test("controls: zero-option selects are free text (AC-56); companions and ask_user_question get a custom field", () => {
    const single = fixture("elicitation-single").questions[0];
    assert.equal(controlFor(single), "select");
    assert.equal(controlFor({ ...single, options: [] }), "text");
    assert.equal(controlFor({ kind: "boolean" }), "boolean");
    assert.equal(controlFor({ kind: "integer" }), "number");
    assert.equal(hasCustomField(elicitation, single), true);
    assert.equal(hasCustomField(elicitation, { ...single, custom_answer: null }), false);
    assert.equal(hasCustomField(askUser, { ...single, custom_answer: null }), true);
  });
});

describe("inline checks", () => {
  const ext = fixture("elicitation-extended").questions;
  const byId = Object.fromEntries(ext.map((q) => [q.id, q]));
  const problem = (q, state, record = elicitation) => validate(record, q, state)?.key ?? null;

  test("required and optional", () => {
    assert.equal(problem(byId.replicas, { text: "" }), "clar.err.required");
    assert.equal(problem(byId.ratio, { text: "" }), null);
    // ask_user_question: every question must be answered.
    assert.equal(problem({ id: "q", kind: "single_select", options: [{ id: "a" }], constraints: {} }, { selected: [] }, askUser), "clar.err.required");
  });

  test("integer and number bounds and shapes", () => {
    assert.equal(problem(byId.replicas, { text: "1" }), null);
    assert.equal(problem(byId.replicas, { text: "10" }), null);
    assert.equal(problem(byId.replicas, { text: "0" }), "clar.err.minimum");
    assert.equal(problem(byId.replicas, { text: "11" }), "clar.err.maximum");
    assert.equal(problem(byId.replicas, { text: "2.5" }), "clar.err.integer");
    assert.equal(problem(byId.ratio, { text: "0.5" }), null);
    assert.equal(problem(byId.ratio, { text: "1e-1" }), null);
    assert.equal(problem(byId.ratio, { text: "1.5" }), "clar.err.maximum");
    assert.equal(problem(byId.ratio, { text: "0x1" }), "clar.err.number");
  });

  test("pattern, length, format, items, ask_user_question length", () => {
    assert.equal(problem(byId.ticket, { text: "OPS-1" }), null);
    assert.equal(problem(byId.ticket, { text: "OPS-x" }), "clar.err.pattern");
    assert.equal(problem(byId.ticket, { text: "OPS-1234567890" }), "clar.err.maxLength");
    assert.equal(problem(byId.contact, { text: "a@b.c" }), null);
    assert.equal(problem(byId.contact, { text: "a@b." }), "clar.err.format.email");
    const limited = { ...envs, constraints: { min_items: 2, max_items: 2 } };
    assert.equal(problem(limited, { selected: ["dev"] }), "clar.err.minItems");
    assert.equal(problem(limited, { selected: ["dev", "prod", "staging"] }), "clar.err.maxItems");
    assert.equal(problem(limited, { selected: ["dev", "prod"] }), null);
    // The limit of the ask_user_question path travels in the question (agentctl sets it).
    const q = { id: "q", kind: "single_select", options: [{ id: "a" }], constraints: { max_length: 2000 } };
    assert.equal(problem(q, { text: "x".repeat(2000) }, askUser), null);
    assert.equal(problem(q, { text: "x".repeat(2001) }, askUser), "clar.err.maxLength");
  });

  test("formats match kandev-elicitation's checks", () => {
    assert.equal(matchesFormat("uri", "https://example.com/x"), true);
    assert.equal(matchesFormat("uri", "example.com"), false);
    assert.equal(matchesFormat("date", "2024-02-29"), true);
    assert.equal(matchesFormat("date", "2023-02-29"), false);
    assert.equal(matchesFormat("date-time", "2024-01-01T10:00:00Z"), true);
    assert.equal(matchesFormat("date-time", "2024-01-01T24:00:00Z"), false);
    assert.equal(matchesFormat("date-time", "2024-01-01T10:00:00.5+02:00"), true);
    assert.equal(matchesFormat("hostname", "x"), null);
  });
});

describe("outcomes", () => {
  const err = (status, message = "m") => ({ ok: false, error: { status, message } });
  test("each respond result has its message and withdraw rule", () => {
    assert.deepEqual(
      [
        outcomeOf({ ok: true, body: { status: "answered" } }),
        outcomeOf({ ok: true, body: { status: "declined" } }),
        outcomeOf({ ok: true, body: { status: "not_delivered" } }),
        outcomeOf(err(400, "bad option")),
        outcomeOf(err(404)),
        outcomeOf(err(409)),
        outcomeOf(err(503)),
        outcomeOf(err(0)),
      ].map((o) => [o.kind, o.withdraw]),
      [["answered", true], ["declined", true], ["not_delivered", true], ["invalid", false], ["not_found", true], ["conflict", true], ["not_connected", false], ["error", false]],
    );
    assert.match(outcomeOf(err(400, "bad option")).message, /bad option/);
    assert.match(outcomeOf(err(404)).message, /already answered elsewhere/);
    assert.match(outcomeOf(err(503)).message, /did not reach the agent; the question stays open/);
    assert.match(outcomeOf({ ok: true, body: { status: "not_delivered" } }).message, /agent disconnected; your answer was recorded but not delivered/);
  });
});

describe("state icons (AC-09)", () => {
  test("a pending clarification shows only waiting-for-input, whatever the state", () => {
    for (const state of ["RUNNING", "IDLE", "WAITING_FOR_INPUT", "STARTING"]) {
      assert.equal(stateVariant({ state, pending_action: "clarification" }), "waiting-for-input");
    }
    assert.equal(stateVariant({ state: "WAITING_FOR_INPUT", pending_action: null }), "waiting-for-input");
    assert.equal(stateVariant({ state: "RUNNING" }, { pending_action: "clarification" }), "waiting-for-input");
  });

  test("other states", () => {
    assert.deepEqual(
      ["CREATED", "STARTING", "RUNNING", "IDLE", "FAILED", "COMPLETED", "CANCELLED"].map((state) => stateVariant({ state })),
      ["running", "running", "running", "idle", "failed", "completed", "cancelled"],
    );
    assert.equal(stateVariant(null), "none");
  });

  test("the latest session is the newest by created_at", () => {
    const task = { sessions: [{ id: "b", created_at: "2026-01-02" }, { id: "c", created_at: "2026-01-03" }, { id: "a", created_at: "2026-01-01" }] };
    assert.equal(latestSession(task).id, "c");
    assert.equal(latestSession({ sessions: [] }), null);
  });
});

describe("plumbing", () => {
  test("routes", () => {
    assert.deepEqual(parseRoute(""), { name: "board", params: {} });
    assert.deepEqual(parseRoute("#/"), { name: "board", params: {} });
    assert.deepEqual(parseRoute("#/settings"), { name: "settings", params: {} });
    assert.deepEqual(parseRoute("#/sessions/a%20b"), { name: "session", params: { sessionId: "a b" } });
    assert.deepEqual(parseRoute("#/nowhere"), { name: "board", params: {} });
  });

  test("reconnect backoff doubles, is capped at 10 s, and keeps jitter within half the step", () => {
    assert.equal(backoffDelay(0, () => 0), 125);
    assert.equal(backoffDelay(0, () => 1), 250);
    assert.equal(backoffDelay(3, () => 1), 2000);
    assert.equal(backoffDelay(20, () => 1), 10_000);
    assert.equal(backoffDelay(20, () => 0), 5_000);
  });

  test("coalesced refetch: a burst during a fetch causes exactly one more fetch", async () => {
    let runs = 0;
    let release;
    const gate = new Promise((r) => { release = r; });
    const load = coalesce(async () => {
      runs += 1;
      if (runs === 1) await gate;
    });
    const first = load();
    load();
    load();
    load();
    release();
    await first;
    assert.equal(runs, 2);
  });
});

describe("updates in place: the newer copy wins, whichever arrives last", () => {
  test("messages by updated_at; an equal version takes the incoming copy", () => {
    const older = { id: "m", updated_at: "2026-01-01T00:00:00.000001Z", content: "Hel" };
    const newer = { id: "m", updated_at: "2026-01-01T00:00:00.000002Z", content: "Hello" };
    assert.equal(supersedes("message", newer, older), true);
    assert.equal(supersedes("message", older, newer), false, "a stale event after a fresher fetch is ignored");
    assert.equal(supersedes("message", { ...older }, older), true);
    assert.equal(supersedes("message", older, null), true);
  });

  test("a settled record never goes back to pending; a later answer or outcome still applies", () => {
    const pending = { pending_id: "p", status: "pending" };
    const settled = { pending_id: "p", status: "answered", settled_at: "2026-01-01T00:00:01Z", answer: null };
    assert.equal(supersedes("record", settled, pending), true);
    assert.equal(supersedes("record", pending, settled), false);
    assert.equal(supersedes("record", { ...settled, answer: { answers: [] } }, settled), true);
    assert.equal(supersedes("record", settled, { ...settled, answer: { answers: [] } }), false);
  });

  test("a task's version is the newest of the task and its sessions", () => {
    const task = { id: "t", updated_at: "2026-01-01", sessions: [{ updated_at: "2026-01-03" }] };
    assert.equal(supersedes("task", { ...task, sessions: [{ updated_at: "2026-01-02" }] }, task), false);
    assert.equal(supersedes("task", { ...task, sessions: [{ updated_at: "2026-01-04" }] }, task), true);
  });

  test("chat order is seq when both have it, else creation time", () => {
    assert.ok(compareMessages({ seq: 2, created_at: "b" }, { seq: 10, created_at: "a" }) < 0);
    assert.ok(compareMessages({ created_at: "2026-01-02" }, { seq: 1, created_at: "2026-01-01" }) > 0);
    assert.equal(compareMessages({ created_at: "x" }, { created_at: "x" }), 0);
  });
});

describe("agent text: the safe markdown subset", () => {
  test("blocks: paragraphs keep single line breaks; lists, fences and headings", () => {
    assert.deepEqual(parseBlocks("a\nb\n\n- x\n- y\n  more\n3. three\n4. four\n```js\n<b>*raw*</b>\n```\n# Title"), [
      { type: "p", text: "a\nb" },
      { type: "ul", items: ["x", "y\nmore"] },
      { type: "ol", start: 3, items: ["three", "four"] },
      { type: "code", text: "<b>*raw*</b>" },
      { type: "h", text: "Title" },
    ]);
    assert.deepEqual(parseBlocks("a\r\nb"), [{ type: "p", text: "a\nb" }]);
    assert.deepEqual(parseBlocks("```\nunclosed"), [{ type: "code", text: "unclosed" }]);
    assert.deepEqual(parseBlocks(""), []);
  });

  test("inline: code wins, then links, strong, emphasis; snake_case and lone stars stay text", () => {
    const flat = (spans) => spans.map((s) => (s.type === "text" ? s.text : s.type === "code" ? `<code>${s.text}</code>` : s.type === "link" ? `<link ${s.url}>${flat(s.children)}</link>` : `<${s.type}>${flat(s.children)}</${s.type}>`)).join("");
    assert.equal(flat(parseInline("**bold _and em_** and `a*b*c`")), "<strong>bold <em>and em</em></strong> and <code>a*b*c</code>");
    assert.equal(flat(parseInline("see [the docs](https://x.test/a_b) now")), "see <link https://x.test/a_b>the docs</link> now");
    assert.equal(flat(parseInline("my_var_name and 5 * 3 and a*")), "my_var_name and 5 * 3 and a*");
    assert.equal(flat(parseInline("<script>alert(1)</script>")), "<script>alert(1)</script>", "markup is just text (rendered as a text node)");
    assert.equal(flat(parseInline("``a ` b``")), "<code>a ` b</code>");
  });

  test("any text parses, and the text survives: property over 300 random strings", () => {
    const alphabet = ["*", "_", "`", "[", "]", "(", ")", "-", " ", "\n", "a", "b", "1.", "#", "~"];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const letters = (s) => s.replace(/[^ab]/g, "");
    for (let i = 0; i < 300; i += 1) {
      const text = Array.from({ length: next() % 40 }, () => alphabet[next() % alphabet.length]).join("");
      const blocks = parseBlocks(text);
      const spans = blocks.flatMap((b) => (b.type === "code" ? [{ type: "text", text: b.text }] : (b.items ?? [b.text]).flatMap((x) => parseInline(x))));
      const collect = (ss) => ss.map((s) => (s.children ? collect(s.children) + (s.url ?? "") : s.text)).join("");
      assert.equal(letters(collect(spans)), letters(text), `letters kept for ${JSON.stringify(text)}`);
    }
  });
});

describe("the message catalogue", () => {
  test("every t(\"key\") used by the UI exists in the one catalogue", () => {
    const missing = [];
    for (const file of readdirSync(staticDir).filter((f) => f.endsWith(".js"))) {
      const source = readFileSync(path.join(staticDir, file), "utf8");
      for (const m of source.matchAll(/\bt\(\s*"([^"]+)"/g)) if (!has(m[1])) missing.push(`${file}: ${m[1]}`);
    }
    assert.deepEqual(missing, []);
  });

  test("placeholders are filled; numbers are written the locale's way", () => {
    assert.equal(t("session.agent", { agent: "mock" }), "Agent: mock");
    assert.equal(t("clar.hint.range", { min: 0.5, max: 1500 }), "Between 0.5 and 1,500.");
  });

  test("plural forms come from Intl.PluralRules, not \"(s)\"", () => {
    assert.equal(t("board.sessionCount", { count: 1 }), "1 session");
    assert.equal(t("board.sessionCount", { count: 0 }), "0 sessions");
    assert.equal(t("clar.err.minLength", { count: 3 }), "Use at least 3 characters.");
    for (const [k, v] of Object.entries(catalogueOf("en"))) {
      if (typeof v === "string") assert.doesNotMatch(v, /\(s\)/, `${k} uses "(s)"`);
    }
  });

  test("the locale is the first of the browser's languages we have, else English", () => {
    assert.equal(pickLocale(["pt-BR", "en-US"]), "pt");
    assert.equal(pickLocale(["de-DE", "pt-PT"]), "pt");
    assert.equal(pickLocale(["de-DE", "fr"]), "en");
    assert.equal(pickLocale([]), "en");
    assert.equal(pickLocale(["en-XA"]), PSEUDO_LOCALE);
  });

  test("Portuguese: every string translated, in its plural forms, with the same placeholders", () => {
    const en = catalogueOf("en");
    const pt = catalogueOf("pt");
    assert.deepEqual(Object.keys(pt).sort(), Object.keys(en).sort(), "same keys");
    const holes = (v) => [...new Set(JSON.stringify(v).match(/\{\w+\}/g) ?? [])].sort();
    const sameAsEnglish = ["app.title", "app.titleWaiting", "answer.line", "session.pageTitle", "card.question", "clar.agentNamed", "clar.agentVersion", "clar.keys", "clar.keysMac", "clar.requiredMark", "settings.stabilityValue.experimental", "settings.stabilityValue.beta", "webhooks.heading", "webhooks.last"];
    const categories = new Intl.PluralRules("pt").resolvedOptions().pluralCategories;
    for (const [key, value] of Object.entries(en)) {
      assert.deepEqual(holes(pt[key]), holes(value), `${key}: placeholders`);
      assert.equal(typeof pt[key], typeof value, `${key}: plural forms or one string`);
      if (typeof value === "object") {
        for (const c of categories) assert.ok(c in pt[key] || "other" in pt[key], `${key}: form ${c}`);
        assert.ok("one" in pt[key] && "other" in pt[key], `${key}: one and other`);
      } else if (!sameAsEnglish.includes(key)) {
        assert.notEqual(pt[key], value, `${key} is not translated`);
      }
    }
    assert.deepEqual(LOCALES, ["en", "pt"]);
  });

  test("Portuguese plurals and numbers", () => {
    try {
      setLocale("pt");
      assert.equal(locale(), "pt");
      assert.equal(t("board.sessionCount", { count: 1 }), "1 sessão");
      assert.equal(t("board.sessionCount", { count: 2 }), "2 sessões");
      assert.equal(t("clar.hint.range", { min: 0.5, max: 1500 }), "Entre 0,5 e 1.500.");
      setLocale(PSEUDO_LOCALE);
      assert.equal(t("board.sessionCount", { count: 2 }), "⟦2 sessions⟧");
    } finally {
      setLocale("en");
    }
  });
});
