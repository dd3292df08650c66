// The chat of a session view: messages keyed by id, each applied in place from its
// `message.created` / `message.updated` payload (the data is the whole message, content
// already aggregated) or, for streamed text, the message it has plus a `message.appended`
// text (session.js), never a refetch and rebuild of the list.

import { h, swap, timeEl } from "./dom.js";
import { t, has } from "./i18n.js";
import { hasOwnPrompt, outcomeFor } from "./answer-rules.js";
import { deliveredList } from "./answer-summary.js";
import { KeyedList, compareMessages } from "./live.js";
import { rich } from "./text.js";

function text(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value === "object" && typeof value.text === "string") return value.text;
  return JSON.stringify(value);
}

/** A card's pill: waiting, or how the question ended (answer-rules.js `outcomeFor`). */
function statusLabel(status, record) {
  const outcome = status === "pending" ? null : outcomeFor(record ?? { status });
  if (outcome && has(`history.outcome.${outcome}`)) return t(`history.outcome.${outcome}`);
  const key = `card.status.${status}`;
  return has(key) ? t(key) : status;
}

function clarificationCard(msg, record) {
  const meta = msg.metadata ?? {};
  const pendingId = meta.pending_id;
  const status = record?.status ?? meta.status ?? "pending";
  const answer = record?.answer ?? meta.answer;
  const questions = record?.questions ?? meta.questions ?? [];
  const delivered = (status === "answered" || status === "agent_disconnected") && answer && !answer.rejected;
  const outcome = status === "pending" ? null : outcomeFor(record ?? { status });
  const message = text(msg.content) || record?.message || "";
  const shape = { message, questions };
  // The request message once; each question by its title, with its own description only.
  const questionLine = (q) => {
    const own = hasOwnPrompt(shape, q);
    if (q.title && own) return t("card.question", { title: q.title, prompt: q.prompt });
    return q.title || (own ? q.prompt : q.id);
  };
  return h("li", { class: `msg card-clar status-${status}`, "data-testid": `clarification-card-${pendingId}`, "data-status": status },
    h("div", { class: "msg-head" },
      h("span", { class: "author" }, t("card.heading")),
      h("span", { class: `pill pill-${status}${outcome ? ` pill-outcome-${outcome}` : ""}` }, statusLabel(status, record)),
      timeEl(msg.created_at)),
    rich(message, { class: "msg-body" }),
    questions.length > 1 || (questions.length === 1 && questions[0].prompt !== message && hasOwnPrompt(shape, questions[0]))
      ? h("ul", { class: "card-questions" }, questions.map((q) => h("li", {}, questionLine(q))))
      : null,
    delivered ? h("div", { class: "card-answer", "data-testid": "card-answer" }, h("p", { class: "card-answer-head" }, t("card.delivered")), deliveredList(answer, questions)) : null);
}

function toolCallItem(msg) {
  const meta = msg.metadata ?? {};
  const status = meta.status ?? meta.tool_status ?? "";
  return h("li", { class: "msg tool", "data-testid": "message-tool-call", "data-tool-call-id": meta.tool_call_id ?? "", "data-message-id": msg.id },
    h("div", { class: "msg-head" },
      h("span", { class: "author" }, t("message.toolCall")),
      status ? h("span", { class: `pill pill-tool-${status}` }, has(`tool.status.${status}`) ? t(`tool.status.${status}`) : status) : null,
      timeEl(msg.created_at)),
    h("p", { class: "msg-body mono" }, text(msg.content) || meta.title || ""));
}

function plainItem(msg) {
  const author = msg.type === "status" || msg.author_type === "system" ? "system" : msg.author_type === "user" ? "user" : "agent";
  const thought = msg.type === "thought";
  return h("li", { class: `msg from-${author}${thought ? " thought" : ""}`, "data-testid": thought ? "message-thought" : `message-${author}`, "data-message-id": msg.id },
    h("div", { class: "msg-head" },
      h("span", { class: "author" }, thought ? t("author.thought") : t(`author.${author}`)),
      timeEl(msg.created_at)),
    // Agent text is markdown-ish (a safe subset, text.js); the operator's and the system's are plain.
    author === "agent" ? rich(text(msg.content), { class: "msg-body" }) : h("p", { class: "msg-body" }, text(msg.content)));
}

/** Whether a message is a clarification's card. */
export function isClarificationMessage(msg) {
  return msg.type === "clarification_request" || msg.requests_input === true;
}

/**
 * The chat list. `recordFor(pendingId)` gives the clarification record a card shows
 * (records arrive on their own events; `recordChanged` re-renders that card).
 */
export function createChat({ recordFor }) {
  const element = h("ol", { class: "chat", "data-testid": "chat", "aria-label": t("session.chat"), tabindex: "0" });
  const empty = h("li", { class: "muted empty" }, t("session.chatEmpty"));
  element.append(empty);
  const cards = new Map(); // pending id -> message id
  const render = (msg) => {
    if (isClarificationMessage(msg)) return clarificationCard(msg, recordFor(msg.metadata?.pending_id));
    if (msg.type === "tool_call" || msg.type === "tool_call_update") return toolCallItem(msg);
    return plainItem(msg);
  };
  const items = new KeyedList(element, { kind: "message", key: (m) => m.id, render, compare: compareMessages, swap });

  const atBottom = () => element.scrollHeight - element.scrollTop - element.clientHeight < 40;
  return {
    element,
    /** Apply a message; returns "created", "updated" or null. */
    upsert(msg) {
      if (!msg?.id) return null;
      const follow = atBottom();
      const change = items.upsert(msg);
      if (change && isClarificationMessage(msg) && msg.metadata?.pending_id) cards.set(msg.metadata.pending_id, msg.id);
      empty.hidden = items.size > 0;
      if (change && follow) element.scrollTop = element.scrollHeight;
      return change;
    },
    /** The message `id` as shown, or null. */
    message(id) {
      return items.get(id);
    },
    /** A clarification record changed: re-render its card. */
    recordChanged(pendingId) {
      const id = cards.get(pendingId);
      if (id) items.rerender(id);
    },
    /** The newest tool-call message of `toolCallId`, or null. */
    toolCall(toolCallId) {
      if (!toolCallId) return null;
      const matches = items.values().filter((m) => (m.type === "tool_call" || m.type === "tool_call_update") && m.metadata?.tool_call_id === toolCallId);
      return matches.sort(compareMessages).at(-1) ?? null;
    },
    /** Bring the newest message of tool call `toolCallId` into view and give it focus. */
    showToolCall(toolCallId) {
      const msg = this.toolCall(toolCallId);
      const el = msg ? this.elementFor(msg.id) : null;
      if (!el) return;
      el.tabIndex = -1;
      el.scrollIntoView({ block: "nearest" });
      el.focus({ preventScroll: true });
      el.classList.add("flash");
      setTimeout(() => el.classList.remove("flash"), 1500);
    },
    /** The element showing message `id`. */
    elementFor(id) {
      return element.querySelector(`[data-key="${CSS.escape(id)}"]`);
    },
  };
}
