// What the operator has entered per open question, kept in this tab's sessionStorage so a
// surface rendered again — after leaving the session, or a reload — shows it again. A
// secret field is never kept (its field reports no draft). Dropped when the question
// settles.

const PREFIX = "kandev.draft.";

function storage() {
  try {
    return globalThis.sessionStorage ?? null;
  } catch {
    return null; // storage refused: drafts last for this page only
  }
}

const memory = new Map(); // pending id -> {question id -> state}, when storage is refused

/** The saved states of `pendingId` (`{question id -> {selected, text}}`), or `{}`. */
export function loadDraft(pendingId) {
  const store = storage();
  if (!store) return memory.get(pendingId) ?? {};
  try {
    return JSON.parse(store.getItem(PREFIX + pendingId) ?? "{}") ?? {};
  } catch {
    return {};
  }
}

/** Keep `states` for `pendingId` (entries that are null are left out). */
export function saveDraft(pendingId, states) {
  const kept = Object.fromEntries(Object.entries(states).filter(([, v]) => v !== null));
  const store = storage();
  if (!store) {
    memory.set(pendingId, kept);
    return;
  }
  try {
    store.setItem(PREFIX + pendingId, JSON.stringify(kept));
  } catch {
    memory.set(pendingId, kept);
  }
}

/** Forget `pendingId`'s draft (its question settled). */
export function dropDraft(pendingId) {
  memory.delete(pendingId);
  try {
    storage()?.removeItem(PREFIX + pendingId);
  } catch {
    // nothing kept
  }
}
