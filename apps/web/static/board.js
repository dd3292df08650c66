// The board (`#/`): tasks with their latest session's state, a form to create a task, and
// per task a form to start a session with one of the configured agents.

import { api } from "./api.js";
import { h, replace, uid, formatTime } from "./dom.js";
import { t } from "./i18n.js";
import { latestSession, stateBadge, stateVariant } from "./state.js";
import { coalesce } from "./refresh.js";
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

function taskRow(task, agents, navigate) {
  const session = latestSession(task);
  const waiting = stateVariant(session, task) === "waiting-for-input";
  const titleId = uid("task");
  return h("li", { class: `task${waiting ? " waiting" : ""}`, "data-testid": "task-row", "data-task-id": task.id, "aria-labelledby": titleId },
    h("div", { class: "task-head" },
      stateBadge(session, task),
      h("h3", { id: titleId, class: "task-title" }, task.title || task.id)),
    task.description ? h("p", { class: "task-desc" }, task.description) : null,
    h("p", { class: "task-meta" },
      session
        ? [t("board.latestSession", { agent: session.agent ?? "?" }), " · ", t("board.sessionCount", { count: (task.sessions ?? []).length }), session.created_at ? ` · ${formatTime(session.created_at)}` : ""]
        : t("board.noSession")),
    session
      ? h("a", { class: `button${waiting ? " primary" : ""}`, href: `#/sessions/${encodeURIComponent(session.id)}`, "data-testid": "open-session" },
        waiting ? t("card.open") : t("board.open"))
      : null,
    h("details", { class: "start", open: !session },
      h("summary", {}, t("board.start.legend")),
      startForm(task, agents, navigate)));
}

function createForm(onCreated) {
  const titleId = uid("title");
  const descId = uid("desc");
  const status = h("p", { class: "form-status", role: "status", "data-testid": "create-task-status" });
  const form = h("form", { class: "card create-task", "data-testid": "create-task-form", "aria-labelledby": `${titleId}-h` },
    h("h2", { id: `${titleId}-h` }, t("board.create.heading")),
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
      await api.createTask(title, form.elements.description.value.trim());
      form.reset();
      status.textContent = t("board.create.created");
      onCreated();
    } catch (err) {
      status.textContent = t("common.error", { message: err.message });
    }
  });
  return form;
}

/** Mount the board into `root`; returns the unmount function. */
export function mountBoard(root, { navigate }) {
  const list = h("ul", { class: "tasks", "data-testid": "task-list", "aria-live": "polite" });
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
  const refresh = coalesce(async () => {
    try {
      const [tasks, agents] = await Promise.all([api.listTasks(), loadAgents()]);
      status.hidden = tasks.length > 0;
      status.textContent = tasks.length ? "" : t("board.empty");
      // Keep open <details> and typed text: only rows whose data changed are replaced.
      const sorted = tasks.slice().sort((a, b) => String(b.created_at ?? "").localeCompare(String(a.created_at ?? "")));
      const old = new Map([...list.children].map((li) => [li.dataset.taskId, li]));
      const rows = sorted.map((task) => {
        const key = JSON.stringify(task);
        const prev = old.get(task.id);
        if (prev && prev.dataset.key === key) return prev;
        const row = taskRow(task, agents, navigate);
        row.dataset.key = key;
        if (prev?.querySelector("details")?.open) row.querySelector("details").open = true;
        return row;
      });
      replace(list, rows);
    } catch (err) {
      status.hidden = false;
      status.textContent = t("common.error", { message: err.message });
    }
  });
  replace(root,
    h("div", { class: "board" },
      h("section", { class: "board-main", "aria-labelledby": "board-h" },
        h("h1", { id: "board-h" }, t("board.heading")),
        flagHint,
        status,
        list),
      h("aside", { class: "board-side" }, createForm(refresh))));
  const offs = ["session.updated", "clarification.created", "clarification.settled", "task.created", "task.updated"].map((type) => ws.on(type, refresh));
  offs.push(ws.onStatus((up) => {
    if (up) {
      refresh();
      loadHint();
    }
  }));
  refresh();
  loadHint();
  return () => offs.forEach((off) => off());
}
