// The page a webhook's signed answer link opens (docs/decisions/0016-answer-links.md): the
// answer card for that one question, without signing in. The token is in the fragment
// (`answer.html#<token>`), which browsers never send to a server; it is read once, taken out
// of the address bar, and sent only in the body of the two calls below.

import { ApiError } from "./api.js";
import { renderAnswerSurface } from "./clarification.js";
import { h, replace } from "./dom.js";
import { t } from "./i18n.js";

const token = decodeURIComponent(location.hash.replace(/^#/, ""));
history.replaceState(null, "", location.pathname);
const main = document.getElementById("main");

async function call(path, body) {
  let res;
  try {
    res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, "NETWORK", String(err?.message ?? err), null);
  }
  const parsed = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, parsed?.error?.code ?? `HTTP_${res.status}`, parsed?.error?.message ?? res.statusText, parsed);
  return parsed;
}

function say(text, testid = "answer-link-status") {
  replace(main, h("p", { class: "note", role: "status", "data-testid": testid }, text));
}

async function start() {
  if (!token) return say(t("link.noToken"));
  let opened;
  try {
    opened = await call("/api/v1/answer-links/open", { token });
  } catch (err) {
    return say(err.message);
  }
  const record = opened.clarification;
  if (record.status !== "pending") return say(t("link.settled", { status: record.status }));
  const outcome = h("p", { class: "note", role: "status", "data-testid": "clarification-outcome" });
  const surface = renderAnswerSurface(record, {
    respond: (_id, answer) => call("/api/v1/answer-links/respond", { token, answer }),
    // A link answers or skips; cancelling the agent's tool call needs an operator.
    cancel: () => Promise.reject(new ApiError(403, "FORBIDDEN", t("link.cancelNeedsSignIn"), null)),
    onResult: (result) => {
      outcome.textContent = result.message;
      outcome.dataset.outcome = result.kind;
      if (result.withdraw) surface.element.remove();
    },
  });
  surface.element.querySelector("[data-testid=clarification-cancel]")?.closest(".answer-action")?.remove();
  replace(main, h("p", { class: "hint", "data-testid": "answer-link-as" }, t("link.as", { name: opened.answered_by })), surface.element, outcome);
  surface.focus();
}

start();
