// The answer surface (spec "The answer surface"; docs/architecture.md §4.3): renders one pending
// clarification as a form, checks the answers inline (answer-rules.js), submits them and
// reports the outcome. The source-specific rules are described in answer-rules.js.

import { api as defaultApi } from "./api.js";
import { answerPreview } from "./answer-preview.js";
import { buildPayload, deliveredContent, isExclusive, outcomeOf, skipPayload, validate } from "./answer-rules.js";
import { deadlineLine } from "./deadline.js";
import { dropDraft, loadDraft, saveDraft } from "./drafts.js";
import { h, swap, uid } from "./dom.js";
import { has, t } from "./i18n.js";
import { renderQuestion } from "./question-field.js";
import { requesterLine } from "./requester.js";
import { rich } from "./text.js";

const IS_MAC = /Mac|iPhone|iPad/.test(globalThis.navigator?.platform ?? "");

/** A button beside the line that says what the agent will be told when it is used. */
function action(button, explanation) {
  const id = uid("clar-explain");
  button.setAttribute("aria-describedby", id);
  return h("div", { class: "answer-action" }, button, h("p", { class: "hint", id }, explanation));
}

/** Whether Enter in `target` would submit the form natively (a one-line field, a radio, a checkbox). */
function enterWouldSubmit(target) {
  return target instanceof HTMLInputElement;
}

/**
 * Render the answer surface for `record`. `onResult(outcome)` is called after every
 * respond or cancel attempt with the value of `outcomeOf`. `respond(pendingId, payload)`
 * and `cancel(pendingId)` default to the API; `context` says who asks (requester.js).
 */
