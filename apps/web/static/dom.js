// A tiny element builder: h("p", {class: "x", "data-testid": "y"}, "text", child).
// Text is always set as text (never parsed as HTML), so agent content cannot inject markup.

import { locale } from "./i18n.js";

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name in el && typeof value !== "string") {
      el[name] = value; // properties such as checked, disabled, value
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace all children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let idCounter = 0;
/** A document-unique id for label/for and aria wiring. */
export function uid(prefix = "k") {
  idCounter += 1;
  return `${prefix}-${idCounter}`;
}

/** A `<time>` element showing `iso` as a short local date-time. */
export function timeEl(iso, attrs = {}) {
  return h("time", { datetime: iso, ...attrs }, formatTime(iso));
}

/** A short local date-time for timestamps, in the UI locale. */
export function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(locale(), { dateStyle: "short", timeStyle: "short" });
}

/**
 * Put `next` in the place of `old`, keeping keyboard focus: when the focused element was
 * inside `old`, its counterpart in `next` (same `data-testid`, else same id) gets focus.
 * Used wherever an updated resource re-renders a piece of a list in place.
 */
export function swap(old, next) {
  if (!old || old === next) return next;
  const active = document.activeElement;
  const hadFocus = active && active !== document.body && old.contains(active);
  const key = hadFocus ? active.dataset?.testid ?? null : null;
  const wasItself = active === old;
  old.replaceWith(next);
  if (wasItself) {
    // The item itself had focus (brought into view and focused): its new copy takes it.
    if (next.tabIndex < 0 && !next.hasAttribute("tabindex")) next.tabIndex = -1;
    next.focus({ preventScroll: true });
  } else if (hadFocus) {
    const counterpart = (key && next.querySelector(`[data-testid="${CSS.escape(key)}"]`)) || (next.matches?.(":is(a, button, input, select, textarea)") ? next : null);
    (counterpart ?? next.closest("[tabindex], main"))?.focus({ preventScroll: true });
  }
  return next;
}

let announcer = null;
/**
 * Say `text` to screen readers through one polite live region: lists are never live
 * regions themselves, so an update in place is announced once, in words.
 */
export function announce(text) {
  if (!announcer) {
    announcer = h("div", { class: "sr-only", role: "status", "aria-live": "polite", "data-testid": "announcer" });
    (document.querySelector("main") ?? document.body).after(announcer);
  }
  // Clearing first makes a repeated identical message announced again.
  announcer.textContent = "";
  requestAnimationFrame(() => {
    announcer.textContent = text;
  });
}
