// The session view (`#/sessions/<id>`): the chat, the answer surface for a pending
// clarification, a prompt box, cancel turn and stop session.
//
// Updates in place: one load of the session, task, messages and clarifications on mount
// and once the socket sends this session's transcript, on every (re)connect (events sent
// while offline are lost); in between, each
// WebSocket payload is applied to what it names (the message, the record, the header),
// so the view never rebuilds and focus and typed text survive every event.

import { setPageTitle } from "./alerts.js";
import { api } from "./api.js";
import { createChat } from "./chat.js";
import { createClarificationArea } from "./clarification.js";
import { createHistory } from "./history.js";
import { agentLabel } from "./requester.js";
import { announce, h, replace } from "./dom.js";
import { t } from "./i18n.js";
import { supersedes } from "./live.js";
import { coalesce } from "./refresh.js";
import { stateBadge } from "./state.js";
import * as ws from "./ws.js";

const ENDED = ["COMPLETED", "FAILED", "CANCELLED"];

function belongs(data, sessionId) {
  return data?.session_id === sessionId || data?.id === sessionId || data?.session?.id === sessionId;
}

/** The header: title, state badge and agent line, each patched on its own. */
function createHeader() {
  const title = h("h1", {}, t("session.heading"));
  const badge = h("span", {});
  const agentLine = h("p", { class: "muted", "data-testid": "session-agent" });
  const error = h("p", { class: "error", hidden: true });
  const element = h("div", { class: "session-head" },
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, t("common.back"))),
    h("div", { class: "session-title" }, title, badge),
    agentLine,
    error);
  return {
    element,
    setTask(task) {
      if (task?.title && title.textContent !== task.title) title.textContent = task.title;
      // The tab names the task, so a waiting question is findable among tabs.
      if (task?.title) setPageTitle(t("session.pageTitle", { task: task.title, app: t("app.title") }));
    },
    setSession(session) {
      error.hidden = true;
      replace(badge, stateBadge(session));
      const caps = session.client_capabilities;
      replace(agentLine,
        t("session.agent", { agent: agentLabel(session.agent, session.agent_info) }),
        caps ? [" · ", caps.elicitation?.form ? t("session.elicitationOn") : t("session.elicitationOff")] : null);
    },
    setError(err) {
      error.hidden = false;
      error.textContent = err.status === 404 ? t("common.notFound") : t("common.error", { message: err.message });
    },
  };
}

// The questions that were open when the operator cancelled the turn, per session (this
// tab): agentctl reports them as withdrawn with the turn, and that was the operator's doing.
const TURN_CANCEL_KEY = "kandev.turnCancel.";

function turnCancelled(sessionId) {
  try {
    return new Set(JSON.parse(sessionStorage.getItem(TURN_CANCEL_KEY + sessionId) ?? "[]"));
  } catch {
    return new Set();
  }
}

function rememberTurnCancel(sessionId, pendingIds) {
  try {
    sessionStorage.setItem(TURN_CANCEL_KEY + sessionId, JSON.stringify([...turnCancelled(sessionId), ...pendingIds]));
  } catch {
    // storage refused: the wording falls back to the agent's
  }
}