export function renderAnswerSurface(record, { remaining = 0, respond = defaultApi.respond, cancel = defaultApi.cancelClarification, onResult = () => {}, context = {} } = {}) {
  const questions = record.questions ?? [];
  const headingId = uid("clar-heading");
  const draft = loadDraft(record.pending_id);
  const fields = questions.map((q, i) => renderQuestion(record, q, i, draft[q.id] ?? null));
  const formError = h("p", { class: "form-error", role: "alert", "data-testid": "clarification-form-error", hidden: true });
  const submit = h("button", { type: "submit", class: "primary", "data-testid": "clarification-submit" }, t("clar.submit"));
  const skip = h("button", { type: "button", class: "secondary", "data-testid": "clarification-skip" }, t("clar.skip"));
  const cancelButton = h("button", { type: "button", class: "danger", "data-testid": "clarification-cancel" }, t("clar.cancel"));
  const onlyPrompt = questions.length === 1 ? questions[0].prompt : null;
  const showMessage = record.message && record.message !== onlyPrompt;
  const moreEl = h("p", { class: "hint more", hidden: true });
  const setRemaining = (n) => {
    moreEl.hidden = !(n > 0);
    moreEl.textContent = n > 0 ? t("clar.more", { count: n }) : "";
  };
  setRemaining(remaining);
  let requester = requesterLine(record, context);

  const states = () => Object.fromEntries(fields.map((f) => [f.question.id, f.read()]));
  const preview = isExclusive(record) ? null : answerPreview(questions);
  const refreshPreview = () => preview?.update(buildPayload(questions, states()));
  refreshPreview();

  // An empty Submit asks first; confirmed, it still sends `accept {}` (AC-12b).
  const sendEmpty = h("button", { type: "button", class: "secondary", "data-testid": "clarification-send-empty" }, t("clar.empty.send"));
  const skipInstead = h("button", { type: "button", class: "secondary", "data-testid": "clarification-empty-skip" }, t("clar.skip"));
  const emptyConfirm = h("div", { class: "empty-confirm", role: "group", "aria-labelledby": `${headingId}-empty`, "data-testid": "clarification-empty-confirm", hidden: true },
    h("p", { id: `${headingId}-empty` }, t("clar.empty.ask")),
    h("div", { class: "actions" }, sendEmpty, skipInstead));

  // Submit, Skip (decline) and Cancel (abort), each with what the agent will be told (§13).
  const keysHint = h("p", { class: "hint keys-hint" }, t("clar.keysHint", { keys: IS_MAC ? t("clar.keysMac") : t("clar.keys") }));
  const form = h("form", { novalidate: true, "aria-labelledby": headingId },
    ...fields.map((f) => f.element),
    formError,
    preview?.element,
    emptyConfirm,
    h("div", { class: "answer-actions" },
      action(submit, t("clar.submitExplain")),
      action(skip, t("clar.skipExplain")),
      action(cancelButton, t("clar.cancelExplain"))),
    keysHint);

  // Live checks: a field's problem shows (and clears) as the operator types; "required"
  // waits for Submit or for leaving the field, so an untouched form is not all red.
  const shown = new Set(); // question ids whose error is on screen or that were left
  const fieldOf = (target) => fields.find((f) => f.element.contains(target));
  const check = (f, { force = false } = {}) => {
    const problem = validate(record, f.question, f.read());
    const quiet = problem?.key === "clar.err.required" && !force && !shown.has(f.question.id);
    f.showError(quiet ? null : problem);
    if (problem && !quiet) shown.add(f.question.id);
    return problem;
  };
  const saveNow = () => saveDraft(record.pending_id, Object.fromEntries(fields.map((f) => [f.question.id, f.draft()])));
  const onEdit = (ev) => {
    saveNow();
    refreshPreview();
    emptyConfirm.hidden = true;
    const f = fieldOf(ev.target);
    if (f) check(f);
    if (fields.every((x) => !validate(record, x.question, x.read()))) formError.hidden = true;
  };
  form.addEventListener("input", onEdit);
  form.addEventListener("change", onEdit);
  form.addEventListener("focusout", (ev) => {
    const f = fieldOf(ev.target);
    if (f && !f.element.contains(ev.relatedTarget) && f.isDirty()) {
      shown.add(f.question.id);
      check(f);
    }
  });
  form.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit(submit);
    } else if (ev.key === "Enter" && enterWouldSubmit(ev.target)) {
      // Plain Enter never sends a half-answered form (the hint says Ctrl+Enter does).
      ev.preventDefault();
    } else if (ev.key === "Escape") {
      // Escape never discards an answer: nothing here clears or closes on it, and it goes
      // no further (a panel or dialog listening above must not take typed text with it).
      ev.preventDefault();
      ev.stopPropagation();
    }
  });

  const element = h("section", {
    class: "clarification-overlay",
    "data-testid": "clarification-overlay",
    "data-pending-id": record.pending_id,
    "data-source": record.source ?? "elicitation",
    "aria-labelledby": headingId,
    tabindex: "-1",
  },
  h("h2", { id: headingId }, t("clar.heading")),
  requester,
  deadlineLine(record),
  showMessage ? rich(record.message, { class: "clar-message" }) : null,
  moreEl,
  form);

  let busy = false;
  const setBusy = (value, label) => {
    busy = value;
    for (const b of [submit, skip, cancelButton, sendEmpty, skipInstead]) b.disabled = value;
    submit.textContent = value && label === "respond" ? t("clar.sending") : t("clar.submit");
    cancelButton.textContent = value && label === "cancel" ? t("clar.cancelling") : t("clar.cancel");
    element.setAttribute("aria-busy", value ? "true" : "false");
  };

  async function send(kind, call) {
    if (busy) return;
    emptyConfirm.hidden = true;
    setBusy(true, kind);
    let result;
    try {
      result = { ok: true, body: await call() };
    } catch (error) {
      result = { ok: false, error };
    }
    setBusy(false);
    onResult(outcomeOf(result, kind), record);
  }

  const respondWith = (payload) => send("respond", () => respond(record.pending_id, payload));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const now = states();
    let firstInvalid = null;
    for (const f of fields) {
      shown.add(f.question.id);
      if (check(f, { force: true }) && !firstInvalid) firstInvalid = f;
    }
    if (firstInvalid) {
      formError.hidden = false;
      formError.textContent = t("clar.fixErrors");
      firstInvalid.focus();
      return;
    }
    formError.hidden = true;
    const payload = buildPayload(questions, now);
    if (!isExclusive(record) && Object.keys(deliveredContent(questions, payload)).length === 0) {
      emptyConfirm.hidden = false;
      sendEmpty.focus();
      return;
    }
    respondWith(payload);
  });
  sendEmpty.addEventListener("click", () => respondWith(buildPayload(questions, states())));
  skipInstead.addEventListener("click", () => respondWith(skipPayload()));
  skip.addEventListener("click", () => respondWith(skipPayload()));
  const dirty = () => fields.some((f) => f.isDirty());
  cancelButton.addEventListener("click", () => {
    // Cancelling throws away what was typed: ask first when there is something.
    if (dirty() && !globalThis.confirm(t("clar.confirmCancel"))) return;
    send("cancel", () => cancel(record.pending_id));
  });

  return {
    element,
    pendingId: record.pending_id,
    setRemaining,
    isBusy: () => busy,
    isDirty: dirty,
    focus: () => (fields[0] ? fields[0].focus() : element.focus()),
    /** Who asks changed (agentInfo arrived, the tool call was updated). */
    setContext(next) {
      requester = swap(requester, requesterLine(record, next));
    },
  };
}

/** How an outcome reads by meaning: answered green, skipped neutral, timed out and cancelled amber, withdrawn grey. */
export function toneOf(kind) {
  switch (kind) {
    case "answered":
      return "ok";
    case "declined":
    case "skipped":
    case "answered_empty":
      return "neutral";
    case "cancelled":
    case "timed_out":
    case "not_delivered":
    case "invalid":
    case "not_connected":
    case "error":
      return "warn";
    default:
      return "muted"; // withdrawn, agent_cancelled, turn_cancelled, not_found, conflict
  }
}

