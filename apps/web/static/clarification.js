// The answer surface (spec "The answer surface"; ARCHITECTURE §4.3): renders one pending
// clarification as a form, checks the answers inline, submits them and reports the outcome.
//
// Rules that differ by the record's `source`:
// - "elicitation": multi-select accumulates; a selection and custom text coexist and both
//   are sent (the options only *look* deselected while text is typed, because the typed
//   answer wins at the agent, AC-12i); zero-option questions are free text alone (AC-56);
//   only `required` questions must be answered.
// - "ask_user_question": the path that already shipped (AC-57): one option or custom text,
//   never both (typing clears the choice, choosing clears the text), every question answered.

import { api as defaultApi } from "./api.js";
import { h, replace, uid } from "./dom.js";
import { has, t } from "./i18n.js";

const ASK_USER_QUESTION = "ask_user_question";
const ASK_CUSTOM_MAX = 2000;

// ---------------------------------------------------------------------------------------
// Pure rules (no DOM), exported for tests.

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
    if (exclusive && charCount(text) > ASK_CUSTOM_MAX) return { key: "clar.err.tooLong", vars: { n: ASK_CUSTOM_MAX } };
    if (c.min_length != null && charCount(text) < c.min_length) return { key: "clar.err.minLength", vars: { n: c.min_length } };
    if (c.max_length != null && charCount(text) > c.max_length) return { key: "clar.err.maxLength", vars: { n: c.max_length } };
    if (c.pattern) {
      let re = null;
      try {
        re = new RegExp(c.pattern, "u");
      } catch {
        re = null; // an invalid pattern is agentctl's to judge
      }
      if (re && !re.test(text)) return { key: "clar.err.pattern", vars: { pattern: c.pattern } };
    }
    if (c.format && matchesFormat(c.format, text) === false) return { key: `clar.err.format.${c.format}` };
  }
  return null;
}

/**
 * What a respond result means for the operator: `{kind, message, withdraw}`.
 * `withdraw` is true when the question is no longer open (the surface should go).
 */
