// One question of the answer surface as form controls: options (radio or checkbox, with
// the agent's previews beside them), yes/no, or a typed field (native-field.js), with its
// prompt (only when it is its own, never the request message again), hints, counters, the
// agent's defaults pre-filled and shown as such, and its inline error.

import { controlFor, hasCustomField, hasOwnPrompt, isExclusive, isSecret } from "./answer-rules.js";
import { h, replace, uid } from "./dom.js";
import { t } from "./i18n.js";
import { controlSpec, fromLocalInput, itemsCounter, lengthCounter, toLocalInput } from "./native-field.js";
import { rich, richInline } from "./text.js";

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
  const text = typeof d === "string" ? d : JSON.stringify(d);
  return { selected: [], text: question.constraints?.format === "date-time" ? toLocalInput(text) || text : text };
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

/**
 * One question's controls; returns `{question, element, read(), focus(), showError(problem)}`.
 * `saved` is the operator's earlier input for it (a draft), shown instead of the defaults.
 */
export function renderQuestion(record, question, index, saved = null) {
  const exclusive = isExclusive(record);
  const control = controlFor(question);
  const secret = isSecret(question);
  const base = uid(`q${index}`);
  const errorId = `${base}-error`;
  const promptId = `${base}-prompt`;
  const counterId = `${base}-counter`;
  const required = question.required || exclusive;
  // The request message is shown once, above the form: a field whose prompt is only that
  // message (D10's fallback) shows its title, else its key (a lone question, its prompt).
  const ownPrompt = hasOwnPrompt(record, question);
  const lone = (record?.questions ?? []).length <= 1;
  const heading = question.title || (ownPrompt || lone ? question.prompt : null) || question.id;
  const showPrompt = ownPrompt && question.prompt !== heading;
  const defaults = defaultState(question);
  const initial = saved ?? defaults;
  const hint = rangeHint(question);
  const hintId = `${base}-hint`;
  // A typed default is pre-filled and said to be the agent's (an option's is tagged).
  const defaultHint = control !== "select" && control !== "boolean" && defaults.text !== "" && !secret ? t("clar.defaultValue", { value: defaults.text }) : null;
  const defaultId = `${base}-default`;
  const counter = control === "select" ? itemsCounter(question, counterId) : lengthCounter(question, counterId);
  const describedBy = [showPrompt ? promptId : null, hint ? hintId : null, defaultHint ? defaultId : null, counter ? counterId : null, errorId].filter(Boolean).join(" ");

  const requiredMark = required
    ? h("span", { class: "required", title: t("clar.required") }, h("span", { "aria-hidden": "true" }, ` ${t("clar.requiredMark")}`), h("span", { class: "sr-only" }, ` (${t("clar.required")})`))
    : null;
  const errorEl = h("p", { class: "field-error", id: errorId, "data-testid": `clarification-error-${question.id}`, hidden: true });
  const promptEl = showPrompt ? rich(question.prompt, { class: "prompt", id: promptId }) : null;
  const hintEl = hint || defaultHint
    ? [hint ? h("p", { class: "hint", id: hintId }, hint) : null, defaultHint ? h("p", { class: "hint default-hint", id: defaultId }, defaultHint) : null]
    : null;

  const optionInputs = [];
  let optionsBox = null;
  if (control === "select" || control === "boolean") {
    const multi = control === "select" && question.kind === "multi_select";
    const options = control === "boolean"
      ? [{ id: "true", label: t("clar.booleanYes") }, { id: "false", label: t("clar.booleanNo") }]
      : question.options;
    const checkedIds = control === "boolean" ? (initial.text ? [initial.text] : []) : initial.selected;
    const defaultIds = control === "boolean" ? (defaults.text ? [defaults.text] : []) : defaults.selected;
    optionsBox = h("div", { class: `options${multi ? " multi" : ""}` });
    for (const [i, opt] of options.entries()) {
      const id = `${base}-o${i}`;
      const descId = opt.description ? `${id}-desc` : null;
      const previewId = opt.preview ? `${id}-preview` : null;
      const input = h("input", {
        type: multi ? "checkbox" : "radio",
        id,
        name: base,
        value: opt.id,
        checked: checkedIds.includes(opt.id),
        "aria-describedby": [descId, previewId].filter(Boolean).join(" ") || null,
        "data-testid": `clarification-option-${question.id}-${opt.id}`,
      });
      optionInputs.push(input);
      optionsBox.append(
        h("div", { class: `option${opt.preview ? " with-preview" : ""}` },
          input,
          h("label", { for: id },
            h("span", { class: "option-label" }, opt.label,
              defaultIds.includes(opt.id) ? [" ", h("span", { class: "default-tag" }, t("clar.defaultTag"))] : null),
            opt.description ? h("span", { class: "option-desc", id: descId }, richInline(opt.description)) : null),
          // Claude's option preview (markdown; a code block in monospace), beside its option.
          opt.preview ? rich(opt.preview, { class: "option-preview", id: previewId, "data-testid": `clarification-preview-${question.id}-${opt.id}` }) : null),
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
    // The browser's own field for the format; the companion of options is one line.
    const spec = isCompanion ? { tag: "input", type: "text", attrs: {} } : controlSpec(question, control);
    textInput = h(spec.tag, {
      autocomplete: "off",
      ...spec.attrs,
      type: spec.type,
      id,
      name: id,
      "aria-describedby": [helpId, describedBy].filter(Boolean).join(" "),
      "aria-required": !isCompanion && required ? "true" : undefined,
      "data-testid": `clarification-custom-${question.id}`,
    });
    textInput.value = initial.text;
    textBlock = h("div", { class: `custom${isCompanion ? " companion" : ""}` },
      h("label", { for: id }, label),
      helpText ? h("p", { class: "hint", id: helpId }, helpText) : null,
      textInput,
      control !== "select" ? counter?.element : null);
  }

  // Typed text and options exclude each other on screen, as they do at the agent: the
  // typed answer wins there (AC-12i) and the options it overrides are not sent, so typing
  // unticks them; ticking one clears the text (ask_user_question: one or the other, AC-57).
  if (optionsBox && textInput) {
    textInput.addEventListener("input", () => {
      if (textInput.value.trim() !== "") for (const input of optionInputs) input.checked = false;
    });
    for (const input of optionInputs) input.addEventListener("change", () => {
      if (input.checked) textInput.value = "";
    });
  }
  const updateCounter = () => {
    if (!counter) return;
    if (control === "select") counter.update(optionInputs.filter((i) => i.checked).length);
    else counter.update(textInput?.value ?? "");
  };
  textInput?.addEventListener("input", updateCounter);
  for (const input of optionInputs) input.addEventListener("change", updateCounter);
  updateCounter();

  // Number keys pick an option of a focused single choice (1 is the first).
  if (optionsBox && !optionsBox.classList.contains("multi")) {
    optionsBox.addEventListener("keydown", (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey || !/^[1-9]$/.test(ev.key)) return;
      const input = optionInputs[Number(ev.key) - 1];
      if (!input) return;
      ev.preventDefault();
      input.checked = true;
      input.focus();
      input.dispatchEvent(new Event("change", { bubbles: true }));
    });
  }

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
      promptEl, hintEl, optionsBox, control === "select" ? counter?.element : null, clearButton, textBlock, errorEl);
  } else {
    // A lone field: the question heading is the input's label.
    replace(textBlock.querySelector("label"), heading, requiredMark);
    textBlock.querySelector("label").after(...[promptEl, hintEl].flat().filter(Boolean));
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
      const raw = textInput ? textInput.value : "";
      return {
        selected: optionInputs.filter((i) => i.checked).map((i) => i.value),
        text: textInput?.type === "datetime-local" ? fromLocalInput(raw) : raw,
      };
    },
    /** What a reload may restore: never a secret. */
    draft() {
      if (secret) return null;
      return {
        selected: optionInputs.filter((i) => i.checked).map((i) => i.value),
        text: textInput ? textInput.value : "",
      };
    },
    secret,
    focus() {
      (optionInputs.find((i) => i.checked) ?? optionInputs[0] ?? textInput)?.focus();
    },
    /** Whether the operator changed anything from what the agent pre-filled. */
    isDirty() {
      const now = control === "boolean" ? this.read() : { selected: optionInputs.filter((i) => i.checked).map((i) => i.value), text: textInput ? textInput.value : "" };
      const same = (a, b) => a.length === b.length && a.every((x) => b.includes(x));
      return (now.text ?? "").trim() !== (defaults.text ?? "").trim() || !same(now.selected, defaults.selected);
    },
    showError(problem) {
      const invalid = Boolean(problem);
      errorEl.hidden = !invalid;
      // A pattern is said in words; the pattern itself is behind a detail.
      replace(errorEl, invalid ? t(problem.key, problem.vars) : "",
        invalid && problem.pattern
          ? [" ", h("details", { class: "pattern-detail" }, h("summary", {}, t("clar.err.patternDetail")), h("code", {}, problem.pattern))]
          : null);
      element.classList.toggle("invalid", invalid);
      for (const input of [...optionInputs, textInput].filter(Boolean)) {
        if (invalid) input.setAttribute("aria-invalid", "true");
        else input.removeAttribute("aria-invalid");
      }
    },
  };
}
