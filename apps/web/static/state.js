// Session state → the icon the board and session header show. A pending clarification
// wins over every other state (AC-09): the operator is what the session waits for.

import { h } from "./dom.js";
import { t } from "./i18n.js";

const ICONS = {
  "waiting-for-input": "?",
  running: "▶",
  idle: "‖",
  failed: "!",
  completed: "✓",
  cancelled: "■",
  none: "○",
};

/** The latest session of a task (by created_at, else the last listed). */
export function latestSession(task) {
  const sessions = task?.sessions ?? [];
  if (sessions.length === 0) return null;
  return sessions.reduce((a, b) => (String(b.created_at ?? "") >= String(a.created_at ?? "") ? b : a));
}

/** The icon variant for a session (or null) and, optionally, its task. */
export function stateVariant(session, task = null) {
  if (task?.pending_action === "clarification") return "waiting-for-input";
  if (!session) return "none";
  if (session.pending_action === "clarification" || session.state === "WAITING_FOR_INPUT") return "waiting-for-input";
  switch (session.state) {
    case "CREATED":
    case "STARTING":
    case "RUNNING":
      return "running";
    case "IDLE":
      return "idle";
    case "FAILED":
      return "failed";
    case "COMPLETED":
      return "completed";
    case "CANCELLED":
      return "cancelled";
    default:
      return "idle";
  }
}

/** The label for a session's state, in words. */
export function stateLabel(session, task = null) {
  if (stateVariant(session, task) === "waiting-for-input") return t("state.WAITING_FOR_INPUT");
  if (!session) return t("state.NONE");
  return t(`state.${session.state}`);
}

/** The state badge: exactly one `task-state-*` test id per badge. */
export function stateBadge(session, task = null) {
  const variant = stateVariant(session, task);
  const label = stateLabel(session, task);
  return h("span", { class: `state state-${variant}`, "data-testid": `task-state-${variant}`, title: label },
    h("span", { class: "state-icon", "aria-hidden": "true" }, ICONS[variant]),
    h("span", { class: "state-text" }, label));
}
