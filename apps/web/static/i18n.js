// The message catalogues: every operator-facing string of the UI comes from here, so
// wording lives in one place. English is the reference; `i18n-pt.js` is the complete
// Portuguese one. The locale is picked from the browser's languages; plural forms go
// through Intl.PluralRules.

import { pt } from "./i18n-pt.js";

const en = {
  "app.title": "Kandev",
  "app.skipToContent": "Skip to content",
  "app.titleWaiting": "({count}) {title}",
  "nav.board": "Board",
  "nav.settings": "Settings",
  "nav.notifications": "Notifications",
  "nav.notificationsNew": { one: "new", other: "new" },
  "nav.main": "Main",
  "conn.online": "Live",
  "conn.offline": "Reconnecting…",
  "conn.status": "Connection: {state}",

  "auth.heading": "Sign in",
  "auth.token": "Operator token",
  "auth.hint": "The token “kandev operator add” printed for you. It is exchanged for a session cookie and not kept by this page.",
  "auth.submit": "Sign in",
  "auth.tokenRequired": "Paste your operator token.",
  "auth.invalidToken": "That token is not valid.",
  "auth.tooManyAttempts": "Too many failed attempts. Try again in {seconds} s.",
  "auth.signedInAs": "Signed in as {name}",
  "auth.signOut": "Sign out",

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
  "board.sessionCount": { one: "{count} session", other: "{count} sessions" },
  "board.latestSession": "Latest session: {agent}",
  "board.open": "Open session",
  "board.start.legend": "Start a session",
  "board.start.agent": "Agent",
  "board.start.prompt": "First prompt (optional)",
  "board.start.submit": "Start session",
  "board.start.agentRequired": "Choose an agent.",
  "board.flagOff": "Agents cannot ask you structured questions yet, so they ask in plain text.",
  "board.flagOffLink": "Turn on ACP form elicitation in Settings",
  "board.announce.waiting": "{title} is waiting for your answer.",

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
  "session.agent": "Agent: {agent}",
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
  "session.elicitationOn": "Structured questions: on",
  "session.elicitationOff": "Structured questions: off",
  "session.announce.question": "The agent asks you a question.",
  "session.announce.message": "New message from the agent.",

  "author.user": "You",
  "author.agent": "Agent",
  "author.system": "System",
  "author.thought": "Agent (thinking)",
  "message.toolCall": "Tool call",
  "tool.status.pending": "Pending",
  "tool.status.in_progress": "In progress",
  "tool.status.completed": "Completed",
  "tool.status.failed": "Failed",

  "card.heading": "Question from the agent",
  "card.status.pending": "Waiting for your answer",
  "card.status.answered": "Answered",
  "card.status.declined": "Skipped",
  "card.status.cancelled": "Cancelled",
  "card.status.expired": "Expired: no answer before the deadline",
  "card.status.agent_disconnected": "The agent disconnected",
  "card.question": "{title}: {prompt}",
  "card.open": "Answer now",

  "clar.heading": "The agent needs your input",
  "clar.askedBy": "Asked by {agent}",
  "clar.agentNamed": "{id} ({name})",
  "clar.agentVersion": "{name} {version}",
  "clar.forToolCall": "for the tool call “{title}”",
  "clar.forToolCallId": "for the tool call {id}",
  "clar.showToolCall": "Show the tool call",
  "clar.defaultTag": "default",
  "clar.defaultValue": "Pre-filled with the agent's default: {value}",
  "clar.submitExplain": "The agent gets your answers and carries on.",
  "clar.skipExplain": "The agent is told you declined; it carries on without an answer.",
  "clar.cancelExplain": "The agent's request is aborted: the tool call it came from stops.",
  "clar.keysHint": "Enter never sends the form (in a text answer it adds a line); {keys} submits.",
  "clar.keys": "Ctrl+Enter",
  "clar.keysMac": "⌘+Enter",
  "clar.cancel": "Cancel request",
  "clar.cancelling": "Cancelling…",
  "clar.outcome.cancelled": "You cancelled the request; the agent was told to abort it.",
  "clar.more": { one: "{count} more question waiting after this one.", other: "{count} more questions waiting after this one." },
  "clar.required": "required",
  "clar.requiredMark": "*",
  "clar.customLabel": "Your answer",
  "clar.otherLabel": "Or type your own answer",
  "clar.customHintCoexist": "Typing here unticks the options above: only your typed answer is sent.",
  "clar.customHintExclusive": "Typing here clears the option you chose.",
  "clar.clearChoice": "Clear choice",
  "clar.booleanYes": "Yes",
  "clar.booleanNo": "No",
  "clar.submit": "Submit answer",
  "clar.skip": "Skip",
  "clar.sending": "Sending…",
  "clar.fixErrors": "Please fix the highlighted answers first.",
  "clar.err.required": "This answer is required.",
  "clar.err.minLength": { one: "Use at least {count} character.", other: "Use at least {count} characters." },
  "clar.err.maxLength": { one: "Use at most {count} character.", other: "Use at most {count} characters." },
  "clar.err.pattern": "Must match the format the agent asked for.",
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

  "history.heading": "Questions in this session",
  "history.noAnswer": "No answer was given.",
  "history.by": "By {who}",
  "history.byLocal": "the operator (no sign-in)",
  "history.badge.rule": "Rule",
  "history.badge.deadline": "Deadline",
  "history.deadline.defaults": "the deadline (the defaults were sent)",
  "history.deadline.cancel": "the deadline (cancelled)",
  "history.outcome.answered": "Answered",
  "history.outcome.skipped": "Skipped",
  "history.outcome.cancelled": "Cancelled by the operator",
  "history.outcome.timed_out": "Timed out",
  "history.outcome.agent_cancelled": "Withdrawn by the agent",
  "history.outcome.withdrawn": "Closed: the session ended or the agent is gone",

  "settings.heading": "Settings",
  "deadline.decline": "Declines in {left}",
  "deadline.timeout": "Times out in {left}",
  "deadline.defaults": "Sends the defaults in {left}",
  "deadline.cancel": "Cancels in {left}",
  "deadline.defaulted": "The deadline has passed: the agent gets the form's defaults.",
  "deadline.cancelled": "The deadline has passed: the agent is told “cancel”.",
  "deadline.declined": "The deadline has passed: the agent is told “decline”.",
  "deadline.timedOut": "The deadline has passed: the tool returns a timeout.",
  "deadline.title": "Answer by {at}",
  "webhooks.heading": "Webhooks",
  "webhooks.intro": "Where questions, reminders and escalations are sent (set in kandev.toml), and how each one's latest delivery went.",
  "webhooks.none": "No delivery yet.",
  "webhooks.last": "{event}: {status}",
  "webhooks.status.delivered": "delivered",
  "webhooks.status.pending": "retrying",
  "webhooks.status.failed": "failed",
  "webhooks.status.dropped": "not sent (the question was settled first)",
  "webhooks.attempts": { one: "{count} attempt", other: "{count} attempts" },
  "link.noToken": "This link holds no answer token.",
  "link.settled": "This question is no longer waiting ({status}).",
  "link.as": "Answering as {name}",
  "link.cancelNeedsSignIn": "Sign in to cancel the agent's tool call.",
  "settings.flags": "Runtime flags",
  "settings.appliesNext": "A change applies to sessions started after it. Sessions already running keep the value they started with.",
  "settings.restartRequired": "This flag needs a restart of kandev to take effect.",
  "settings.on": "On",
  "settings.off": "Off",
  "settings.source": "Source: {source}",
  "settings.source.default": "built-in default",
  "settings.source.profile": "profile",
  "settings.source.override": "set here",
  "settings.source.env": "environment variable",
  "settings.stability": "Stability: {stability}",
  "settings.risk": "Risk: {risk}",
  "settings.stabilityValue.experimental": "experimental",
  "settings.stabilityValue.beta": "beta",
  "settings.stabilityValue.stable": "stable",
  "settings.riskValue.low": "low",
  "settings.riskValue.medium": "medium",
  "settings.riskValue.high": "high",
  "flag.features.acpElicitation.label": "ACP form elicitation",
  "flag.features.acpElicitation.description": "Lets ACP agents ask the operator structured questions (forms with choices or free text) in the middle of a turn; the agent waits for the answer from the board. Applies to sessions started after the change; running sessions keep the value they started with.",
  "settings.lockedEnv": "Locked: set by the environment variable {env}. Unset it and restart kandev to change it here.",
  "settings.immutable": "This flag cannot be changed at run time.",
  "settings.reset": "Use profile value",
  "settings.saved": "Saved. New sessions will use: {value}.",
  "settings.empty": "No runtime flags.",

  "alerts.heading": "Alerts on this device",
  "alerts.intro": "Be told when an agent waits for you, even while this tab is in the background. These choices are kept in this browser only.",
  "alerts.desktop": "Desktop notification when an agent asks",
  "alerts.desktopDesc": "The notification names the task, never the question.",
  "alerts.sound": "Play a sound when an agent asks",
  "alerts.soundDesc": "A short chime, also while this tab is open.",
  "alerts.status.on": "Desktop notifications are on.",
  "alerts.status.off": "Desktop notifications are off.",
  "alerts.status.asking": "Asking the browser for permission…",
  "alerts.status.denied": "The browser blocks notifications for this site. Allow them in the browser's site settings, then turn this on again.",
  "alerts.status.unsupported": "This browser cannot show desktop notifications.",
  "alerts.status.soundOn": "The sound is on.",
  "alerts.status.soundOff": "The sound is off.",
  "alerts.notificationTitle": "Kandev: input needed",
  "alerts.notificationBody": "The agent working on “{task}” is waiting for your answer.",
  "alerts.notificationBodyUnknown": "An agent is waiting for your answer.",

  "notif.heading": "Notifications",
  "notif.empty": "No notifications yet.",
  "notif.open": "Open session",
  "notif.dismiss": "Dismiss",
  "clar.counter": "{used} / {max} characters",
  "clar.itemsCounter": { one: "{count} chosen, at most {max}", other: "{count} chosen, at most {max}" },
  "clar.err.patternUnusable": "The agent's pattern for this field cannot be checked, so no answer can be accepted here. Leave it empty, or Skip.",
  "clar.err.patternDetail": "The pattern",
  "clar.preview.label": "The agent will receive:",
  "clar.preview.nothing": "The agent will receive: nothing (an empty answer, which it reads as skipped).",
  "clar.empty.ask": "Nothing answered — send an empty answer or Skip?",
  "clar.empty.send": "Send an empty answer",
  "clar.confirmCancel": "Cancel the request? What you typed will be lost.",
  "clar.throughMcp": "through the MCP server “{server}”",
  "clar.closed.answered": "This question was answered elsewhere.",
  "clar.closed.skipped": "This question was skipped elsewhere.",
  "clar.closed.cancelled": "This question was cancelled elsewhere.",
  "clar.closed.timed_out": "Time ran out: nobody answered before the deadline.",
  "clar.closed.agent_cancelled": "The agent withdrew this question.",
  "clar.closed.turn_cancelled": "You cancelled the turn, so this question was withdrawn.",
  "clar.closed.withdrawn": "This question was withdrawn: the session ended or the agent is gone.",
  "clar.closed.status.answered": "This question was answered elsewhere.",
  "clar.closed.status.declined": "This question was skipped elsewhere.",
  "clar.closed.status.cancelled": "This question was cancelled.",
  "clar.closed.status.expired": "Time ran out: nobody answered before the deadline.",
  "clar.closed.status.agent_disconnected": "This question was withdrawn: the agent disconnected.",
  "clar.closed.other": "This question is no longer open.",
  "answer.hidden": "hidden (a secret)",
  "answer.line": "{label}: {value}",
  "answer.empty": "Nothing was sent: an empty answer, which the agent reads as skipped.",
  "answer.nothingSent": "nothing sent",
  "answer.notSent": "(not sent: {value})",
  "card.delivered": "What the agent received:",
  "history.delivered": "What the agent received:",
  "history.outcome.turn_cancelled": "Withdrawn: you cancelled the turn",
  "history.outcome.answered_empty": "Answered with nothing (read as skipped)",
  "needs.heading": "Needs you",
  "needs.askedNow": "asked just now",
  "needs.askedMin": "asked {count} min ago",
  "needs.askedHours": "asked {count} h ago",
  "needs.askedDays": { one: "asked {count} day ago", other: "asked {count} days ago" },
  "needs.unknownTask": "A task",
  "notif.resolved": "Resolved",
  "notif.clearAll": "Clear all",
  "session.pageTitle": "{task} · {app}",
  "session.prompt.answerFirst": "Answer the question above first.",
  "session.confirmDiscard": "The answer you are typing will be lost. Continue?",
  "notif.clarification": "Input needed",
  "notif.clarificationBody": "The agent working on “{task}” is waiting for your answer.",
  "notif.turnFinished": "Turn finished",
  "notif.turnFinishedBody": "The agent finished its turn on “{task}”.",
};

