// "Needs you", at the top of the board: every question waiting for an answer, the one
// waiting longest first, each with its task, its title and how long it has waited, and a
// link straight to it. Kept current by the operator WebSocket; the waits tick every 30 s.

import { api } from "./api.js";
import { h, swap } from "./dom.js";
import { t } from "./i18n.js";
import { knownTitle, taskTitle } from "./titles.js";
import * as ws from "./ws.js";

/**
 * Decorators of a waiting item, `(record, slot) => void`: another module (the deadline
 * countdown) registers one here to fill the item's `slot` element; none by default.
 */
export const waitingDecorators = [];

/** "asked 4 min ago" for a question created at `iso`, at `now` (ms). */
export function askedAgo(iso, now = Date.now()) {
  const created = Date.parse(iso ?? "");
  if (Number.isNaN(created)) return "";
  const minutes = Math.max(0, Math.floor((now - created) / 60_000));
  if (minutes < 1) return t("needs.askedNow");
  if (minutes < 60) return t("needs.askedMin", { count: minutes });
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return t("needs.askedHours", { count: hours });
  return t("needs.askedDays", { count: Math.floor(hours / 24) });
}

/** What a waiting question is about, in a few words: its first question's title, else the message. */
function questionTitle(record) {
  const q = (record.questions ?? [])[0];
  const text = q?.title || record.message || q?.prompt || q?.id || "";
  return text.length > 90 ? `${text.slice(0, 89)}…` : text;
}

function byWait(a, b) {
  return String(a.created_at ?? "").localeCompare(String(b.created_at ?? ""));
}

/** Mount the section; returns `{element, unmount()}`. */
export function createNeedsYou() {
  const waiting = new Map(); // pending id -> record
  const settled = new Set();
  const list = h("ol", { class: "needs-list", "data-testid": "needs-you-list" });
  const element = h("section", { class: "needs-you card", "aria-labelledby": "needs-h", "data-testid": "needs-you", hidden: true },
    h("h2", { id: "needs-h" }, t("needs.heading")),
    list);

  function item(record) {
    const ago = h("span", { class: "needs-ago", "data-testid": "needs-you-ago", "data-created-at": record.created_at ?? "" }, askedAgo(record.created_at));
    const slot = h("span", { class: "needs-deadline", "data-testid": "needs-you-deadline" });
    for (const decorate of waitingDecorators) decorate(record, slot);
    const task = knownTitle(record.task_id);
    return h("li", { class: "needs-item", "data-testid": "needs-you-item", "data-pending-id": record.pending_id },
      h("a", { href: `#/sessions/${encodeURIComponent(record.session_id)}`, "data-testid": "needs-you-link" },
        h("strong", { class: "needs-task" }, task ?? t("needs.unknownTask")),
        h("span", { class: "needs-question" }, questionTitle(record))),
      h("span", { class: "needs-when" }, ago, slot));
  }

  // What an item shows, per pending id: an item whose text would not change is kept, so a
  // link a keyboard user is on keeps its focus when another question comes or goes.
  let shown = new Map(); // pending id -> {el, look}

  function look(record) {
    return JSON.stringify([knownTitle(record.task_id), questionTitle(record), record.session_id, record.created_at, record.expires_at, record.on_deadline]);
  }

  function render() {
    const open = [...waiting.values()].sort(byWait);
    element.hidden = open.length === 0;
    const next = new Map();
    for (const record of open) {
      const was = shown.get(record.pending_id);
      const wanted = look(record);
      next.set(record.pending_id, was?.look === wanted ? was : { el: swap(was?.el, item(record)), look: wanted });
    }
    for (const [id, { el }] of shown) if (!next.has(id)) el.remove();
    // In wait order; kept items never move past each other (their order is their age).
    [...next.values()].forEach(({ el }, i) => {
      if (list.children[i] !== el) list.insertBefore(el, list.children[i] ?? null);
    });
    shown = next;
  }

  async function add(record) {
    if (!record?.pending_id || settled.has(record.pending_id) || (record.status ?? "pending") !== "pending") return;
    waiting.set(record.pending_id, record);
    await taskTitle(record.task_id);
    render();
  }

  async function load() {
    try {
      const records = await api.listClarifications(null, "pending");
      waiting.clear();
      for (const r of records) if (!settled.has(r.pending_id)) waiting.set(r.pending_id, r);
      await Promise.all([...new Set(records.map((r) => r.task_id))].map((id) => taskTitle(id)));
      render();
    } catch {
      // The board still lists every task; this section is a shortcut.
    }
  }

  const tick = setInterval(() => {
    for (const el of list.querySelectorAll("[data-created-at]")) el.textContent = askedAgo(el.dataset.createdAt);
  }, 30_000);
  const offs = [
    ws.on("clarification.created", (r) => add(r)),
    ws.on("clarification.settled", (r) => {
      if (!r?.pending_id) return;
      settled.add(r.pending_id);
      if (waiting.delete(r.pending_id)) render();
    }),
    ws.on("task.updated", (task) => task?.id && [...waiting.values()].some((r) => r.task_id === task.id) && render()),
    ws.onStatus((up) => up && load()),
  ];
  load();
  return {
    element,
    unmount() {
      clearInterval(tick);
      offs.forEach((off) => off());
    },
  };
}
