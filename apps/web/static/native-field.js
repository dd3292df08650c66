// The typed control of a question answered by typing: the browser's own field for its
// format (email, url, date, date and time, number with min/max/step, password for a
// secret), one line for a short or constrained string, several lines for free prose; and
// the counter under a field with a `maxLength`.

import { isSecret } from "./answer-rules.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

/** Longest `maxLength` that still gets a one-line field. */
const ONE_LINE_MAX = 120;

/** `{tag, type, attrs}` of the control for a typed question (control "text" or "number"). */
export function controlSpec(question, control) {
  const c = question.constraints ?? {};
  if (control === "number") {
    const integer = question.kind === "integer";
    return { tag: "input", type: "number", attrs: { min: c.minimum ?? undefined, max: c.maximum ?? undefined, step: integer ? "1" : "any", inputmode: integer ? "numeric" : "decimal" } };
  }
  if (isSecret(question)) return { tag: "input", type: "password", attrs: { autocomplete: "new-password", spellcheck: "false" } };
  const byFormat = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[c.format];
  if (byFormat) return { tag: "input", type: byFormat, attrs: byFormat === "datetime-local" ? { step: "1" } : {} };
  const short = c.pattern || c.format || (c.max_length != null && c.max_length <= ONE_LINE_MAX);
  if (short || control !== "text") return { tag: "input", type: "text", attrs: {} };
  return { tag: "textarea", type: undefined, attrs: { rows: 2, class: "answer-text" } };
}

/** An RFC 3339 date-time as a `datetime-local` value (local time), or "" when it does not parse. */
export function toLocalInput(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A `datetime-local` value as RFC 3339 (UTC, `…Z`), which is what the schema's `date-time` wants. */
export function fromLocalInput(value) {
  if (!value) return "";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? value : d.toISOString().replace(/\.000Z$/, "Z");
}

/** "12 / 40" under a field with a `maxLength`; `update(text)` keeps it current. */
export function lengthCounter(question, id) {
  const max = question.constraints?.max_length;
  if (max == null) return null;
  const el = h("p", { class: "hint counter", id, "data-testid": `clarification-counter-${question.id}` });
  const update = (text) => {
    const used = [...String(text ?? "").trim()].length;
    el.textContent = t("clar.counter", { used, max });
    el.classList.toggle("over", used > max);
  };
  update("");
  return { element: el, update };
}

/** "2 chosen (at most 3)" under a multi-select with a `maxItems`. */
export function itemsCounter(question, id) {
  const max = question.constraints?.max_items;
  if (max == null || question.kind !== "multi_select") return null;
  const el = h("p", { class: "hint counter", id, "data-testid": `clarification-counter-${question.id}` });
  const update = (count) => {
    el.textContent = t("clar.itemsCounter", { count, max });
    el.classList.toggle("over", count > max);
  };
  update(0);
  return { element: el, update };
}
