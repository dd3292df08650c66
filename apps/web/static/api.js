// The operator HTTP API (docs/architecture.md §4.4). Every call resolves to the parsed body or
// throws an ApiError carrying the HTTP status and the server's `{error: {code, message}}`.

/** An HTTP error from the API, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

async function request(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, "NETWORK", String(err?.message ?? err), null);
  }
  const text = await res.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { raw: text };
    }
  }
  if (!res.ok) {
    const err = parsed?.error ?? {};
    const error = new ApiError(res.status, err.code ?? `HTTP_${res.status}`, err.message ?? res.statusText, parsed);
    error.retryAfter = Number(res.headers.get("Retry-After")) || undefined;
    // A session that expired mid-use: login.js brings the sign-in form back.
    if (res.status === 401 && !path.startsWith("/api/v1/auth/")) window.dispatchEvent(new CustomEvent("kandev:unauthorized"));
    throw error;
  }
  return parsed ?? {};
}

const enc = encodeURIComponent;

export const api = {
  me: () => request("GET", "/api/v1/auth/me"),
  login: (token) => request("POST", "/api/v1/auth/login", { token }),
  logout: () => request("POST", "/api/v1/auth/logout"),
  listTasks: () => request("GET", "/api/v1/tasks").then((b) => b.tasks ?? []),
  getTask: (id) => request("GET", `/api/v1/tasks/${enc(id)}`),
  createTask: (title, description) => request("POST", "/api/v1/tasks", { title, description }),
  startSession: (taskId, agent, prompt) =>
    request("POST", `/api/v1/tasks/${enc(taskId)}/sessions`, prompt ? { agent, prompt } : { agent }),
  getSession: (id) => request("GET", `/api/v1/sessions/${enc(id)}`),
  listMessages: (id) => request("GET", `/api/v1/sessions/${enc(id)}/messages`).then((b) => b.messages ?? []),
  prompt: (id, text) => request("POST", `/api/v1/sessions/${enc(id)}/prompt`, { text }),
  cancel: (id) => request("POST", `/api/v1/sessions/${enc(id)}/cancel`, {}),
  stop: (id) => request("POST", `/api/v1/sessions/${enc(id)}/stop`, {}),
  listClarifications: (sessionId, status) => {
    const q = new URLSearchParams();
    if (sessionId) q.set("session_id", sessionId);
    if (status) q.set("status", status);
    return request("GET", `/api/v1/clarifications?${q}`).then((b) => b.clarifications ?? []);
  },
  getClarification: (id) => request("GET", `/api/v1/clarifications/${enc(id)}`),
  respond: (id, payload) => request("POST", `/api/v1/clarifications/${enc(id)}/respond`, payload),
  cancelClarification: (id) => request("POST", `/api/v1/clarifications/${enc(id)}/cancel`, {}),
  listFlags: () => request("GET", "/api/v1/runtime-flags").then((b) => b.flags ?? []),
  setFlag: (key, override) => request("PATCH", `/api/v1/runtime-flags/${enc(key)}`, { override }),
  listNotifications: () => request("GET", "/api/v1/notifications").then((b) => b.notifications ?? []),
  // Not in §4.4 yet: the UI falls back to a free-text agent id when this 404s.
  listAgents: () => request("GET", "/api/v1/agents").then((b) => b.agents ?? []),
};
