// A tiny element builder: h("p", {class: "x", "data-testid": "y"}, "text", child).
// Text is always set as text (never parsed as HTML), so agent content cannot inject markup.

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

/** A short local date-time for timestamps. */
export function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" });
}