const CATALOGUES = { en, pt };
/** The pseudo-locale browsers use for this purpose: every catalogue string shown as ⟦…⟧. */
export const PSEUDO_LOCALE = "en-XA";

/** The locales with a complete catalogue. */
export const LOCALES = Object.keys(CATALOGUES);

/** `en` with every string wrapped in ⟦ ⟧, so text that bypasses the catalogue stands out. */
function pseudoCatalogue() {
  const wrap = (text) => `⟦${text}⟧`;
  return Object.fromEntries(Object.entries(en).map(([k, v]) => [k, typeof v === "string" ? wrap(v) : Object.fromEntries(Object.entries(v).map(([c, text]) => [c, wrap(text)]))]));
}

/** The UI locale for the browser's preferred languages: the first one we have, else English. */
export function pickLocale(languages = []) {
  for (const tag of languages) {
    if (typeof tag !== "string" || tag === "") continue;
    if (tag.toLowerCase() === PSEUDO_LOCALE.toLowerCase()) return PSEUDO_LOCALE;
    const primary = tag.toLowerCase().split("-")[0];
    if (primary in CATALOGUES) return primary;
  }
  return "en";
}

let current = "en";
let catalogue = en;
let plurals = new Intl.PluralRules("en");
let numbers = new Intl.NumberFormat("en");