export function outcomeOf(result) {
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

// ---------------------------------------------------------------------------------------
// The form.

function defaultState(question) {
  const d = question.default;
  const control = controlFor(question);
  if (d === null || d === undefined) return { selected: [], text: "" };
  if (control === "select") {
    const ids = new Set((question.options ?? []).map((o) => o.id));
    const wanted = Array.isArray(d) ? d.map(String) : [String(d)];
    return { selected: wanted.filter((id) => ids.has(id)), text: "" };
  }
  if (control === "boolean") return { selected: [], text: d === true || d === "true" ? "true" : d === false || d === "false" ? "false" : "" };
  return { selected: [], text: typeof d === "string" ? d : JSON.stringify(d) };
}

function rangeHint(question) {
  const c = question.constraints ?? {};
  if (controlFor(question) === "number") {
    if (c.minimum != null && c.maximum != null) return t("clar.hint.range", { min: c.minimum, max: c.maximum });
    if (c.minimum != null) return t("clar.hint.min", { min: c.minimum });
    if (c.maximum != null) return t("clar.hint.max", { max: c.maximum });
  }
  if (question.kind === "multi_select" && (c.min_items != null || c.max_items != null)) {
    return t("clar.hint.items", { min: c.min_items ?? 0, max: c.max_items ?? (question.options ?? []).length });
  }
  return null;
}

/** One question's controls; returns `{element, read(), focus(), showError(problem)}`. */
function renderQuestion(record, question, index) {
  const exclusive = isExclusive(record);
  const control = controlFor(question);
  const base = uid(`q${index}`);
  const errorId = `${base}-error`;
  const promptId = `${base}-prompt`;
  const required = question.required || exclusive;
  const heading = question.title || question.prompt || question.id;
  const showPrompt = question.prompt && question.prompt !== heading;
  const hint = rangeHint(question);
  const hintId = `${base}-hint`;
  const describedBy = [showPrompt ? promptId : null, hint ? hintId : null, errorId].filter(Boolean).join(" ");
  const initial = defaultState(question);

  const requiredMark = required
    ? h("span", { class: "required", title: t("clar.required") }, h("span", { "aria-hidden": "true" }, ` ${t("clar.requiredMark")}`), h("span", { class: "sr-only" }, ` (${t("clar.required")})`))
    : null;
  const errorEl = h("p", { class: "field-error", id: errorId, "data-testid": `clarification-error-${question.id}`, hidden: true });
  const promptEl = showPrompt ? h("p", { class: "prompt", id: promptId }, question.prompt) : null;
  const hintEl = hint ? h("p", { class: "hint", id: hintId }, hint) : null;

  const optionInputs = [];
  let optionsBox = null;
  if (control === "select" || control === "boolean") {
    const multi = control === "select" && question.kind === "multi_select";
    const options = control === "boolean"
      ? [{ id: "true", label: t("clar.booleanYes") }, { id: "false", label: t("clar.booleanNo") }]
      : question.options;
    const checkedIds = control === "boolean" ? (initial.text ? [initial.text] : []) : initial.selected;
    optionsBox = h("div", { class: `options${multi ? " multi" : ""}` });
    for (const [i, opt] of options.entries()) {
      const id = `${base}-o${i}`;
      const descId = opt.description ? `${id}-desc` : null;
      const input = h("input", {
        type: multi ? "checkbox" : "radio",
        id,
        name: base,
        value: opt.id,
        checked: checkedIds.includes(opt.id),
        "aria-describedby": descId,
        "data-testid": `clarification-option-${question.id}-${opt.id}`,
      });
      optionInputs.push(input);
      optionsBox.append(
        h("div", { class: "option" },
          input,
          h("label", { for: id },
            h("span", { class: "option-label" }, opt.label),
            opt.description ? h("span", { class: "option-desc", id: descId }, opt.description) : null)),
      );
    }
  }

  let textInput = null;
  let textBlock = null;
  if (control !== "boolean" && hasCustomField(record, question)) {
    const id = `${base}-text`;
    const custom = question.custom_answer;
    const isCompanion = control === "select";
    const label = isCompanion ? custom?.title || t("clar.otherLabel") : t("clar.customLabel");
    const helpText = isCompanion ? custom?.description || (exclusive ? t("clar.customHintExclusive") : t("clar.customHintCoexist")) : null;
    const helpId = helpText ? `${id}-help` : null;
    textInput = h("input", {
      type: "text",
      id,
      name: id,
      autocomplete: "off",
      inputmode: control === "number" ? (question.kind === "integer" ? "numeric" : "decimal") : undefined,
      "aria-describedby": [helpId, describedBy].filter(Boolean).join(" "),
      "aria-required": !isCompanion && required ? "true" : undefined,
      "data-testid": `clarification-custom-${question.id}`,
    });
    textInput.value = initial.text;
    textBlock = h("div", { class: `custom${isCompanion ? " companion" : ""}` },
      h("label", { for: id }, label),
      helpText ? h("p", { class: "hint", id: helpId }, helpText) : null,
      textInput);
  }

  const syncSuperseded = () => {
    // Elicitation: the typed answer wins at the agent, so the options look deselected.
    if (optionsBox && textInput && !exclusive) optionsBox.classList.toggle("superseded", textInput.value.trim() !== "");
  };
  if (exclusive && textInput) {
    textInput.addEventListener("input", () => {
      if (textInput.value !== "") for (const input of optionInputs) input.checked = false;
    });
    for (const input of optionInputs) input.addEventListener("change", () => {
      if (input.checked) textInput.value = "";
    });
  }
  textInput?.addEventListener("input", syncSuperseded);
  syncSuperseded();

  let clearButton = null;
  if (control === "select" && question.kind === "single_select" && !required) {
    clearButton = h("button", { type: "button", class: "link", "data-testid": `clarification-clear-${question.id}` }, t("clar.clearChoice"));
    clearButton.addEventListener("click", () => {
      for (const input of optionInputs) input.checked = false;
    });
  }

  // Option groups get fieldset/legend; a lone text or number field gets a plain label.
  let element;
  if (optionsBox) {
    element = h("fieldset", { class: "question", "data-question-id": question.id, "aria-describedby": describedBy },
      h("legend", {}, heading, requiredMark),
      promptEl, hintEl, optionsBox, clearButton, textBlock, errorEl);
  } else {
    // A lone field: the question heading is the input's label.
    replace(textBlock.querySelector("label"), heading, requiredMark);
    textBlock.querySelector("label").after(promptEl ?? "", hintEl ?? "");
    element = h("div", { class: "question", "data-question-id": question.id }, textBlock, errorEl);
  }

  return {
    question,
    element,
    read() {
      if (control === "boolean") {
        const on = optionInputs.find((i) => i.checked);
        return { selected: [], text: on ? on.value : "" };
      }
      return {
        selected: optionInputs.filter((i) => i.checked).map((i) => i.value),
        text: textInput ? textInput.value : "",
      };
    },
    focus() {
      (optionInputs.find((i) => i.checked) ?? optionInputs[0] ?? textInput)?.focus();
    },
    showError(problem) {
      const invalid = Boolean(problem);
      errorEl.hidden = !invalid;
      errorEl.textContent = invalid ? t(problem.key, problem.vars) : "";
      element.classList.toggle("invalid", invalid);
      for (const input of [...optionInputs, textInput].filter(Boolean)) {
        if (invalid) input.setAttribute("aria-invalid", "true");
        else input.removeAttribute("aria-invalid");
      }
    },
  };
}

/**
 * Render the answer surface for `record`. `onResult(outcome)` is called after every
 * respond attempt with the value of `outcomeOf`. `respond(pendingId, payload)` defaults to the API.
 */
export function renderAnswerSurface(record, { remaining = 0, respond = defaultApi.respond, onResult = () => {} } = {}) {
  const questions = record.questions ?? [];
  const headingId = uid("clar-heading");
  const fields = questions.map((q, i) => renderQuestion(record, q, i));
  const formError = h("p", { class: "form-error", role: "alert", "data-testid": "clarification-form-error", hidden: true });
  const submit = h("button", { type: "submit", class: "primary", "data-testid": "clarification-submit" }, t("clar.submit"));
  const skip = h("button", { type: "button", class: "secondary", "data-testid": "clarification-skip" }, t("clar.skip"));
  const onlyPrompt = questions.length === 1 ? questions[0].prompt : null;
  const showMessage = record.message && record.message !== onlyPrompt;
  const moreEl = h("p", { class: "hint more", hidden: true });
  const setRemaining = (n) => {
    moreEl.hidden = !(n > 0);
    moreEl.textContent = n > 0 ? t("clar.more", { count: n }) : "";
  };
  setRemaining(remaining);

  const form = h("form", { novalidate: true, "aria-labelledby": headingId },
    ...fields.map((f) => f.element),
    formError,
    h("div", { class: "actions" }, submit, skip));

  const element = h("section", {
    class: "clarification-overlay",
    "data-testid": "clarification-overlay",
    "data-pending-id": record.pending_id,
    "data-source": record.source ?? "elicitation",
    "aria-labelledby": headingId,
  },
  h("h2", { id: headingId }, t("clar.heading")),
  showMessage ? h("p", { class: "clar-message" }, record.message) : null,
  moreEl,
  form);

  let busy = false;
  const setBusy = (value) => {
    busy = value;
    submit.disabled = value;
    skip.disabled = value;
    submit.textContent = value ? t("clar.sending") : t("clar.submit");
    element.setAttribute("aria-busy", value ? "true" : "false");
  };

  async function send(payload) {
    if (busy) return;
    setBusy(true);
    let result;
    try {
      result = { ok: true, body: await respond(record.pending_id, payload) };
    } catch (error) {
      result = { ok: false, error };
    }
    setBusy(false);
    const outcome = outcomeOf(result);
    onResult(outcome, record);
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const states = {};
    let firstInvalid = null;
    for (const f of fields) {
      states[f.question.id] = f.read();
      const problem = validate(record, f.question, states[f.question.id]);
      f.showError(problem);
      if (problem && !firstInvalid) firstInvalid = f;
    }
    if (firstInvalid) {
      formError.hidden = false;
      formError.textContent = t("clar.fixErrors");
      firstInvalid.focus();
      return;
    }
    formError.hidden = true;
    send(buildPayload(questions, states));
  });
  skip.addEventListener("click", () => send(skipPayload()));

  return { element, pendingId: record.pending_id, setRemaining, isBusy: () => busy, focus: () => fields[0]?.focus() };
}

