// Applying WebSocket payloads in place (no refetch). A fetch answer and an event can cross
// on the wire, so each resource has a version and the newer of two copies wins, whichever
// arrived last; an equal version takes the incoming copy.

function compareTuples(a, b) {
  for (let i = 0; i < a.length; i += 1) {
    if (a[i] < b[i]) return -1;
    if (a[i] > b[i]) return 1;
  }
  return 0;
}

/** A message's version: it only grows (aggregated text, merged metadata). */
function messageVersion(m) {
  return [String(m?.updated_at ?? m?.created_at ?? "")];
}

/** A clarification's version: pending < settled; then when it settled; then whether the answer is known. */
function recordVersion(r) {
  const settled = (r?.status ?? "pending") !== "pending" ? 1 : 0;
  return [settled, String(r?.settled_at ?? ""), r?.answer ? 1 : 0, r?.outcome ? 1 : 0];
}

/** A session's version. */
function sessionVersion(s) {
  return [String(s?.updated_at ?? "")];
}

/** A task's version: the newest of the task and its sessions. */
function taskVersion(task) {
  let v = String(task?.updated_at ?? task?.created_at ?? "");
  for (const s of task?.sessions ?? []) if (String(s.updated_at ?? "") > v) v = String(s.updated_at);
  return [v];
}

const VERSIONS = { message: messageVersion, record: recordVersion, session: sessionVersion, task: taskVersion };

/** Whether `incoming` should replace `existing` (a `kind` of resource: message, record, session, task). */
export function supersedes(kind, incoming, existing) {
  if (!existing) return true;
  if (!incoming) return false;
  const version = VERSIONS[kind];
  return compareTuples(version(incoming), version(existing)) >= 0;
}

/**
 * Chat order: by `seq` (position in the session) when both messages carry it, else by
 * creation time; a tie keeps arrival order (returns 0).
 */
export function compareMessages(a, b) {
  if (typeof a.seq === "number" && typeof b.seq === "number") return a.seq - b.seq;
  return String(a.created_at ?? "").localeCompare(String(b.created_at ?? ""));
}

/**
 * A keyed, ordered collection of resources rendered as children of one list element.
 * `upsert` applies a resource: the newer copy wins, only its element is rebuilt (focus
 * kept by `swap`), and a new one is inserted at its place by `compare`.
 */
export class KeyedList {
  /**
   * @param {HTMLElement} list the parent element
   * @param {{kind: string, key: (r) => string, render: (r) => HTMLElement, compare?: (a, b) => number, swap: Function}} options
   */
  constructor(list, { kind, key, render, compare = null, swap }) {
    Object.assign(this, { list, kind, key, render, compare, swap });
    this.items = new Map(); // key -> {value, element}
  }

  get(key) {
    return this.items.get(key)?.value ?? null;
  }

  values() {
    return [...this.items.values()].map((i) => i.value);
  }

  get size() {
    return this.items.size;
  }

  /** Apply `value`; returns "created", "updated" or null (an older copy, ignored). */
  upsert(value) {
    const k = this.key(value);
    const prev = this.items.get(k);
    if (prev && !supersedes(this.kind, value, prev.value)) return null;
    const element = this.render(value);
    element.dataset.key = k;
    if (prev) {
      this.items.set(k, { value, element });
      this.swap(prev.element, element);
      return "updated";
    }
    this.items.set(k, { value, element });
    this.list.insertBefore(element, this.compare ? this.placeFor(value) : null);
    return "created";
  }

  /** Re-render the element of `key` from its current value (something it shows changed). */
  rerender(key) {
    const item = this.items.get(key);
    if (!item) return;
    const element = this.render(item.value);
    element.dataset.key = key;
    this.swap(item.element, element);
    item.element = element;
  }

  remove(key) {
    const item = this.items.get(key);
    if (!item) return;
    item.element.remove();
    this.items.delete(key);
  }

  placeFor(value) {
    // Scan from the end: new resources almost always go last.
    let before = null;
    for (let el = this.list.lastElementChild; el; el = el.previousElementSibling) {
      const other = this.items.get(el.dataset.key)?.value;
      if (!other) continue;
      if (this.compare(other, value) <= 0) break;
      before = el;
    }
    return before;
  }
}
