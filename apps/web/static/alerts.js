// Waiting is visible away from the tab (docs/architecture.md §13): the tab title counts the
// questions waiting across every session (`(2) Kandev · Board`); after the operator opts
// in under Settings, a desktop notification (Notification API) names the task — never
// the question text (F9) — and an optional chime plays. Preferences live in this
// browser's localStorage only.

import { api } from "./api.js";
import { locale, t } from "./i18n.js";
import { taskTitle } from "./titles.js";
import * as ws from "./ws.js";

const PREFS_KEY = "kandev.alerts";

/** `{desktop, sound}`: what the operator opted in to on this device. */
export function alertPrefs() {
  try {
    const saved = JSON.parse(localStorage.getItem(PREFS_KEY) ?? "{}");
    return { desktop: saved.desktop === true, sound: saved.sound === true };
  } catch {
    return { desktop: false, sound: false };
  }
}

function savePrefs(change) {
  try {
    localStorage.setItem(PREFS_KEY, JSON.stringify({ ...alertPrefs(), ...change }));
  } catch {
    // Storage refused (private mode): the choice lasts for this page only.
  }
}

/** The browser's notification permission: "granted", "denied", "default" or "unsupported". */
export function notificationPermission() {
  return typeof Notification === "function" ? Notification.permission : "unsupported";
}

/**
 * Turn desktop notifications on (asking the browser for permission when it has not been
 * asked) or off. Resolves to the state now: "on", "off", "denied" or "unsupported".
 */
export async function setDesktopAlerts(on) {
  if (!on) {
    savePrefs({ desktop: false });
    return "off";
  }
  if (notificationPermission() === "unsupported") return "unsupported";
  let permission = Notification.permission;
  if (permission === "default") permission = await Notification.requestPermission();
  const granted = permission === "granted";
  savePrefs({ desktop: granted });
  return granted ? "on" : "denied";
}

/** The desktop-notification state as Settings shows it. */
export function desktopAlertState() {
  const permission = notificationPermission();
  if (permission === "unsupported") return "unsupported";
  if (!alertPrefs().desktop) return "off";
  return permission === "granted" ? "on" : permission === "denied" ? "denied" : "off";
}

/** Turn the chime on or off. */
export function setSoundAlerts(on) {
  savePrefs({ sound: on === true });
}

let audio = null;
/** A short two-note chime through Web Audio (no file to load). */
export function chime() {
  const Context = globalThis.AudioContext ?? globalThis.webkitAudioContext;
  if (!Context) return;
  audio ??= new Context();
  audio.resume?.().catch(() => {});
  const start = audio.currentTime;
  const osc = audio.createOscillator();
  const gain = audio.createGain();
  osc.type = "sine";
  osc.frequency.setValueAtTime(880, start);
  osc.frequency.setValueAtTime(1320, start + 0.12);
  gain.gain.setValueAtTime(0.0001, start);
  gain.gain.exponentialRampToValueAtTime(0.2, start + 0.02);
  gain.gain.exponentialRampToValueAtTime(0.0001, start + 0.35);
  osc.connect(gain).connect(audio.destination);
  osc.start(start);
  osc.stop(start + 0.4);
}

// The waiting count: a fetch on every (re)connect, kept current by events in between. An
// id seen settled is never counted again, whatever a fetch that crossed it says.
const waiting = new Set();
const settled = new Set();
let addedSinceLoad = new Set();
let pageTitle = "Kandev";

function renderTitle() {
  document.title = waiting.size > 0 ? t("app.titleWaiting", { count: waiting.size, title: pageTitle }) : pageTitle;
}

/** Set the page's own title; the waiting count is put in front of it. */
export function setPageTitle(title) {
  pageTitle = title;
  renderTitle();
}

async function loadWaiting() {
  addedSinceLoad = new Set();
  try {
    const records = await api.listClarifications(null, "pending");
    const fresh = new Set([...records.map((r) => r.pending_id), ...addedSinceLoad].filter((id) => !settled.has(id)));
    waiting.clear();
    fresh.forEach((id) => waiting.add(id));
    renderTitle();
  } catch {
    // The count stays as events left it.
  }
}

function tabIsWatched() {
  return document.visibilityState === "visible" && document.hasFocus();
}

async function desktopNotification(record) {
  if (desktopAlertState() !== "on" || tabIsWatched()) return;
  const task = await taskTitle(record.task_id);
  const notification = new Notification(t("alerts.notificationTitle"), {
    body: task ? t("alerts.notificationBody", { task }) : t("alerts.notificationBodyUnknown"),
    tag: record.pending_id, // one per question, however often it is announced
    lang: locale(),
  });
  notification.onclick = () => {
    window.focus();
    location.hash = `#/sessions/${encodeURIComponent(record.session_id)}`;
    notification.close();
  };
}

/** Start counting and alerting (once per page). */
export function mountAlerts() {
  ws.on("clarification.created", (record) => {
    const id = record?.pending_id;
    if (!id || settled.has(id) || (record.status ?? "pending") !== "pending" || waiting.has(id)) return;
    waiting.add(id);
    addedSinceLoad.add(id);
    renderTitle();
    if (alertPrefs().sound) chime();
    desktopNotification(record).catch((err) => console.warn("desktop notification failed", err));
  });
  ws.on("clarification.settled", (record) => {
    if (!record?.pending_id) return;
    settled.add(record.pending_id);
    if (waiting.delete(record.pending_id)) renderTitle();
  });
  ws.onStatus((up) => up && loadWaiting());
}
