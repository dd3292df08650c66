// The session's settled questions (docs/architecture.md §13): each with the answer given, how it
// ended (answered, skipped, cancelled, timed out, agent cancelled, withdrawn), by whom and
// when — kept in place from the records the session view applies.

import { outcomeFor } from "./answer-rules.js";
import { deliveredLines, deliveredList } from "./answer-summary.js";
import { h, swap, timeEl } from "./dom.js";
import { t } from "./i18n.js";
import { KeyedList } from "./live.js";
import { rich } from "./text.js";

/** What answered a record: "rule" (`rule:<name>`), "deadline" (`deadline:<choice>`) or "operator". */
export function answererKind(who) {
  if (typeof who === "string" && who.startsWith("rule:")) return "rule";
  if (typeof who === "string" && who.startsWith("deadline:")) return "deadline";
  return "operator";
}

/** Who settled a record, in words; null when no operator, rule or deadline choice did. */
export function settledBy(record) {
  const who = record?.answered_by;
  if (!who) return null;
  const kind = answererKind(who);
  if (kind === "rule") return who.slice("rule:".length);
  if (kind === "deadline") return t(`history.deadline.${who.slice("deadline:".length)}`);
  return who === "local" ? t("history.byLocal") : who;
}

function answererBadge(record) {
  const kind = answererKind(record.answered_by);
  if (kind === "operator") return null;
  return h("span", { class: `pill pill-by-${kind}`, "data-testid": "history-by-badge", "data-kind": kind }, t(`history.badge.${kind}`));
}

// The answerer's badge (rules, deadlines) and "By …", spaced only when there is a badge.
function byLine(record, who) {
  const badge = answererBadge(record);
  const by = t("history.by", { who });
  return badge ? [badge, " ", by] : [by];
}

function questionText(record) {
  const questions = record.questions ?? [];
  if (record.message) return record.message;
  return questions.map((q) => q.title || q.prompt || q.id).join(" · ");
}

function historyItem(record) {
  const outcome = outcomeFor(record) ?? "answered";
  const answered = outcome === "answered" && record.answer && !record.answer.rejected;
  // An accept with nothing in it is what the agent reads as skipped: not a green "Answered".
  const shownAs = answered && deliveredLines(record.answer, record.questions ?? []).length === 0 ? "answered_empty" : outcome;
  const who = settledBy(record);
  return h("li", { class: `history-item outcome-${outcome}`, "data-testid": "history-item", "data-pending-id": record.pending_id, "data-outcome": outcome },
    h("div", { class: "msg-head" },
      h("span", { class: `pill pill-outcome-${shownAs}`, "data-testid": "history-outcome" }, t(`history.outcome.${shownAs}`)),
      record.settled_at ? timeEl(record.settled_at, { "data-testid": "history-when" }) : null),
    rich(questionText(record), { class: "history-question" }),
    answered
      ? h("div", { class: "history-answer", "data-testid": "history-answer" }, h("p", { class: "history-answer-head" }, t("history.delivered")), deliveredList(record.answer, record.questions ?? []))
      : h("p", { class: "history-answer", "data-testid": "history-answer" }, t("history.noAnswer")),
    who ? h("p", { class: "history-by", "data-testid": "history-by" }, ...byLine(record, who)) : null);
}

function bySettled(a, b) {
  return String(a.settled_at ?? "").localeCompare(String(b.settled_at ?? ""));
}

/** The history section; `apply(record)` shows a settled record (pending ones are ignored). */
export function createHistory() {
  const list = h("ol", { class: "history-list" });
  const element = h("section", { class: "history", "aria-labelledby": "history-h", "data-testid": "clarification-history", hidden: true },
    h("h2", { id: "history-h" }, t("history.heading")),
    list);
  const items = new KeyedList(list, { kind: "record", key: (r) => r.pending_id, render: historyItem, compare: bySettled, swap });
  return {
    element,
    apply(record) {
      if (!record?.pending_id || (record.status ?? "pending") === "pending") return;
      items.upsert(record);
      element.hidden = items.size === 0;
    },
  };
}
