// The foreign agent's prompt format: `ask <set> [bridge=<version>]`.

/** `ask <set> [bridge=<version>]` → {set, version}; anything else → null. */
export function parsePrompt(text, defaultVersion) {
  const m = /^\s*ask\s+([\w-]+)(?:\s+bridge=(\S+))?\s*$/.exec(text);
  if (!m) return null;
  return { set: m[1], version: m[2] ?? defaultVersion };
}
