// The answer surface (spec "The answer surface"; ARCHITECTURE §4.3): renders one pending
// clarification as a form, checks the answers inline (answer-rules.js), submits them and
// reports the outcome. The source-specific rules are described in answer-rules.js.

import { api as defaultApi } from "./api.js";
import { buildPayload, controlFor, hasCustomField, isExclusive, outcomeOf, skipPayload, validate } from "./answer-rules.js";
import { h, replace, uid } from "./dom.js";
import { has, t } from "./i18n.js";

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
