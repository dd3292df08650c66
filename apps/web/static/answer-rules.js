// The answer rules of the answer surface, pure (no DOM) so they are unit-tested in Node:
// which control a question gets, the respond payloads, the inline checks (mirroring
// agentctl's validation) and what a respond result means for the operator.
//
// Rules that differ by the record's `source`:
// - "elicitation": multi-select accumulates; a selection and custom text coexist and both
//   are sent (the typed answer wins at the agent, AC-12i); zero-option questions are free
//   text alone (AC-56); only `required` questions must be answered.
// - "ask_user_question": the path that already shipped (AC-57): one option or custom text,
//   never both, every question answered.

import { t } from "./i18n.js";

const ASK_USER_QUESTION = "ask_user_question";

/** Whether the record follows the legacy ask_user_question rules. */
export function isExclusive(record) {
  return record?.source === ASK_USER_QUESTION;
}

/** Which control a question gets: "select", "boolean", "number", or "text" (free text alone). */
export function controlFor(question) {
  const kind = question.kind;
  if ((kind === "single_select" || kind === "multi_select") && (question.options ?? []).length > 0) return "select";
  if (kind === "boolean") return "boolean";
  if (kind === "number" || kind === "integer") return "number";
  return "text";
}

const SECRET_KEY_ENDINGS = ["key", "token", "secret", "password", "passwd"];

/**
 * Whether a question asks for a secret (an API key, a token, a password): the same rule as
 * kandev-elicitation's `secret.rs` — `format: password`, `writeOnly`, or a key ending in
 * key/token/secret/password. Its field is masked and its value never shown back.
 */
export function isSecret(question) {
  const c = question?.constraints ?? {};
  if (c.write_only === true || c.format === "password") return true;
  const key = String(question?.id ?? "").toLowerCase();
  return SECRET_KEY_ENDINGS.some((end) => key.endsWith(end));
}

/** Whether a question's prompt is its own description (not the request message, D10). */
export function hasOwnPrompt(record, question) {
  return Boolean(question.prompt) && question.prompt !== record?.message && question.prompt !== question.title && question.prompt !== question.id;
}

/** Whether a select question also offers a custom-answer field. */
export function hasCustomField(record, question) {
  if (controlFor(question) !== "select") return true; // text and number are typed
  return Boolean(question.custom_answer) || isExclusive(record);
}

/** The answer for one question from its state `{selected: [ids], text}`, or null when unanswered. */
export function answerFor(question, state) {
  const declared = (question.options ?? []).map((o) => o.id);
  const chosen = new Set(state.selected ?? []);
  // Declaration order, never click order (AC-55, F12).
  const selected = declared.filter((id) => chosen.has(id));
  const text = (state.text ?? "").trim();
  if (selected.length === 0 && text === "") return null;
  return { question_id: question.id, selected_options: selected, custom_text: text };
}

/** The respond payload for answering: only answered questions are sent. */
export function buildPayload(questions, states) {
  const answers = [];
  for (const q of questions) {
    const a = answerFor(q, states[q.id] ?? {});
    if (a) answers.push(a);
  }
  return { answers, rejected: false, reject_reason: "" };
}

/** What the agent's text-typed key gets: a JSON boolean or number for typed kinds, else the text. */
function typedValue(question, text) {
  if (question.kind === "boolean") return text.toLowerCase() === "true";
  if (question.kind === "number" || question.kind === "integer") return Number(text);
  return text;
}

/**
 * The `content` of the ACP `accept` response agentctl builds from `payload` (kandev-elicitation
 * `build_response`): sparse, keyed by the schema's keys; trimmed text goes to the companion
 * when there is one (the selection is then not sent), else to the question's own key when it
 * has no options (typed); otherwise the selection (one const, or consts in declaration order).
 */
export function deliveredContent(questions, payload) {
  const content = {};
  const byId = new Map(questions.map((q) => [q.id, q]));
  for (const a of payload.answers ?? []) {
    const q = byId.get(a.question_id);
    if (!q) continue;
    const text = (a.custom_text ?? "").trim();
    const options = q.options ?? [];
    if (text !== "" && q.custom_answer) {
      content[q.custom_answer.key] = text;
      continue;
    }
    if (text !== "" && options.length === 0) {
      content[q.id] = typedValue(q, text);
      continue;
    }
    const chosen = new Set(a.selected_options ?? []);
    const selected = options.map((o) => o.id).filter((id) => chosen.has(id));
    if (selected.length === 0) continue;
    content[q.id] = q.kind === "multi_select" ? selected : selected[0];
  }
  return content;
}

/** Placeholder for a secret value wherever an answer is shown. */
export const SECRET_MASK = "••••••";

/** `content` with the values of secret questions masked (for showing, never for sending). */
export function maskedContent(questions, content) {
  const shown = { ...content };
  for (const q of questions) {
    if (!isSecret(q)) continue;
    for (const key of [q.id, q.custom_answer?.key].filter(Boolean)) if (key in shown) shown[key] = SECRET_MASK;
  }
  return shown;
}

/** The payload for Skip. */
export function skipPayload() {
  return { answers: [], rejected: true, reject_reason: "skipped" };
}

function charCount(text) {
  return [...text].length;
}

