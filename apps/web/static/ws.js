// The operator WebSocket (`/api/v1/ws`): one connection for the whole page, reconnected
// with exponential backoff. Views subscribe to event types; on every (re)connect they are
// told so they can refetch what they show, since events sent while offline are lost.
// Transcript events (`message.*`) come only for the sessions a view watches
// (`watchTranscript`): the server is told in the URL of every (re)connect (`?watch=`) and
// by a `watch` frame at every change, and acknowledges each with a `watching` event, from
// which on it sends them all.

const listeners = new Map(); // type -> Set<fn(data, event)>
const statusListeners = new Set(); // fn(connected: boolean)
let socket = null;
let connected = false;
let attempt = 0;
let retryTimer = null;
const watched = new Map(); // session id -> how many views watch its transcript
let connectedWatch = ""; // the watch the current socket's URL carried

const BASE_DELAY_MS = 250;
const MAX_DELAY_MS = 10_000;

/** Delay before reconnect attempt `n` (0-based): doubling, capped, with jitter. */
export function backoffDelay(n, random = Math.random) {
  const base = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** n);
  return Math.round(base / 2 + (random() * base) / 2);
}

/** The watched sessions as the `watch` query parameter: ids separated by commas. */
function watchParam() {
  return [...watched.keys()].map(encodeURIComponent).join(",");
}

function wsUrl(watch) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/api/v1/ws?watch=${watch}`;
}

function setConnected(value) {
  connected = value;
  for (const fn of statusListeners) fn(value);
}

function dispatch(type, data, event) {
  for (const key of [type, "*"]) {
    for (const fn of listeners.get(key) ?? []) {
      try {
        fn(data, event);
      } catch (err) {
        console.error("ws listener failed", type, err);
      }
    }
  }
}

/** Tell the server which transcripts to send (on every change). */
function sendWatch() {
  if (!socket || socket.readyState !== WebSocket.OPEN) return;
  socket.send(JSON.stringify({ type: "watch", data: { sessions: [...watched.keys()] } }));
}

/**
 * Follow a session's transcript; returns the release function. Its events come from the
 * `watching` event that names it on: a view reads the transcript then, so it misses none.
 */
export function watchTranscript(sessionId) {
  watched.set(sessionId, (watched.get(sessionId) ?? 0) + 1);
  sendWatch();
  return () => {
    const left = (watched.get(sessionId) ?? 1) - 1;
    if (left > 0) watched.set(sessionId, left);
    else watched.delete(sessionId);
    sendWatch();
  };
}

/** Open the connection (idempotent). */
export function connect() {
  if (socket) return;
  connectedWatch = watchParam();
  socket = new WebSocket(wsUrl(connectedWatch));
  socket.addEventListener("open", () => {
    attempt = 0;
    // A view that started or stopped watching while the socket connected.
    if (watchParam() !== connectedWatch) sendWatch();
    setConnected(true);
  });
  socket.addEventListener("message", (msg) => {
    let event;
    try {
      event = JSON.parse(msg.data);
    } catch {
      return;
    }
    if (event && typeof event.type === "string") dispatch(event.type, event.data ?? {}, event);
  });
  socket.addEventListener("close", () => {
    socket = null;
    if (connected) setConnected(false);
    clearTimeout(retryTimer);
    retryTimer = setTimeout(connect, backoffDelay(attempt++));
  });
  // An error is always followed by close, which schedules the retry.
  socket.addEventListener("error", () => {});
}

/** Subscribe to one event type (or "*"); returns the unsubscribe function. */
export function on(type, fn) {
  if (!listeners.has(type)) listeners.set(type, new Set());
  listeners.get(type).add(fn);
  return () => listeners.get(type)?.delete(fn);
}

/** Be told about connect (true) and disconnect (false); called at once with the current state. */
export function onStatus(fn) {
  statusListeners.add(fn);
  fn(connected);
  return () => statusListeners.delete(fn);
}

export function isConnected() {
  return connected;
}
