// Hash routes: `#/` (board), `#/sessions/<id>`, `#/settings`; anything else is the board.

/** The route for a location hash: `{name, params}`. */
export function parseRoute(hash) {
  const path = (hash || "#/").replace(/^#/, "") || "/";
  const session = /^\/sessions\/([^/]+)$/.exec(path);
  if (session) return { name: "session", params: { sessionId: decodeURIComponent(session[1]) } };
  if (path === "/settings") return { name: "settings", params: {} };
  return { name: "board", params: {} };
}
