// Entry point: the header, hash routing (`#/`, `#/sessions/<id>`, `#/settings`) and the
// one operator WebSocket shared by every view.

import { mountAlerts, setPageTitle } from "./alerts.js";
import { mountBoard } from "./board.js";
import { h, replace } from "./dom.js";
import { locale, t } from "./i18n.js";
import { currentOperator, mountLogin, signOutControl, watchForSignOut } from "./login.js";
import { mountNotifications } from "./notifications.js";
import { parseRoute } from "./route.js";
import { mountSession } from "./session.js";
import { mountSettings } from "./settings.js";
import * as ws from "./ws.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const toasts = document.getElementById("toasts");
let unmount = () => {};

function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function route() {
  unmount();
  const { name, params } = parseRoute(location.hash);
  for (const link of nav.querySelectorAll("a[data-route]")) {
    if (link.dataset.route === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (name === "session") unmount = mountSession(main, { ...params, navigate });
  else if (name === "settings") unmount = mountSettings(main, { navigate });
  else unmount = mountBoard(main, { navigate });
  setPageTitle(`${t("app.title")} · ${t(name === "settings" ? "nav.settings" : name === "session" ? "session.heading" : "nav.board")}`);
  main.focus({ preventScroll: true });
}

function header() {
  const dot = h("span", { class: "conn", "data-testid": "connection", role: "status" });
  ws.onStatus((up) => {
    dot.dataset.state = up ? "online" : "offline";
    dot.textContent = up ? t("conn.online") : t("conn.offline");
    dot.title = t("conn.status", { state: dot.textContent });
  });
  const tools = h("div", { class: "tools" }, dot);
  replace(nav,
    h("a", { class: "brand", href: "#/" }, h("span", { class: "logo", "aria-hidden": "true" }, "K"), t("app.title")),
    h("ul", { class: "links" },
      h("li", {}, h("a", { href: "#/", "data-route": "board" }, t("nav.board"))),
      h("li", {}, h("a", { href: "#/settings", "data-route": "settings", "data-testid": "nav-settings" }, t("nav.settings")))),
    tools);
  nav.setAttribute("aria-label", t("nav.main"));
  mountNotifications(tools, toasts);
}

document.documentElement.lang = locale();
const skip = document.getElementById("skip-link");
skip.textContent = t("app.skipToContent");
// The hash is the router's, so the skip link moves focus itself instead of navigating.
skip.addEventListener("click", (ev) => {
  ev.preventDefault();
  main.focus();
});
// With operator auth on, nothing but the sign-in form until there is a session.
const session = await currentOperator();
if (session === null) {
  mountLogin(main);
} else {
  header();
  mountAlerts();
  if (session.auth_required) nav.querySelector(".tools")?.prepend(signOutControl(session.operator));
  watchForSignOut();
  ws.connect();
  window.addEventListener("hashchange", route);
  route();
}
