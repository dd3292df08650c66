// Task titles by id, for what carries only a task id (notifications, desktop alerts): one
// task-list fetch when first needed, kept current by `task.*` events, a GET for a task
// created since.

import { api } from "./api.js";
import * as ws from "./ws.js";

const titles = new Map();
let listed = null;

function remember(task) {
  if (task?.id && task.title) titles.set(task.id, task.title);
}

ws.on("task.created", remember);
ws.on("task.updated", remember);

/** Fetch every title once (again after `refresh`). */
export function loadTitles(refresh = false) {
  if (!listed || refresh) {
    listed = api.listTasks().then((tasks) => tasks.forEach(remember), () => {});
  }
  return listed;
}

/** The title of task `id` as known now, or null. */
export function knownTitle(id) {
  return titles.get(id) ?? null;
}

/** The title of task `id`, fetched when unknown; null when it cannot be had. */
export async function taskTitle(id) {
  if (!id) return null;
  if (!titles.has(id)) await loadTitles();
  if (!titles.has(id)) remember(await api.getTask(id).catch(() => null));
  return titles.get(id) ?? null;
}