/** Same structural format checks as kandev-elicitation's `format.rs`. */
export function matchesFormat(format, text) {
  switch (format) {
    case "email": {
      const at = text.indexOf("@");
      if (at <= 0) return false;
      const domain = text.slice(at + 1);
      return domain !== "" && !domain.includes("@") && !domain.startsWith(".") && !domain.endsWith(".") && !/\s/.test(text);
    }
    case "uri":
      return /^[A-Za-z][A-Za-z0-9+.-]*:[^\s\u0000-\u001f\u007f]+$/.test(text);
    case "date":
      return isDate(text);
    case "date-time": {
      const m = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/.exec(text);
      if (!m || !isDate(m[1])) return false;
      if (+m[2] > 23 || +m[3] > 59 || +m[4] > 60) return false;
      return m[7] === undefined || (+m[7] <= 23 && +m[8] <= 59);
    }
    default:
      return null; // not a format we check
  }
}

function isDate(text) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return false;
  const [y, mo, d] = [+m[1], +m[2], +m[3]];
  if (mo < 1 || mo > 12 || d < 1) return false;
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
  return d <= days;
}

/**
 * The first problem with a question's state, as `{key, vars}` for the catalogue, or null.
 * Mirrors agentctl's validation so the operator sees the problem before submitting.
 */
export function validate(record, question, state) {
  const c = question.constraints ?? {};
  const exclusive = isExclusive(record);
  const text = (state.text ?? "").trim();
  const selected = state.selected ?? [];
  const answered = selected.length > 0 || text !== "";
  const required = question.required || exclusive;
  if (!answered) return required ? { key: "clar.err.required" } : null;

  const control = controlFor(question);
  if (control === "number" && text !== "") {
    const integer = question.kind === "integer";
    const shape = integer ? /^[+-]?\d+$/ : /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
    if (!shape.test(text) || !Number.isFinite(Number(text))) {
      return { key: integer ? "clar.err.integer" : "clar.err.number" };
    }
    const n = Number(text);
    if (c.minimum != null && n < c.minimum) return { key: "clar.err.minimum", vars: { n: c.minimum } };
    if (c.maximum != null && n > c.maximum) return { key: "clar.err.maximum", vars: { n: c.maximum } };
    return null;
  }
  if (question.kind === "multi_select" && control === "select" && selected.length > 0) {
    if (c.min_items != null && selected.length < c.min_items) return { key: "clar.err.minItems", vars: { n: c.min_items } };
    if (c.max_items != null && selected.length > c.max_items) return { key: "clar.err.maxItems", vars: { n: c.max_items } };
  }
  if (text !== "" && control !== "boolean") {
    if (c.min_length != null && charCount(text) < c.min_length) return { key: "clar.err.minLength", vars: { count: c.min_length } };
    if (c.max_length != null && charCount(text) > c.max_length) return { key: "clar.err.maxLength", vars: { count: c.max_length } };
    if (c.pattern) {
      let re = null;
      try {
        re = new RegExp(c.pattern, "u");
      } catch {
        // Fails closed, as agentctl does: a pattern nothing can check never passes.
        return { key: "clar.err.patternUnusable", vars: { pattern: c.pattern }, pattern: c.pattern };
      }
      if (!re.test(text)) return { key: "clar.err.pattern", vars: { pattern: c.pattern }, pattern: c.pattern };
    }
    if (c.format && matchesFormat(c.format, text) === false) return { key: `clar.err.format.${c.format}` };
  }
  return null;
}

/**
 * What a respond (or, with `action` "cancel", a cancel) result means for the operator:
 * `{kind, message, withdraw}`. `withdraw` is true when the question is no longer open
 * (the surface should go).
 */
export function outcomeOf(result, action = "respond") {
  if (result.ok && action === "cancel") return { kind: "cancelled", message: t("clar.outcome.cancelled"), withdraw: true };
  if (result.ok) {
    const status = result.body?.status;
    if (status === "not_delivered") return { kind: "not_delivered", message: t("clar.outcome.notDelivered"), withdraw: true };
    if (status === "declined") return { kind: "declined", message: t("clar.outcome.declined"), withdraw: true };
    return { kind: "answered", message: t("clar.outcome.answered"), withdraw: true };
  }
  const err = result.error;
  switch (err?.status) {
    case 400:
      return { kind: "invalid", message: t("clar.outcome.invalid", { message: err.message }), withdraw: false };
    case 404:
      // Forward-first (§13): agentctl no longer holds it — answered, cancelled or gone.
      return { kind: "not_found", message: t("clar.outcome.notFound"), withdraw: true };
    case 409:
      return { kind: "conflict", message: t("clar.outcome.conflict", { message: err.message }), withdraw: true };
    case 503:
      return { kind: "not_connected", message: t("clar.outcome.notConnected"), withdraw: false };
    default:
      return {
        kind: "error",
        message: t("clar.outcome.error", { message: err?.status === 0 ? t("common.networkError") : err?.message ?? "?" }),
        withdraw: false,
      };
  }
}

/** How a settled record ended, for history: the record's `outcome`, else read from its status. */
export function outcomeFor(record) {
  if (record?.outcome) return record.outcome;
  switch (record?.status) {
    case "answered":
      return "answered";
    case "declined":
      return "skipped";
    case "expired":
      return "timed_out";
    case "cancelled":
      return "agent_cancelled";
    case "agent_disconnected":
      return "withdrawn";
    default:
      return null; // still pending
  }
}
