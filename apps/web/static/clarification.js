// The answer surface (spec "The answer surface"; docs/architecture.md §4.3): renders one pending
// clarification as a form, checks the answers inline (answer-rules.js), submits them and
// reports the outcome. The source-specific rules are described in answer-rules.js.

import { api as defaultApi } from "./api.js";
import { buildPayload, outcomeOf, skipPayload, validate } from "./answer-rules.js";
import { deadlineLine } from "./deadline.js";
import { h, swap, uid } from "./dom.js";
import { has, t } from "./i18n.js";
import { renderQuestion } from "./question-field.js";
import { requesterLine } from "./requester.js";
import { rich } from "./text.js";

// What the operator has entered per pending id, kept while the question is open so a
// surface rendered again (the operator left the session and came back) shows it again.
const drafts = new Map(); // pending id -> {question id -> state}

const IS_MAC = /Mac|iPhone|iPad/.test(globalThis.navigator?.platform ?? "");

/** A button beside the line that says what the agent will be told when it is used. */
function action(button, explanation) {
  const id = uid("clar-explain");
  button.setAttribute("aria-describedby", id);
  return h("div", { class: "answer-action" }, button, h("p", { class: "hint", id }, explanation));
}

/**
 * Render the answer surface for `record`. `onResult(outcome)` is called after every
 * respond or cancel attempt with the value of `outcomeOf`. `respond(pendingId, payload)`
 * and `cancel(pendingId)` default to the API; `context` says who asks (requester.js).
 */
export function renderAnswerSurface(record, { remaining = 0, respond = defaultApi.respond, cancel = defaultApi.cancelClarification, onResult = () => {}, context = {} } = {}) {
  const questions = record.questions ?? [];
  const headingId = uid("clar-heading");
  const draft = drafts.get(record.pending_id) ?? {};
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

  // Submit, Skip (decline) and Cancel (abort), each with what the agent will be told (§13).
  const keysHint = h("p", { class: "hint keys-hint" }, t("clar.keysHint", { keys: IS_MAC ? t("clar.keysMac") : t("clar.keys") }));
  const form = h("form", { novalidate: true, "aria-labelledby": headingId },
    ...fields.map((f) => f.element),
    formError,
    h("div", { class: "answer-actions" },
      action(submit, t("clar.submitExplain")),
      action(skip, t("clar.skipExplain")),
      action(cancelButton, t("clar.cancelExplain"))),
    keysHint);
  const saveDraft = () => drafts.set(record.pending_id, Object.fromEntries(fields.map((f) => [f.question.id, f.read()])));
  form.addEventListener("input", saveDraft);
  form.addEventListener("change", saveDraft);
  form.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit(submit);
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
    for (const b of [submit, skip, cancelButton]) b.disabled = value;
    submit.textContent = value && label === "respond" ? t("clar.sending") : t("clar.submit");
    cancelButton.textContent = value && label === "cancel" ? t("clar.cancelling") : t("clar.cancel");
    element.setAttribute("aria-busy", value ? "true" : "false");
  };

  async function send(kind, call) {
    if (busy) return;
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
    send("respond", () => respond(record.pending_id, buildPayload(questions, states)));
  });
  skip.addEventListener("click", () => send("respond", () => respond(record.pending_id, skipPayload())));
  cancelButton.addEventListener("click", () => send("cancel", () => cancel(record.pending_id)));

  return {
    element,
    pendingId: record.pending_id,
    setRemaining,
    isBusy: () => busy,
    focus: () => fields[0]?.focus(),
    /** Who asks changed (agentInfo arrived, the tool call was updated). */
    setContext(next) {
      requester = swap(requester, requesterLine(record, next));
    },
  };
}

/** "The question was closed (…)", in the words of its outcome when known, else its status. */
function withdrawnOutcome(status, outcome = null) {
  const key = outcome && has(`history.outcome.${outcome}`) ? `history.outcome.${outcome}` : `card.status.${status}`;
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
export function createClarificationArea({ respond = defaultApi.respond, cancel = defaultApi.cancelClarification, onSettled = () => {} } = {}) {
  const outcomeEl = h("p", { class: "clar-outcome", role: "status", "aria-live": "polite", "data-testid": "clarification-outcome", hidden: true });
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
        cancel,
        context,
        onResult(outcome, record) {
          // Settled by another route while our request was in flight: say how it closed.
          const closedAs = settledWhileBusy.get(record.pending_id);
          settledWhileBusy.delete(record.pending_id);
          showOutcome(outcome.kind === "not_found" && closedAs ? withdrawnOutcome(closedAs.status, closedAs.outcome) : outcome);
          if (outcome.withdraw) {
            drafts.delete(record.pending_id);
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
      pending = pending.filter((r) => r.pending_id !== pendingId);
      drafts.delete(pendingId);
      if (wasShown && status && !reported.has(pendingId)) {
        reported.add(pendingId);
        showOutcome(withdrawnOutcome(status, outcome));
      }
      render();
    },
    get currentPendingId() {
      return current?.pendingId ?? null;
    },
  };
  return api;
}