/** How a question closed by another route, in one sentence per outcome (never "closed (Closed: …)"). */
function withdrawnOutcome(status, outcome = null) {
  const key = outcome && has(`clar.closed.${outcome}`) ? `clar.closed.${outcome}` : `clar.closed.status.${status}`;
  const message = has(key) ? t(key) : t("clar.closed.other");
  return { kind: "withdrawn", tone: toneOf(outcome ?? "withdrawn"), message, withdraw: true };
}

function byCreated(a, b) {
  return String(a.created_at ?? "").localeCompare(String(b.created_at ?? ""));
}

/**
 * The clarification area of a session view: an outcome line that outlives the surface,
 * and the surface for the oldest pending clarification (one at a time, so the test ids
 * of its controls stay unique on the page).
 */
export function createClarificationArea({ respond = defaultApi.respond, cancel = defaultApi.cancelClarification, onSettled = () => {} } = {}) {
  const outcomeEl = h("p", { class: "clar-outcome", role: "status", "aria-live": "polite", "data-testid": "clarification-outcome", tabindex: "-1", hidden: true });
  const slot = h("div", { class: "clar-slot" });
  const element = h("div", { class: "clar-area" }, outcomeEl, slot);
  let current = null;
  let pending = [];
  const reported = new Set(); // pending ids whose settlement we already explained
  const settledWhileBusy = new Map(); // pending id -> {status, outcome}, while our own request is in flight
  let context = {}; // who asks (requester.js)

  function showOutcome(outcome) {
    outcomeEl.hidden = false;
    outcomeEl.textContent = outcome.message;
    outcomeEl.dataset.outcome = outcome.kind;
    outcomeEl.className = `clar-outcome tone-${outcome.tone ?? toneOf(outcome.kind)}`;
  }

  // Focus follows the work: to the next question after an action or a withdrawal that took
  // the focused one away, else to the outcome line; never left on <body>.
  function placeFocus() {
    if (current) current.focus();
    else if (!outcomeEl.hidden) outcomeEl.focus({ preventScroll: true });
  }
  const focusIsFree = () => {
    const active = document.activeElement;
    return !active || active === document.body || active.matches?.("main, .clar-outcome") || element.contains(active);
  };

  function render() {
    const open = pending.filter((r) => (r.status ?? "pending") === "pending").sort(byCreated);
    const next = open[0];
    // A surface whose answer is in flight stays until its response explains the outcome.
    if (current && !current.isBusy() && (!next || open.every((r) => r.pending_id !== current.pendingId))) {
      current.element.remove();
      current = null;
    }
    if (!current && next) {
      const takeFocus = focusIsFree();
      current = renderAnswerSurface(next, {
        remaining: open.length - 1,
        respond,
        cancel,
        context,
        onResult(outcome, record) {
          // Settled by another route while our request was in flight: say how it closed.
          const closedAs = settledWhileBusy.get(record.pending_id);
          settledWhileBusy.delete(record.pending_id);
          showOutcome(outcome.kind === "not_found" && closedAs ? withdrawnOutcome(closedAs.status, closedAs.outcome) : outcome);
          if (outcome.withdraw) {
            dropDraft(record.pending_id);
            reported.add(record.pending_id);
            api.settle(record.pending_id, null);
            onSettled(record.pending_id);
            placeFocus();
          } else {
            render(); // it may have been settled elsewhere meanwhile
          }
        },
      });
      slot.append(current.element);
      // A question that arrives (or is opened from the board) takes focus, unless the
      // operator is busy elsewhere on the page.
      if (takeFocus) current.focus();
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
    /** Who asks: `{agent, agentInfo, toolCall(id), showToolCall(id)}` (requester.js). */
    setContext(next) {
      context = next;
      current?.setContext(next);
    },
    /** A clarification settled by any route: withdraw its surface and say why. */
    settle(pendingId, status, outcome = null) {
      const wasShown = current?.pendingId === pendingId;
      if (wasShown && current.isBusy()) {
        // Our own request is in flight; its response explains the outcome (and withdraws).
        if (status) settledWhileBusy.set(pendingId, { status, outcome });
        return;
      }
      const hadFocus = wasShown && current.element.contains(document.activeElement);
      pending = pending.filter((r) => r.pending_id !== pendingId);
      dropDraft(pendingId);
      if (wasShown && status && !reported.has(pendingId)) {
        reported.add(pendingId);
        showOutcome(withdrawnOutcome(status, outcome));
      }
      render();
      if (hadFocus || (wasShown && document.activeElement === document.body)) placeFocus();
    },
    get currentPendingId() {
      return current?.pendingId ?? null;
    },
    /** Whether the question on screen has an answer being typed (for confirmations). */
    hasDraft() {
      return Boolean(current?.isDirty());
    },
    /** Move focus to the question on screen; false when there is none. */
    focusQuestion() {
      if (!current) return false;
      current.focus();
      return true;
    },
  };
  return api;
}
