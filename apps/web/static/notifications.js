// Notifications: a toast for each `session.clarification_requested` pushed on the operator
// WebSocket, and a list (loaded once, then kept current from the same events), each
// linking to its session.

import { api } from "./api.js";
import { h, replace, timeEl } from "./dom.js";
import { formatNumber, t } from "./i18n.js";
import { knownTitle, loadTitles, taskTitle } from "./titles.js";
import * as ws from "./ws.js";

const CLARIFICATION = "session.clarification_requested";
const TURN_FINISHED = "session.turn_finished";
const TOAST_MS = 12_000;

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
  return h("li", { class: `notif notif-${n.event === CLARIFICATION ? "clar" : "other"}`, "data-testid": "notification-item", "data-event": n.event },
    h("a", { href: sessionHref(n), "data-testid": "notification-link" },
      h("strong", {}, title),
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
      h("button", { type: "button", class: "link", "data-testid": "notifications-close", onclick: () => setOpen(false) }, t("common.close"))),
    list);

  function render() {
    replace(list, items.length ? items.map(item) : h("li", { class: "muted" }, t("notif.empty")));
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
    const remove = () => el.remove();
    el.querySelector("a").addEventListener("click", remove);
    el.querySelector("button").addEventListener("click", remove);
    setTimeout(remove, TOAST_MS);
    toasts.append(el);
  }

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
  ws.onStatus((up) => up && load());

  container.append(button, panel);
  render();
  load();
}
