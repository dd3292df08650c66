// Notifications: a toast for each `session.clarification_requested` pushed on the operator
// WebSocket (none for the question already on screen), and a list (loaded once, then kept
// current from the same events), each linking to its session. A question's notification
// and toast resolve when it settles; "Clear all" empties the list on this device.

import { api } from "./api.js";
import { h, replace, timeEl } from "./dom.js";
import { formatNumber, t } from "./i18n.js";
import { knownTitle, loadTitles, taskTitle } from "./titles.js";
import * as ws from "./ws.js";

const CLARIFICATION = "session.clarification_requested";
const TURN_FINISHED = "session.turn_finished";
const TOAST_MS = 12_000;
const CLEARED_KEY = "kandev.notifications.clearedAt";

function clearedAt() {
  try {
    return localStorage.getItem(CLEARED_KEY) ?? "";
  } catch {
    return "";
  }
}

// The questions open now, by session, to tell which "input needed" is still needed: a
// notification is resolved once its session has no open question asked at or before it.
const open = new Map(); // pending id -> {session_id, created_at}

/** Whether the question a clarification notification announced has settled. */
export function isResolved(n, openQuestions = open.values()) {
  if (n.event !== CLARIFICATION) return false;
  const at = String(n.created_at ?? "");
  for (const q of openQuestions) {
    if (q.session_id === n.session_id && String(q.created_at ?? "") <= at) return false;
  }
  return true;
}

function onScreen(n) {
  return location.hash === sessionHref(n) && document.visibilityState === "visible";
}

/** A bell drawn as SVG (no icon font or emoji glyph needed). */
function bellIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "18");
  svg.setAttribute("height", "18");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", "M12 3a6 6 0 0 0-6 6v3.6l-1.6 2.7A1 1 0 0 0 5.3 17h13.4a1 1 0 0 0 .9-1.7L18 12.6V9a6 6 0 0 0-6-6Zm-2.4 15a2.5 2.5 0 0 0 4.8 0Z");
  path.setAttribute("fill", "currentColor");
  svg.append(path);
  return svg;
}

function sessionHref(n) {
  return n.session_id ? `#/sessions/${encodeURIComponent(n.session_id)}` : "#/";
}

// Known events are worded from the catalogue (the stored title and body are the server's
// English); the body names the task, never the question (F9).
const WORDING = {
  [CLARIFICATION]: ["notif.clarification", "notif.clarificationBody"],
  [TURN_FINISHED]: ["notif.turnFinished", "notif.turnFinishedBody"],
};

/** `{title, body}` of a notification in the UI language. */
function wording(n) {
  const keys = WORDING[n.event];
  if (!keys) return { title: n.title || n.event, body: n.body };
  const task = knownTitle(n.task_id);
  return { title: t(keys[0]), body: task ? t(keys[1], { task }) : n.body };
}

function item(n) {
  const { title, body } = wording(n);
  const resolved = isResolved(n);
  return h("li", { class: `notif notif-${n.event === CLARIFICATION ? "clar" : "other"}${resolved ? " resolved" : ""}`, "data-testid": "notification-item", "data-event": n.event, "data-resolved": String(resolved) },
    h("a", { href: sessionHref(n), "data-testid": "notification-link" },
      h("strong", {}, title),
      resolved ? h("span", { class: "pill pill-resolved", "data-testid": "notification-resolved" }, t("notif.resolved")) : null,
      body ? h("span", { class: "notif-body" }, body) : null,
      timeEl(n.created_at)));
}

/**
 * Mount the header button, its panel and the toast region. `container` receives the
 * button and panel; `toasts` is the page's toast region.
 */
