// The board (`#/`): tasks with their latest session's state, a form to create a task, and
// per task a form to start a session with one of the configured agents.

import { api } from "./api.js";
import { announce, h, replace, timeEl, uid } from "./dom.js";
import { t } from "./i18n.js";
import { createNeedsYou } from "./needs-you.js";
import { latestSession, stateBadge, stateLabel, stateVariant } from "./state.js";
import { supersedes } from "./live.js";
import { coalesce } from "./refresh.js";
import { orderByDeadline } from "./deadline.js";
import * as ws from "./ws.js";

const ELICITATION_FLAG = "features.acpElicitation";
let agentsPromise = null;
/** The configured agent ids, or null when the API has no agent list (then a text field is used). */
function loadAgents() {
  agentsPromise ??= api.listAgents().then(
    (agents) => agents.map((a) => (typeof a === "string" ? a : a.id)).filter(Boolean),
    () => null,
  );
  return agentsPromise;
}

function agentField(agents) {
  const id = uid("agent");
  const control = agents && agents.length > 0
    ? h("select", { id, name: "agent", required: true, "data-testid": "start-agent" },
      agents.map((a) => h("option", { value: a, selected: a === "mock" }, a)))
    : h("input", { id, name: "agent", type: "text", required: true, value: "mock", autocomplete: "off", "data-testid": "start-agent" });
  return h("div", { class: "field" }, h("label", { for: id }, t("board.start.agent")), control);
}

function startForm(task, agents, navigate) {
  const promptId = uid("prompt");
  const status = h("p", { class: "form-status", role: "status" });
  const form = h("form", { class: "start-form", "data-testid": "start-session-form" },
    h("fieldset", {},
      h("legend", {}, t("board.start.legend")),
      agentField(agents),
      h("div", { class: "field" },
        h("label", { for: promptId }, t("board.start.prompt")),
        h("input", { id: promptId, name: "prompt", type: "text", autocomplete: "off", "data-testid": "start-prompt" })),
      h("button", { type: "submit", class: "primary", "data-testid": "start-session" }, t("board.start.submit")),
      status));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const agent = form.elements.agent.value.trim();
    const prompt = form.elements.prompt.value.trim();
    if (!agent) {
      status.textContent = t("board.start.agentRequired");
      return;
    }
    form.querySelector("button").disabled = true;
    try {
      const session = await api.startSession(task.id, agent, prompt);
      navigate(`#/sessions/${encodeURIComponent(session.id)}`);
    } catch (err) {
      status.textContent = t("common.error", { message: err.message });
    } finally {
      form.querySelector("button").disabled = false;
    }
  });
  return form;
}

/**
 * One task row. The start form is built once and kept, so an update (a `task.updated`
 * payload) patches the badge, the meta line and the open link around it: an open
 * <details>, focus and typed text survive.
 */
function taskRow(task, agents, navigate) {
  const titleId = uid("task");
  const badge = h("span", { class: "badge-slot" });
  const title = h("h2", { id: titleId, class: "task-title" });
  const desc = h("p", { class: "task-desc" });
  const meta = h("p", { class: "task-meta" });
  const open = h("a", { class: "button", "data-testid": "open-session" });
  const start = h("details", { class: "start", open: !latestSession(task) },
    h("summary", {}, t("board.start.legend")),
    startForm(task, agents, navigate));
  const element = h("li", { class: "task", "data-testid": "task-row", "data-task-id": task.id, "aria-labelledby": titleId },
    h("div", { class: "task-head" }, badge, title),
    desc, meta, open, start);
  let shown = null;
  function update(next) {
    const session = latestSession(next);
    const variant = stateVariant(session, next);
    const waiting = variant === "waiting-for-input";
    element.classList.toggle("waiting", waiting);
    if (shown?.variant !== variant || shown?.label !== stateLabel(session, next)) replace(badge, stateBadge(session, next));
    title.textContent = next.title || next.id;
    desc.textContent = next.description ?? "";
    desc.hidden = !next.description;
    replace(meta, session
      ? [t("board.latestSession", { agent: session.agent ?? "?" }), " · ", t("board.sessionCount", { count: (next.sessions ?? []).length }), session.created_at ? [" · ", timeEl(session.created_at)] : null]
      : t("board.noSession"));
    open.hidden = !session;
    if (session) {
      open.href = `#/sessions/${encodeURIComponent(session.id)}`;
      open.classList.toggle("primary", waiting);
      open.textContent = waiting ? t("card.open") : t("board.open");
    }
    shown = { variant, label: stateLabel(session, next) };
  }
  update(task);
  return { element, update };
}

