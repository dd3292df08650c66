// The session view (`#/sessions/<id>`): the chat, the answer surface for a pending
// clarification, a prompt box, cancel turn and stop session.

import { api } from "./api.js";
import { createClarificationArea } from "./clarification.js";
import { h, replace, formatTime } from "./dom.js";
import { t, has } from "./i18n.js";
import { coalesce } from "./refresh.js";
import { stateBadge } from "./state.js";
import * as ws from "./ws.js";

function text(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value === "object" && typeof value.text === "string") return value.text;
  return JSON.stringify(value);
}

function answerSummary(answer) {
  if (!answer) return "";
  if (answer.rejected) return t("card.status.declined");
  const parts = (answer.answers ?? []).map((a) => {
    const chosen = (a.selected_options ?? []).join(", ");
    const typed = (a.custom_text ?? "").trim();
    return [chosen, typed].filter(Boolean).join(" — ");
  });
  return parts.filter(Boolean).join("; ");
}

function clarificationCard(msg, record) {
  const meta = msg.metadata ?? {};
  const pendingId = meta.pending_id;
  const status = record?.status ?? meta.status ?? "pending";
  const statusKey = `card.status.${status}`;
  const answer = record?.answer ?? meta.answer;
  const summary = status === "answered" || status === "agent_disconnected" ? answerSummary(answer) : "";
  const questions = record?.questions ?? meta.questions ?? [];
  return h("li", { class: `msg card-clar status-${status}`, "data-testid": `clarification-card-${pendingId}`, "data-status": status },
    h("div", { class: "msg-head" },
      h("span", { class: "author" }, t("card.heading")),
      h("span", { class: `pill pill-${status}` }, has(statusKey) ? t(statusKey) : status),
      h("time", { datetime: msg.created_at }, formatTime(msg.created_at))),
    h("p", { class: "msg-body" }, text(msg.content) || record?.message || ""),
    questions.length > 1 || (questions.length === 1 && questions[0].prompt !== text(msg.content))
      ? h("ul", { class: "card-questions" }, questions.map((q) => h("li", {}, q.title ? `${q.title}: ${q.prompt}` : q.prompt)))
      : null,
    summary ? h("p", { class: "card-answer" }, t("card.answer", { answer: summary })) : null);
}

function toolCallItem(msg) {
  const meta = msg.metadata ?? {};
  const status = meta.status ?? meta.tool_status ?? "";
  return h("li", { class: "msg tool", "data-testid": "message-tool-call", "data-tool-call-id": meta.tool_call_id ?? "" },
    h("div", { class: "msg-head" },
      h("span", { class: "author" }, t("message.toolCall")),
      status ? h("span", { class: `pill pill-tool-${status}` }, status) : null,
      h("time", { datetime: msg.created_at }, formatTime(msg.created_at))),
    h("p", { class: "msg-body mono" }, text(msg.content) || meta.title || ""));
}

function messageItem(msg, recordsById) {
  if (msg.type === "clarification_request" || msg.requests_input) {
    return clarificationCard(msg, recordsById.get(msg.metadata?.pending_id));
  }
  if (msg.type === "tool_call" || msg.type === "tool_call_update") return toolCallItem(msg);
  const author = msg.type === "status" || msg.author_type === "system" ? "system" : msg.author_type === "user" ? "user" : "agent";
  const thought = msg.type === "thought";
  return h("li", { class: `msg from-${author}${thought ? " thought" : ""}`, "data-testid": thought ? "message-thought" : `message-${author}` },
    h("div", { class: "msg-head" },
      h("span", { class: "author" }, thought ? t("author.thought") : t(`author.${author}`)),
      h("time", { datetime: msg.created_at }, formatTime(msg.created_at))),
    h("p", { class: "msg-body" }, text(msg.content)));
}

function belongs(data, sessionId) {
  return data?.session_id === sessionId || data?.id === sessionId || data?.session?.id === sessionId;
}

