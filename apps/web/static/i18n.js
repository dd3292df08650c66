// The one message catalogue: every operator-facing string of the UI comes from here,
// so wording lives in one place and a translation is one more catalogue.

const en = {
  "app.title": "Kandev",
  "app.tagline": "Supervise your coding agents",
  "app.skipToContent": "Skip to content",
  "nav.board": "Board",
  "nav.settings": "Settings",
  "nav.notifications": "Notifications",
  "nav.notificationsCount": "Notifications ({count} new)",
  "nav.main": "Main",
  "conn.online": "Live",
  "conn.offline": "Reconnecting…",
  "conn.status": "Connection: {state}",

  "common.loading": "Loading…",
  "common.error": "Something went wrong: {message}",
  "common.networkError": "The server could not be reached.",
  "common.close": "Close",
  "common.notFound": "Not found.",
  "common.back": "Back to the board",

  "board.heading": "Tasks",
  "board.empty": "No tasks yet. Create one to start an agent session.",
  "board.create.heading": "New task",
  "board.create.title": "Title",
  "board.create.description": "Description",
  "board.create.submit": "Create task",
  "board.create.titleRequired": "Give the task a title.",
  "board.create.created": "Task created.",
  "board.noSession": "No session yet",
  "board.sessionCount": "{count} session(s)",
  "board.latestSession": "Latest session: {agent}",
  "board.open": "Open session",
  "board.start.legend": "Start a session",
  "board.start.agent": "Agent",
  "board.start.prompt": "First prompt (optional)",
  "board.start.submit": "Start session",
  "board.start.agentRequired": "Choose an agent.",
  "board.waiting": "Waiting for your answer",
  "board.flagOff": "Agents cannot ask you structured questions yet, so they ask in plain text.",
  "board.flagOffLink": "Turn on ACP form elicitation in Settings",

  "state.WAITING_FOR_INPUT": "Waiting for input",
  "state.RUNNING": "Running",
  "state.STARTING": "Starting",
  "state.CREATED": "Created",
  "state.IDLE": "Idle",
  "state.FAILED": "Failed",
  "state.COMPLETED": "Completed",
  "state.CANCELLED": "Cancelled",
  "state.NONE": "No session",

  "session.heading": "Session",
  "session.task": "Task: {title}",
  "session.agent": "Agent: {agent}",
  "session.state": "State: {state}",
  "session.chat": "Conversation",
  "session.chatEmpty": "No messages yet.",
  "session.prompt.label": "Message to the agent",
  "session.prompt.placeholder": "Ask the agent to do something… (Ctrl+Enter to send)",
  "session.prompt.send": "Send",
  "session.prompt.sent": "Sent.",
  "session.cancel": "Cancel turn",
  "session.stop": "Stop session",
  "session.cancelled": "Cancel requested.",
  "session.stopped": "Stop requested.",
  "session.capabilities": "Client capabilities",
  "session.elicitationOn": "Structured questions: on",
  "session.elicitationOff": "Structured questions: off",

  "author.user": "You",
  "author.agent": "Agent",
  "author.system": "System",
  "author.thought": "Agent (thinking)",
  "message.toolCall": "Tool call",
  "message.toolStatus": "Status: {status}",

  "card.heading": "Question from the agent",
  "card.status.pending": "Waiting for your answer",
  "card.status.answered": "Answered",
  "card.status.declined": "Skipped",
  "card.status.cancelled": "Cancelled",
  "card.status.expired": "Expired: no answer before the deadline",
  "card.status.agent_disconnected": "The agent disconnected",
  "card.answer": "Answer: {answer}",
  "card.open": "Answer now",

  "clar.heading": "The agent needs your input",
  "clar.more": "{count} more question(s) waiting after this one.",
  "clar.required": "required",
  "clar.requiredMark": "*",
  "clar.customLabel": "Your answer",
  "clar.otherLabel": "Or type your own answer",
  "clar.customHintCoexist": "When you type here, your typed answer is used instead of the option.",
  "clar.customHintExclusive": "Typing here clears the option you chose.",
  "clar.clearChoice": "Clear choice",
  "clar.booleanYes": "Yes",
  "clar.booleanNo": "No",
  "clar.submit": "Submit answer",
  "clar.skip": "Skip",
  "clar.sending": "Sending…",
  "clar.fixErrors": "Please fix the highlighted answers first.",
  "clar.err.required": "This answer is required.",
  "clar.err.minLength": "Use at least {n} character(s).",
  "clar.err.maxLength": "Use at most {n} character(s).",
  "clar.err.pattern": "The answer does not have the expected form ({pattern}).",
  "clar.err.format.email": "Enter an email address, like name@example.com.",
  "clar.err.format.uri": "Enter an absolute address, like https://example.com.",
  "clar.err.format.date": "Enter a date as YYYY-MM-DD.",
  "clar.err.format.date-time": "Enter a date and time as YYYY-MM-DDTHH:MM:SSZ.",
  "clar.err.number": "Enter a number.",
  "clar.err.integer": "Enter a whole number.",
  "clar.err.minimum": "Enter {n} or more.",
  "clar.err.maximum": "Enter {n} or less.",
  "clar.err.minItems": "Choose at least {n}.",
  "clar.err.maxItems": "Choose at most {n}.",
  "clar.err.tooLong": "Keep the answer under {n} characters.",
  "clar.hint.range": "Between {min} and {max}.",
  "clar.hint.min": "At least {min}.",
  "clar.hint.max": "At most {max}.",
  "clar.hint.items": "Choose between {min} and {max}.",
  "clar.outcome.answered": "Your answer was delivered to the agent.",
  "clar.outcome.declined": "You skipped the question; the agent was told.",
  "clar.outcome.invalid": "The answer was not accepted: {message}",
  "clar.outcome.notFound": "This question was already answered elsewhere, or is no longer open.",
  "clar.outcome.notConnected": "Your answer did not reach the agent; the question stays open. Try again in a moment.",
  "clar.outcome.notDelivered": "The agent disconnected; your answer was recorded but not delivered.",
  "clar.outcome.conflict": "This question is no longer open: {message}",
  "clar.outcome.error": "The answer could not be sent: {message}",
  "clar.withdrawn": "The question was closed ({status}).",

  "settings.heading": "Settings",
  "settings.flags": "Runtime flags",
  "settings.appliesNext": "A change applies to sessions started after it. Sessions already running keep the value they started with.",
  "settings.restartRequired": "This flag needs a restart of kandev to take effect.",
  "settings.value": "Value",
  "settings.on": "On",
  "settings.off": "Off",
  "settings.source": "Source: {source}",
  "settings.source.default": "built-in default",
  "settings.source.profile": "profile",
  "settings.source.override": "set here",
  "settings.source.env": "environment variable",
  "settings.stability": "Stability: {stability}",
  "settings.risk": "Risk: {risk}",
  "settings.envVar": "Environment variable: {env}",
  "settings.lockedEnv": "Locked: set by the environment variable {env}. Unset it and restart kandev to change it here.",
  "settings.immutable": "This flag cannot be changed at run time.",
  "settings.reset": "Use profile value",
  "settings.saved": "Saved. New sessions will use: {value}.",
  "settings.empty": "No runtime flags.",

  "notif.heading": "Notifications",
  "notif.empty": "No notifications yet.",
  "notif.open": "Open session",
  "notif.dismiss": "Dismiss",
  "notif.clarification": "An agent is waiting for your answer",
};

let catalogue = en;

/** Replace the catalogue (for a translation); missing keys fall back to English. */
export function useCatalogue(messages) {
  catalogue = { ...en, ...messages };
}

/** The message for `key`, with `{name}` placeholders filled from `vars`. */
export function t(key, vars = {}) {
  const text = catalogue[key] ?? en[key];
  if (text === undefined) {
    // A missing key is a bug; show the key so it is visible, never crash the view.
    console.warn(`i18n: missing key ${key}`);
    return key;
  }
  return text.replace(/\{(\w+)\}/g, (m, name) => (name in vars ? String(vars[name]) : m));
}

/** Whether the catalogue has `key` (for values that may or may not have a label). */
export function has(key) {
  return key in catalogue || key in en;
}
