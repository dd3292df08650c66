// Deadlines (docs/architecture.md §15): a clarification's `expires_at` is when agentctl gives
// the question up unanswered. The answer card shows a live countdown that names what the
// deadline brings ("Declines in 54 min"), and the board puts waiting tasks with the
// soonest deadline first. Kept apart from the card and the board: each calls in here once.

import { api } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

/** "54 min", "1 h 05 min", "40 s". */
export function formatLeft(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.ceil(s / 60);
  if (min < 60) return `${min} min`;
  return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, "0")} min`;
}

/** What the countdown says at `now` (ms since the epoch) for `record`, or null without a deadline. */
export function deadlineText(record, now = Date.now()) {
  const at = Date.parse(record?.expires_at ?? "");
  if (Number.isNaN(at)) return null;
  // An elicitation's deadline answers as the agent's `on_deadline` says; the tool times out.
  const [soon, passed] = (record.source ?? "elicitation") !== "elicitation"
    ? ["deadline.timeout", "deadline.timedOut"]
    : ({
      defaults: ["deadline.defaults", "deadline.defaulted"],
      cancel: ["deadline.cancel", "deadline.cancelled"],
    })[record.on_deadline] ?? ["deadline.decline", "deadline.declined"];
  const left = at - now;
  if (left <= 0) return t(passed);
  return t(soon, { left: formatLeft(left) });
}

/**
 * A live countdown line for `record`'s card, or null when it has no deadline. It ticks
 * each second in the last two minutes, otherwise every fifteen, and stops once it is no
 * longer in the page.
 */
export function deadlineLine(record) {
  const at = Date.parse(record?.expires_at ?? "");
  if (Number.isNaN(at)) return null;
  const el = h("p", {
    class: "deadline hint",
    "data-testid": "clarification-deadline",
    "data-expires-at": record.expires_at,
    title: t("deadline.title", { at: new Date(at).toLocaleString() }),
  });
  let shown = false;
  const tick = () => {
    // Built before it is inserted; once shown and then removed, it stops.
    if (el.isConnected) shown = true;
    else if (shown) return;
    const left = at - Date.now();
    el.textContent = deadlineText(record);
    el.classList.toggle("urgent", left < 5 * 60 * 1000);
    if (left > 0) setTimeout(tick, left < 2 * 60 * 1000 ? 1000 : 15000);
  };
  tick();
  return el;
}

/**
 * Reorders the waiting rows of the board's `list` (items with `data-task-id`) by their
 * soonest pending deadline, ahead of every other row; the others keep their order.
 */
export async function orderByDeadline(list) {
  let pending;
  try {
    pending = await api.listClarifications(undefined, "pending");
  } catch {
    return;
  }
  const soonest = new Map(); // task id -> ms
  for (const r of pending) {
    const at = Date.parse(r.expires_at ?? "");
    if (Number.isNaN(at)) continue;
    soonest.set(r.task_id, Math.min(at, soonest.get(r.task_id) ?? Infinity));
  }
  const rows = [...list.children];
  const waiting = rows
    .filter((li) => soonest.has(li.dataset.taskId))
    .sort((a, b) => soonest.get(a.dataset.taskId) - soonest.get(b.dataset.taskId));
  for (const li of rows) {
    if (soonest.has(li.dataset.taskId)) li.dataset.deadline = new Date(soonest.get(li.dataset.taskId)).toISOString();
    else delete li.dataset.deadline;
  }
  // Already in order: leave the DOM (and focus) alone.
  if (waiting.every((li, i) => rows[i] === li)) return;
  for (const li of waiting.reverse()) list.insertBefore(li, list.firstChild);
}