function createForm(onCreated) {
  const titleId = uid("title");
  const descId = uid("desc");
  const headingId = "create-task-h";
  const status = h("p", { class: "form-status", role: "status", "data-testid": "create-task-status" });
  const form = h("form", { class: "card create-task", "data-testid": "create-task-form", "aria-labelledby": headingId },
    h("h2", { id: headingId }, t("board.create.heading")),
    h("div", { class: "field" },
      h("label", { for: titleId }, t("board.create.title")),
      h("input", { id: titleId, name: "title", type: "text", required: true, autocomplete: "off", "data-testid": "create-task-title" })),
    h("div", { class: "field" },
      h("label", { for: descId }, t("board.create.description")),
      h("textarea", { id: descId, name: "description", rows: 3, "data-testid": "create-task-description" })),
    h("button", { type: "submit", class: "primary", "data-testid": "create-task-submit" }, t("board.create.submit")),
    status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const title = form.elements.title.value.trim();
    if (!title) {
      status.textContent = t("board.create.titleRequired");
      form.elements.title.focus();
      return;
    }
    try {
      const task = await api.createTask(title, form.elements.description.value.trim());
      form.reset();
      status.textContent = t("board.create.created");
      onCreated(task);
    } catch (err) {
      status.textContent = t("common.error", { message: err.message });
    }
  });
  return form;
}

/** Mount the board into `root`; returns the unmount function. */
export function mountBoard(root, { navigate }) {
  const list = h("ul", { class: "tasks", "data-testid": "task-list", "aria-labelledby": "board-h" });
  // Discoverability: with the flag off, agents ask in prose; say where to turn it on.
  const flagHint = h("p", { class: "note", "data-testid": "board-flag-hint", hidden: true },
    t("board.flagOff"), " ", h("a", { href: "#/settings" }, t("board.flagOffLink")));
  const loadHint = async () => {
    try {
      const flag = (await api.listFlags()).find((f) => f.key === ELICITATION_FLAG);
      flagHint.hidden = !flag || flag.value === true;
    } catch {
      flagHint.hidden = true;
    }
  };
  const status = h("p", { class: "muted" }, t("common.loading"));
  const rows = new Map(); // task id -> {task, row}
  let agents = null;
  let loaded = false;

  const showEmpty = () => {
    status.hidden = rows.size > 0;
    status.textContent = rows.size ? "" : t("board.empty");
  };

  /** Apply one task (a fetch answer or a `task.*` payload): patch its row or insert it, newest first. */
  function applyTask(task) {
    if (!task?.id) return;
    const known = rows.get(task.id);
    if (known) {
      if (!supersedes("task", task, known.task)) return;
      const wasWaiting = stateVariant(latestSession(known.task), known.task) === "waiting-for-input";
      known.task = task;
      known.row.update(task);
      if (!wasWaiting && stateVariant(latestSession(task), task) === "waiting-for-input") {
        announce(t("board.announce.waiting", { title: task.title || task.id }));
      }
      return;
    }
    const row = taskRow(task, agents, navigate);
    rows.set(task.id, { task, row });
    const created = String(task.created_at ?? "");
    const before = [...list.children].find((li) => String(rows.get(li.dataset.taskId)?.task.created_at ?? "") < created);
    list.insertBefore(row.element, before ?? null);
    showEmpty();
  }

  const load = coalesce(async () => {
    try {
      const [tasks, fetchedAgents] = await Promise.all([api.listTasks(), loadAgents()]);
      agents = fetchedAgents;
      loaded = true;
      for (const task of tasks) applyTask(task);
      showEmpty();
      orderByDeadline(list);
    } catch (err) {
      status.hidden = false;
      status.textContent = t("common.error", { message: err.message });
    }
  });
  // The questions waiting, longest wait first, above everything else.
  const needsYou = createNeedsYou();
  replace(root,
    h("div", { class: "board" },
      h("section", { class: "board-main", "aria-labelledby": "board-h" },
        h("h1", { id: "board-h" }, t("board.heading")),
        needsYou.element,
        flagHint,
        status,
        list),
      h("aside", { class: "board-side", "aria-labelledby": "create-task-h" }, createForm(applyTask))));
  // Rows are built with the agent list; until it is loaded, an event just starts the load.
  const whenLoaded = (fn) => (data) => (loaded ? fn(data) : load());
  const offs = [
    ws.on("task.created", whenLoaded(applyTask)),
    ws.on("task.updated", whenLoaded((task) => {
      applyTask(task);
      orderByDeadline(list);
    })),
    ws.onStatus((up) => {
      if (up) {
        load();
        loadHint();
      }
    }),
  ];
  load();
  loadHint();
  return () => {
    needsYou.unmount();
    offs.forEach((off) => off());
  };
}