function withdrawnOutcome(status) {
  const key = `card.status.${status}`;
  return { kind: "withdrawn", message: t("clar.withdrawn", { status: has(key) ? t(key) : status }), withdraw: true };
}

function byCreated(a, b) {
  return String(a.created_at ?? "").localeCompare(String(b.created_at ?? ""));
}

/**
 * The clarification area of a session view: an outcome line that outlives the surface,
 * and the surface for the oldest pending clarification (one at a time, so the test ids
 * of its controls stay unique on the page).
 */
export function createClarificationArea({ respond = defaultApi.respond, onSettled = () => {} } = {}) {
  const outcomeEl = h("p", { class: "clar-outcome", role: "status", "aria-live": "polite", "data-testid": "clarification-outcome", hidden: true });
  const slot = h("div", { class: "clar-slot" });
  const element = h("div", { class: "clar-area" }, outcomeEl, slot);
  let current = null;
  let pending = [];
  const reported = new Set(); // pending ids whose settlement we already explained
  const settledWhileBusy = new Map(); // pending id -> status, while our own respond is in flight

  function showOutcome(outcome) {
    outcomeEl.hidden = false;
    outcomeEl.textContent = outcome.message;
    outcomeEl.dataset.outcome = outcome.kind;
    outcomeEl.className = `clar-outcome ${outcome.withdraw && outcome.kind !== "not_found" && outcome.kind !== "not_delivered" ? "ok" : "warn"}`;
  }

  function render() {
    const open = pending.filter((r) => (r.status ?? "pending") === "pending").sort(byCreated);
    const next = open[0];
    // A surface whose answer is in flight stays until its response explains the outcome.
    if (current && !current.isBusy() && (!next || open.every((r) => r.pending_id !== current.pendingId))) {
      current.element.remove();
      current = null;
    }
    if (!current && next) {
      current = renderAnswerSurface(next, {
        remaining: open.length - 1,
        respond,
        onResult(outcome, record) {
          // Settled by another route while our request was in flight: say how it closed.
          const closedAs = settledWhileBusy.get(record.pending_id);
          settledWhileBusy.delete(record.pending_id);
          showOutcome(outcome.kind === "not_found" && closedAs ? withdrawnOutcome(closedAs) : outcome);
          if (outcome.withdraw) {
            reported.add(record.pending_id);
            api.settle(record.pending_id, null);
            onSettled(record.pending_id);
          } else {
            render(); // it may have been settled elsewhere meanwhile
          }
        },
      });
      slot.append(current.element);
    } else if (current) {
      current.setRemaining(open.length - 1);
    }
  }

  const api = {
    element,
    /** Show the pending records of the session (any order; settled ones are ignored). */
    update(records) {
      pending = records.slice();
      render();
    },
    /** A clarification settled by any route: withdraw its surface and say why. */
    settle(pendingId, status) {
      const wasShown = current?.pendingId === pendingId;
      if (wasShown && current.isBusy()) {
        // Our own answer is in flight; its response explains the outcome (and withdraws).
        if (status) settledWhileBusy.set(pendingId, status);
        return;
      }
      pending = pending.filter((r) => r.pending_id !== pendingId);
      if (wasShown && status && !reported.has(pendingId)) {
        reported.add(pendingId);
        showOutcome(withdrawnOutcome(status));
      }
      render();
    },
    get currentPendingId() {
      return current?.pendingId ?? null;
    },
  };
  return api;
}
