// Operator sign-in (docs/architecture.md §10). When kandev requires operators, the page first
// asks who is signed in (`GET /api/v1/auth/me`); without a session it shows this form,
// which exchanges a token (from `kandev operator add`) for an HttpOnly session cookie.
// The token is never stored by the page: the cookie carries the sign-in, and script
// cannot read it. Sign-out drops the cookie; a later 401 (expired) brings the form back.

import { api, ApiError } from "./api.js";
import { h, replace, uid } from "./dom.js";
import { t } from "./i18n.js";

/** `{operator, auth_required}` of the current session, or null when sign-in is needed. */
export async function currentOperator() {
  try {
    return await api.me();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return null;
    // Unreachable or failing server: let the views show that as they do.
    return { operator: null, auth_required: false };
  }
}

function failureText(err) {
  if (!(err instanceof ApiError)) return t("common.error", { message: String(err) });
  if (err.status === 401) return t("auth.invalidToken");
  if (err.status === 429) return t("auth.tooManyAttempts", { seconds: err.retryAfter ?? 60 });
  if (err.status === 0) return t("common.networkError");
  return t("common.error", { message: err.message });
}

/** Render the sign-in form into `main`; `onSignedIn()` runs once the cookie is set. */
export function mountLogin(main, { onSignedIn = () => location.reload() } = {}) {
  const id = uid("token");
  const hintId = `${id}-hint`;
  const input = h("input", {
    type: "password",
    id,
    name: "token",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": hintId,
    "data-testid": "login-token",
  });
  const status = h("p", { class: "form-status error", role: "alert", "data-testid": "login-error" });
  const submit = h("button", { type: "submit", class: "primary", "data-testid": "login-submit" }, t("auth.submit"));
  const form = h("form", {
    class: "card login",
    "data-testid": "login-form",
    async onsubmit(ev) {
      ev.preventDefault();
      const token = input.value.trim();
      if (!token) {
        input.setAttribute("aria-invalid", "true");
        status.textContent = t("auth.tokenRequired");
        input.focus();
        return;
      }
      submit.disabled = true;
      status.textContent = "";
      try {
        await api.login(token);
        input.value = "";
        onSignedIn();
      } catch (err) {
        input.setAttribute("aria-invalid", "true");
        status.textContent = failureText(err);
        input.select();
      } finally {
        submit.disabled = false;
      }
    },
  },
  h("h1", {}, t("auth.heading")),
  h("div", { class: "field" },
    h("label", { for: id }, t("auth.token")),
    input,
    h("p", { class: "hint", id: hintId }, t("auth.hint"))),
  status,
  submit);
  replace(main, form);
  document.title = `${t("app.title")} · ${t("auth.heading")}`;
  input.focus();
  return () => {};
}

/** The signed-in operator's name and a sign-out button, for the header's tools. */
export function signOutControl(operator) {
  const button = h("button", {
    type: "button",
    class: "link",
    "data-testid": "sign-out",
    async onclick() {
      button.disabled = true;
      try {
        await api.logout();
      } finally {
        location.reload();
      }
    },
  }, t("auth.signOut"));
  return h("span", { class: "operator", "data-testid": "operator" },
    h("span", { class: "muted" }, t("auth.signedInAs", { name: operator })), button);
}

let reloading = false;
/** When any later call is refused for want of a session (it expired), show the form again. */
export function watchForSignOut() {
  window.addEventListener("kandev:unauthorized", () => {
    if (reloading) return;
    reloading = true;
    location.reload();
  });
}