/** Mount the session view for `sessionId`; returns the unmount function. */
export function mountSession(root, { sessionId }) {
  const header = h("div", { class: "session-head" });
  const chat = h("ol", { class: "chat", "data-testid": "chat", "aria-live": "polite", "aria-label": t("session.chat") });
  const area = createClarificationArea({ onSettled: () => refreshAll() });
  const notice = h("p", { class: "form-status", role: "status", "data-testid": "session-notice" });
  const promptBox = h("textarea", { id: "prompt-text", rows: 3, placeholder: t("session.prompt.placeholder"), "data-testid": "prompt-input" });
  const sendButton = h("button", { type: "submit", class: "primary", "data-testid": "prompt-send" }, t("session.prompt.send"));
  const cancelButton = h("button", { type: "button", class: "secondary", "data-testid": "session-cancel" }, t("session.cancel"));
  const stopButton = h("button", { type: "button", class: "danger", "data-testid": "session-stop" }, t("session.stop"));
  const promptForm = h("form", { class: "prompt-form", "data-testid": "prompt-form" },
    h("label", { for: "prompt-text" }, t("session.prompt.label")),
    promptBox,
    h("div", { class: "actions" }, sendButton, cancelButton, stopButton),
    notice);

  let records = new Map();
  let session = null;

  const loadSession = coalesce(async () => {
    try {
      session = await api.getSession(sessionId);
      let task = null;
      try {
        task = session.task_id ? await api.getTask(session.task_id) : null;
      } catch {
        task = null; // the header simply omits the title
      }
      const caps = session.client_capabilities;
      replace(header,
        h("p", { class: "crumbs" }, h("a", { href: "#/" }, t("common.back"))),
        h("div", { class: "session-title" },
          h("h1", {}, task?.title ?? t("session.heading")),
          stateBadge(session)),
        h("p", { class: "muted" },
          t("session.agent", { agent: session.agent ?? "?" }),
          caps ? [" · ", caps.elicitation?.form ? t("session.elicitationOn") : t("session.elicitationOff")] : null));
      const live = !["COMPLETED", "FAILED", "CANCELLED"].includes(session.state);
      promptBox.disabled = !live;
      sendButton.disabled = !live;
      cancelButton.disabled = !live;
      stopButton.disabled = !live;
    } catch (err) {
      replace(header, h("p", { class: "crumbs" }, h("a", { href: "#/" }, t("common.back"))),
        h("p", { class: "error" }, err.status === 404 ? t("common.notFound") : t("common.error", { message: err.message })));
    }
  });

  const loadChat = coalesce(async () => {
    try {
      const [messages, clarifications] = await Promise.all([
        api.listMessages(sessionId),
        api.listClarifications(sessionId),
      ]);
      records = new Map(clarifications.map((r) => [r.pending_id, r]));
      const atBottom = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 40;
      replace(chat, messages.length ? messages.map((m) => messageItem(m, records)) : h("li", { class: "muted empty" }, t("session.chatEmpty")));
      if (atBottom) chat.scrollTop = chat.scrollHeight;
      area.update(clarifications.filter((r) => r.status === "pending"));
    } catch (err) {
      replace(chat, h("li", { class: "error" }, t("common.error", { message: err.message })));
    }
  });

  function refreshAll() {
    loadSession();
    loadChat();
  }

  async function act(fn, doneKey) {
    try {
      await fn(sessionId);
      notice.textContent = t(doneKey);
    } catch (err) {
      notice.textContent = t("common.error", { message: err.message });
    }
  }

  promptForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const value = promptBox.value.trim();
    if (!value) return;
    sendButton.disabled = true;
    try {
      await api.prompt(sessionId, value);
      promptBox.value = "";
      notice.textContent = t("session.prompt.sent");
    } catch (err) {
      notice.textContent = t("common.error", { message: err.message });
    } finally {
      sendButton.disabled = false;
    }
  });
  promptBox.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) promptForm.requestSubmit();
  });
  cancelButton.addEventListener("click", () => act(api.cancel, "session.cancelled"));
  stopButton.addEventListener("click", () => act(api.stop, "session.stopped"));

  replace(root,
    h("div", { class: "session", "data-testid": "session-view", "data-session-id": sessionId },
      header,
      h("section", { class: "chat-wrap", "aria-label": t("session.chat") }, chat),
      area.element,
      promptForm));

  const offs = [
    ws.on("session.updated", (d) => belongs(d, sessionId) && loadSession()),
    ws.on("message.created", (d) => belongs(d, sessionId) && loadChat()),
    ws.on("message.updated", (d) => belongs(d, sessionId) && loadChat()),
    ws.on("clarification.created", (d) => belongs(d, sessionId) && loadChat()),
    ws.on("clarification.settled", (d) => {
      const id = d?.pending_id;
      if (id && area.currentPendingId === id) area.settle(id, d.status ?? null);
      if (belongs(d, sessionId) || records.has(id)) refreshAll();
    }),
    ws.onStatus((up) => up && refreshAll()),
  ];
  refreshAll();
  return () => offs.forEach((off) => off());
}
