// What was delivered, per question and labelled, for the chat card and the history: the
// value the agent received for each answered question (by the rule of answer-rules.js
// `deliveredContent`), a selection that the typed answer overrode marked as not sent,
// booleans as Yes/No, and a secret never shown.

import { deliveredContent, isSecret } from "./answer-rules.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

function label(question, lone) {
  return question.title || (lone ? null : question.id) || question.id;
}

function words(question, value) {
  if (typeof value === "boolean") return value ? t("clar.booleanYes") : t("clar.booleanNo");
  const labels = new Map((question.options ?? []).map((o) => [o.id, o.label ?? o.id]));
  if (Array.isArray(value)) return value.map((id) => labels.get(id) ?? id).join(", ");
  if (typeof value === "string" && labels.has(value) && !question.custom_answer) return labels.get(value);
  return String(value);
}

/**
 * `[{questionId, label, value, notSent}]` for `answer` (an operator answer as stored):
 * `value` is what the agent received in words, `notSent` the options the operator had
 * chosen that were not sent because typed text replaced them (or text with nowhere to go).
 */
export function deliveredLines(answer, questions = []) {
  if (!answer || answer.rejected) return [];
  const content = deliveredContent(questions, answer);
  const lone = questions.length === 1;
  const lines = [];
  for (const q of questions) {
    const a = (answer.answers ?? []).find((x) => x.question_id === q.id);
    if (!a) continue;
    const key = q.custom_answer && q.custom_answer.key in content ? q.custom_answer.key : q.id;
    const sent = key in content;
    const chosen = (a.selected_options ?? []).map((id) => (q.options ?? []).find((o) => o.id === id)?.label ?? id);
    const typed = (a.custom_text ?? "").trim();
    const textSent = typed !== "" && ((q.custom_answer && q.custom_answer.key in content) || ((q.options ?? []).length === 0 && q.id in content));
    let notSent = null;
    if (textSent && q.custom_answer && chosen.length > 0) notSent = chosen.join(", "); // the typed answer replaced them
    else if (typed !== "" && !textSent) notSent = isSecret(q) ? t("answer.hidden") : typed; // text with nowhere to go
    if (!sent && !notSent) continue;
    lines.push({
      questionId: q.id,
      label: label(q, lone),
      value: sent ? (isSecret(q) ? t("answer.hidden") : words(q, content[key])) : null,
      notSent,
    });
  }
  return lines;
}

/** One line of words per question: "Datastore: CockroachDB". */
export function answerSummary(answer, questions = []) {
  if (!answer) return "";
  if (answer.rejected) return t("card.status.declined");
  return deliveredLines(answer, questions)
    .filter((l) => l.value !== null)
    .map((l) => t("answer.line", { label: l.label, value: l.value }))
    .join("; ");
}

/** The delivered answer as a labelled list, or a line saying nothing was sent. */
export function deliveredList(answer, questions, attrs = {}) {
  const lines = deliveredLines(answer, questions);
  if (lines.length === 0) return h("p", { ...attrs, class: `${attrs.class ?? ""} empty-answer`.trim() }, t("answer.empty"));
  return h("dl", { ...attrs, class: `${attrs.class ?? ""} delivered`.trim() },
    lines.map((l) => [
      h("dt", {}, l.label),
      h("dd", { "data-question-id": l.questionId },
        l.value !== null ? l.value : h("span", { class: "muted" }, t("answer.nothingSent")),
        l.notSent ? h("span", { class: "not-sent", "data-testid": "answer-not-sent" }, " ", t("answer.notSent", { value: l.notSent })) : null),
    ]));
}