export function mountNotifications(container, toasts) {
  let items = [];
  let unseen = 0;
  // The name comes from the content (label, count, "new"), so what is seen is what is read.
  const count = h("span", { class: "badge", "data-testid": "notification-count", hidden: true });
  const countWord = h("span", { class: "sr-only", hidden: true });
  const button = h("button", { type: "button", class: "icon-button", "aria-expanded": "false", "aria-controls": "notif-panel", "data-testid": "notifications-button" },
    bellIcon(), h("span", { class: "label" }, t("nav.notifications")), " ", count, countWord);
  const list = h("ul", { class: "notif-list", "data-testid": "notifications-list" });
  const panel = h("section", { id: "notif-panel", class: "notif-panel", hidden: true, "aria-labelledby": "notif-h", "data-testid": "notifications-panel" },
    h("div", { class: "panel-head" },
      h("h2", { id: "notif-h" }, t("notif.heading")),
      h("button", { type: "button", class: "link", "data-testid": "notifications-clear", onclick: () => clearAll() }, t("notif.clearAll")),
      h("button", { type: "button", class: "link", "data-testid": "notifications-close", onclick: () => setOpen(false) }, t("common.close"))),
    list);

  const visible = () => {
    const since = clearedAt();
    return items.filter((n) => String(n.created_at ?? "") > since);
  };
  function clearAll() {
    const newest = items.reduce((max, n) => (String(n.created_at ?? "") > max ? String(n.created_at) : max), clearedAt());
    try {
      localStorage.setItem(CLEARED_KEY, newest);
    } catch {
      // storage refused: cleared for this page only
    }
    items = items.filter((n) => String(n.created_at ?? "") > newest);
    unseen = 0;
    render();
    panel.querySelector("[data-testid=notifications-close]")?.focus();
  }

  function render() {
    const shown = visible();
    replace(list, shown.length ? shown.map(item) : h("li", { class: "muted" }, t("notif.empty")));
    count.hidden = unseen === 0;
    count.textContent = formatNumber(unseen);
    countWord.hidden = unseen === 0;
    countWord.textContent = ` ${t("nav.notificationsNew", { count: unseen })}`;
  }

  function setOpen(open, { refocus = true } = {}) {
    panel.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    if (open) {
      unseen = 0;
      render();
      panel.querySelector("a, button")?.focus();
    } else if (refocus) {
      button.focus();
    }
  }
  // Another page: the panel closes, and focus is the router's to place.
  window.addEventListener("hashchange", () => !panel.hidden && setOpen(false, { refocus: false }));

  button.addEventListener("click", () => setOpen(panel.hidden));
  panel.addEventListener("keydown", (ev) => ev.key === "Escape" && setOpen(false));
  list.addEventListener("click", (ev) => ev.target.closest("a") && setOpen(false));

  async function toast(n) {
    await taskTitle(n.task_id);
    const { title, body } = wording(n);
    // The toast region is the live region; a toast is not one of its own.
    const el = h("div", { class: "toast", "data-testid": "toast", "data-session-id": n.session_id ?? "" },
      h("div", { class: "toast-text" },
        h("strong", {}, title),
        body ? h("span", {}, body) : null),
      h("a", { href: sessionHref(n), class: "button primary", "data-testid": "toast-link" }, t("notif.open")),
      h("button", { type: "button", class: "link", "aria-label": t("notif.dismiss"), "data-testid": "toast-dismiss" }, "×"));
    const remove = () => {
      el.remove();
      liveToasts.delete(el);
    };
    el.querySelector("a").addEventListener("click", remove);
    el.querySelector("button").addEventListener("click", remove);
    setTimeout(remove, TOAST_MS);
    if (onScreen(n)) return; // the question is already in front of the operator
    liveToasts.set(el, { n, remove });
    toasts.append(el);
  }
  const liveToasts = new Map(); // toast element -> {n, remove}

  /** A question opened or settled: resolve what announced it. */
  function questionsChanged() {
    for (const { n, remove } of liveToasts.values()) if (isResolved(n)) remove();
    if (!panel.hidden || items.some((n) => n.event === CLARIFICATION)) render();
  }

  async function loadOpen() {
    try {
      const records = await api.listClarifications(null, "pending");
      open.clear();
      for (const r of records) open.set(r.pending_id, { session_id: r.session_id, created_at: r.created_at });
      questionsChanged();
    } catch {
      // Resolution waits for the next event.
    }
  }
  ws.on("clarification.created", (r) => {
    if (r?.pending_id && (r.status ?? "pending") === "pending") {
      open.set(r.pending_id, { session_id: r.session_id, created_at: r.created_at });
      questionsChanged();
    }
  });
  ws.on("clarification.settled", (r) => {
    if (r?.pending_id && open.delete(r.pending_id)) questionsChanged();
  });
  // Opening the session a toast announces is answering it: its toast goes.
  window.addEventListener("hashchange", () => {
    for (const { n, remove } of liveToasts.values()) if (onScreen(n)) remove();
  });

  async function load() {
    try {
      items = await api.listNotifications();
      if (items.some((n) => WORDING[n.event] && !knownTitle(n.task_id))) await loadTitles(true);
      items.sort((a, b) => String(b.created_at ?? "").localeCompare(String(a.created_at ?? "")));
      render();
    } catch {
      // The list is secondary; live events still arrive.
    }
  }

  ws.on("notification", (n) => {
    if (!n || items.some((x) => x.id === n.id)) return;
    items.unshift(n);
    if (panel.hidden) unseen += 1;
    render();
    if (n.event === CLARIFICATION) toast(n);
  });
  ws.onStatus((up) => {
    if (up) {
      load();
      loadOpen();
    }
  });

  container.append(button, panel);
  render();
  load();
}