/** Mount the session view for `sessionId`; returns the unmount function. */
export function mountSession(root, { sessionId }) {
  const header = createHeader();
  const records = new Map(); // pending id -> record
  let session = null;
  let taskId = null;

  const chat = createChat({ recordFor: (id) => records.get(id) ?? null });
  const area = createClarificationArea({ onSettled: () => {} });
  const history = createHistory();
  // Who asks, for the answer surface: the session's agent and the chat's tool calls.
  const updateRequester = () => area.setContext({
    agent: session?.agent,
    agentInfo: session?.agent_info ?? null,
    toolCall: (id) => chat.toolCall(id),
    showToolCall: (id) => chat.showToolCall(id),
  });
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

  function pendingRecords() {
    return [...records.values()].filter((r) => (r.status ?? "pending") === "pending");
  }

  function applySession(next) {
    if (!supersedes("session", next, session)) return;
    session = next;
    taskId = next.task_id ?? taskId;
    header.setSession(next);
    updateRequester();
    const live = !ENDED.includes(next.state);
    for (const control of [promptBox, sendButton, cancelButton, stopButton]) control.disabled = !live;
  }

  /** Apply a record; returns whether it changed anything. */
  function applyRecord(incoming) {
    // A question withdrawn because this operator cancelled the turn is named as theirs.
    const record = incoming.outcome === "agent_cancelled" && turnCancelled(sessionId).has(incoming.pending_id)
      ? { ...incoming, outcome: "turn_cancelled" }
      : incoming;
    const prev = records.get(record.pending_id);
    if (!supersedes("record", record, prev)) return false;
    records.set(record.pending_id, record);
    chat.recordChanged(record.pending_id);
    history.apply(record);
    if ((record.status ?? "pending") !== "pending" && area.currentPendingId === record.pending_id) {
      area.settle(record.pending_id, record.status ?? null, record.outcome ?? null);
    }
    area.update(pendingRecords());
    const waiting = pendingRecords().length > 0;
    promptBox.placeholder = waiting ? t("session.prompt.answerFirst") : t("session.prompt.placeholder");
    promptForm.dataset.waiting = String(waiting);
    if (!prev && record.status === "pending") announce(t("session.announce.question"));
    return true;
  }

  function applyMessage(msg) {
    const change = chat.upsert(msg);
    if (change && (msg.type === "tool_call" || msg.type === "tool_call_update")) updateRequester();
    if (change === "created" && msg.author_type === "agent" && msg.type === "message") announce(t("session.announce.message"));
  }

  // Only this session's messages, again: what an append that does not fit asks for.
  const reloadMessages = coalesce(async () => {
    try {
      for (const m of await api.listMessages(sessionId)) applyMessage(m);
    } catch (err) {
      header.setError(err);
    }
  });

  /**
   * A `message.appended`: `text` goes at the end of the message shown, which must be
   * `length - text.length` long (`length` is the content's length after the append, in
   * UTF-16 units, a JS string's `length`). A copy already that long (a load that crossed
   * the event) has it; a shorter one or none missed text: the messages are reloaded
   * rather than wrong text shown.
   */
  function applyAppend(d) {
    const text = typeof d.text === "string" ? d.text : null;
    const shown = chat.message(d.id);
    const content = typeof shown?.content === "string" ? shown.content : null;
    if (text === null || content === null || !Number.isInteger(d.length)) return reloadMessages();
    if (content.length >= d.length) return;
    if (content.length !== d.length - text.length) return reloadMessages();
    applyMessage({ ...shown, content: content + text, updated_at: d.updated_at ?? shown.updated_at });
  }

  const load = coalesce(async () => {
    try {
      const [fetched, messages, clarifications] = await Promise.all([
        api.getSession(sessionId),
        api.listMessages(sessionId),
        api.listClarifications(sessionId),
      ]);
      applySession(fetched);
      for (const r of clarifications) applyRecord(r);
      for (const m of messages) applyMessage(m);
      if (taskId) header.setTask(await api.getTask(taskId).catch(() => null));
    } catch (err) {
      header.setError(err);
    }
  });

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
    if (pendingRecords().length > 0) {
      // The agent's turn is waiting on the question: a message now would only be refused.
      notice.textContent = t("session.prompt.answerFirst");
      area.focusQuestion();
      return;
    }
    sendButton.disabled = true;
    try {
      await api.prompt(sessionId, value);
      promptBox.value = "";
      notice.textContent = t("session.prompt.sent");
    } catch (err) {
      notice.textContent = t("common.error", { message: err.message });
    } finally {
      sendButton.disabled = ENDED.includes(session?.state);
    }
  });
  promptBox.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) promptForm.requestSubmit();
  });
  // Both end the question on screen: with an answer being typed, ask first.
  const confirmed = () => !area.hasDraft() || globalThis.confirm(t("session.confirmDiscard"));
  cancelButton.addEventListener("click", () => {
    if (!confirmed()) return;
    rememberTurnCancel(sessionId, pendingRecords().map((r) => r.pending_id));
    act(api.cancel, "session.cancelled");
  });
  stopButton.addEventListener("click", () => confirmed() && act(api.stop, "session.stopped"));

  replace(root,
    h("div", { class: "session", "data-testid": "session-view", "data-session-id": sessionId },
      header.element,
      h("section", { class: "chat-wrap", "aria-label": t("session.chat") }, chat.element),
      area.element,
      promptForm,
      history.element));

  const offs = [
    ws.on("session.updated", (d) => belongs(d, sessionId) && applySession(d)),
    ws.on("task.updated", (d) => d?.id && d.id === taskId && header.setTask(d)),
    ws.on("message.created", (d) => d?.session_id === sessionId && applyMessage(d)),
    ws.on("message.updated", (d) => d?.session_id === sessionId && applyMessage(d)),
    ws.on("message.appended", (d) => d?.session_id === sessionId && applyAppend(d)),
    ws.on("clarification.created", (d) => d?.session_id === sessionId && applyRecord(d)),
    ws.on("clarification.settled", (d) => {
      if (d?.session_id === sessionId || records.has(d?.pending_id)) applyRecord(d);
    }),
    // Read again once the server sends this transcript: on mount and every reconnect.
    ws.on("watching", (d) => Array.isArray(d?.sessions) && d.sessions.includes(sessionId) && load()),
    ws.watchTranscript(sessionId),
  ];
  load();
  return () => offs.forEach((off) => off());
}