/** Use `tag` (one of LOCALES or the pseudo-locale) for every string from now on. */
export function setLocale(tag) {
  current = tag === PSEUDO_LOCALE || tag in CATALOGUES ? tag : "en";
  catalogue = current === PSEUDO_LOCALE ? pseudoCatalogue() : { ...en, ...CATALOGUES[current] };
  plurals = new Intl.PluralRules(current);
  numbers = new Intl.NumberFormat(current);
}

/** The UI locale (a BCP 47 tag, for `lang` and Intl). */
export function locale() {
  return current;
}

/** The catalogue of `tag`, as written (for tests). */
export function catalogueOf(tag) {
  return CATALOGUES[tag];
}

/** Replace the catalogue (for a translation); missing keys fall back to English. */
export function useCatalogue(messages) {
  catalogue = { ...en, ...messages };
}

/** A number as the UI locale writes it. */
export function formatNumber(n) {
  return numbers.format(n);
}

/**
 * The message for `key`, with `{name}` placeholders filled from `vars` (numbers written
 * as the locale writes them). A message with plural forms picks its form for
 * `vars.count` through Intl.PluralRules, falling back to `other`.
 */
export function t(key, vars = {}) {
  let text = catalogue[key] ?? en[key];
  if (text === undefined) {
    // A missing key is a bug; show the key so it is visible, never crash the view.
    console.warn(`i18n: missing key ${key}`);
    return key;
  }
  if (typeof text === "object") text = text[plurals.select(Number(vars.count ?? 0))] ?? text.other;
  return text.replace(/\{(\w+)\}/g, (m, name) => {
    if (!(name in vars)) return m;
    const value = vars[name];
    return typeof value === "number" ? numbers.format(value) : String(value);
  });
}

/** Whether the catalogue has `key` (for values that may or may not have a label). */
export function has(key) {
  return key in catalogue || key in en;
}

setLocale(pickLocale(globalThis.navigator?.languages ?? []));
