// The quasar dashboard: one snapshot of the broker every REFRESH_MS from
// GET /admin/v2/quasar/dashboard, rendered into four views. Every string from the
// broker (topic, subscription, owner names are chosen by clients) is rendered with
// textContent, never parsed as markup.
import { LineChart, formatNumber } from "/dashboard/chart.js";

const DATA_PATH = "/admin/v2/quasar/dashboard";
const ABORT_PATH = "/admin/v3/transactions/abortTransaction";
const HEALTH_PATH = "/admin/v2/brokers/health";
// The health check writes and reads a message through storage: often enough to
// notice a broker that stopped writing, rarely enough to cost nothing.
const HEALTH_EVERY_MS = 30000;
const REFRESH_MS = 2000;
const TOKEN_KEY = "quasar.dashboard.token";
// How far back a subscription's backlog is compared to call it growing.
const TREND_WINDOW_MS = 30000;

const $ = (id) => document.getElementById(id);

// An element with attributes and children; string children become text nodes.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const num = (value) => el("td", { class: "num" }, formatNumber(value));

function formatBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

function formatDuration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

class AuthRequired extends Error {}

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  data: null,
  selectedTopic: null,
  backlogs: new Map(), // "topic\u0000subscription" -> [{t, backlog}]
  timer: null,
  health: "checking…",
  healthAt: 0,
  healthPending: false,
};

const charts = {
  rates: new LineChart($("chart-rates"), [
    { name: "in", color: "#2e6bd6" },
    { name: "out", color: "#1f9d55" },
  ]),
  backlog: new LineChart($("chart-backlog"), [{ name: "backlog", color: "#c2410c" }]),
};

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(path, { ...options, headers, cache: "no-store" });
  if (response.status === 401) {
    throw new AuthRequired(await reasonOf(response));
  }
  if (!response.ok) {
    throw new Error(`${response.status}: ${await reasonOf(response)}`);
  }
  if (response.status === 204) return null;
  const type = response.headers.get("Content-Type") || "";
  return type.includes("json") ? response.json() : response.text();
}

async function reasonOf(response) {
  try {
    const body = await response.json();
    return body.reason || response.statusText;
  } catch {
    return response.statusText;
  }
}

function showError(message) {
  const banner = $("error");
  banner.textContent = message;
  banner.hidden = !message;
}

// A refused token is forgotten, so that a reload asks again instead of repeating it.
function showSignIn(reason) {
  clearTimeout(state.timer);
  state.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("main").hidden = true;
  $("signin").hidden = false;
  $("sign-out").hidden = true;
  $("signin-reason").textContent = reason || "";
  $("status").textContent = "signed out";
  $("token").focus();
}

async function refresh() {
  clearTimeout(state.timer);
  try {
    const data = await api(DATA_PATH);
    showError("");
    $("signin").hidden = true;
    $("main").hidden = false;
    $("sign-out").hidden = !state.token;
    state.data = data;
    record(data);
    render();
    checkHealth();
  } catch (error) {
    if (error instanceof AuthRequired) {
      showSignIn(error.message);
      return;
    }
    showError(`Cannot read the broker: ${error.message}`);
  }
  state.timer = setTimeout(refresh, REFRESH_MS);
}

// Runs beside the refresh loop (a check may take seconds) and never overlaps itself.
async function checkHealth() {
  if (state.healthPending || Date.now() - state.healthAt < HEALTH_EVERY_MS) return;
  state.healthPending = true;
  try {
    state.health = (await api(HEALTH_PATH)) === "ok" ? "ok" : "unexpected answer";
  } catch (error) {
    state.health = error instanceof AuthRequired ? "not allowed" : `failing (${error.message})`;
  } finally {
    state.healthAt = Date.now();
    state.healthPending = false;
  }
  render();
}

// Charts and backlog trends advance with every snapshot.
function record(data) {
  const totals = data.totals;
  charts.rates.push([totals.msgRateIn, totals.msgRateOut]);
  charts.backlog.push([totals.msgBacklog]);
  const now = data.broker.timestamp;
  const seen = new Set();
  for (const topic of data.topics) {
    for (const sub of topic.subscriptions) {
      const key = `${topic.topic}\u0000${sub.name}`;
      seen.add(key);
      const samples = state.backlogs.get(key) || [];
      samples.push({ t: now, backlog: sub.msgBacklog });
      while (samples.length > 1 && now - samples[0].t > TREND_WINDOW_MS) samples.shift();
      state.backlogs.set(key, samples);
    }
  }
  for (const key of state.backlogs.keys()) if (!seen.has(key)) state.backlogs.delete(key);
}

function trend(topic, sub) {
  const samples = state.backlogs.get(`${topic}\u0000${sub.name}`) || [];
  if (samples.length < 2) return 0;
  return samples[samples.length - 1].backlog - samples[0].backlog;
}

// "stuck": backlog growing with no consumer; "idle": a backlog nobody reads, or
// every consumer blocked on its unacked-messages limit.
function health(topic, sub) {
  if (sub.consumerCount === 0 && trend(topic, sub) > 0) return "stuck";
  if ((sub.consumerCount === 0 && sub.msgBacklog > 0) || sub.blockedOnUnackedMessages) return "idle";
  return "";
}

function currentView() {
  const view = location.hash.replace(/^#/, "") || "overview";
  return ["overview", "topics", "subscriptions", "transactions"].includes(view) ? view : "overview";
}

function render() {
  const view = currentView();
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === view);
  }
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== `view-${view}`;
  }
  const data = state.data;
  if (!data) return;
  const b = data.broker;
  $("status").textContent =
    `${b.cluster} · ${b.state} · updated ${new Date(b.timestamp).toLocaleTimeString()}`;
  renderOverview(data);
  renderTopics(data);
  renderSubscriptions(data);
  renderTransactions(data);
}

function fact(label, value, id) {
  return el("div", { class: "fact", id: `fact-${id}` },
    el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

function renderOverview(data) {
  const b = data.broker;
  const t = data.totals;
  $("broker-facts").replaceChildren(
    fact("Version", b.version, "version"),
    fact("State", b.state, "state"),
    fact("Health check", state.health, "health"),
    fact("Topics", formatNumber(t.topics), "topics"),
    fact("Producers", formatNumber(t.producers), "producers"),
    fact("Consumers", formatNumber(t.consumers), "consumers"),
    fact("Connections", formatNumber(t.connections), "connections"),
    fact("Msg/s in", formatNumber(t.msgRateIn), "rate-in"),
    fact("Msg/s out", formatNumber(t.msgRateOut), "rate-out"),
    fact("Backlog", formatNumber(t.msgBacklog), "backlog"),
    fact("Storage", formatBytes(t.storageSize), "storage"),
  );
  $("rate-window").textContent =
    `Rates are averages over the broker's stats interval of ${b.statsUpdateFrequencyInSecs} s ` +
    `(statsUpdateFrequencyInSecs); the page refreshes every ${REFRESH_MS / 1000} s.`;
}

function visibleTopics(data) {
  const showSystem = $("show-system").checked;
  return data.topics.filter((t) => showSystem || !t.system);
}

function emptyRow(columns, text) {
  return el("tr", {}, el("td", { class: "empty", colspan: columns }, text));
}

function renderTopics(data) {
  const rows = visibleTopics(data).map((t) =>
    el("tr", { class: "clickable", "data-topic": t.topic, onclick: () => selectTopic(t.topic) },
      el("td", {}, t.topic), num(t.msgRateIn), num(t.msgRateOut),
      el("td", { class: "num" }, `${formatBytes(t.msgThroughputIn)}/s`),
      el("td", { class: "num" }, `${formatBytes(t.msgThroughputOut)}/s`),
      num(t.msgBacklog), el("td", { class: "num" }, formatBytes(t.storageSize)),
      num(t.producerCount), num(t.subscriptions.length)));
  if (data.topicsTruncated) rows.push(emptyRow(9, "Only the topics with the largest backlogs are shown."));
  $("topics-table").tBodies[0].replaceChildren(...(rows.length ? rows : [emptyRow(9, "No topics loaded")]));
  const selected = data.topics.find((t) => t.topic === state.selectedTopic);
  $("topic-detail").hidden = !selected;
  if (selected) {
    $("topic-detail-name").textContent = selected.topic;
    const subs = selected.subscriptions.map((s) => subscriptionRow(selected.topic, s, false));
    $("topic-subscriptions-table").tBodies[0].replaceChildren(
      ...(subs.length ? subs : [emptyRow(7, "No subscriptions")]));
  }
}

function selectTopic(topic) {
  state.selectedTopic = topic;
  render();
}

function subscriptionRow(topic, sub, withTopic) {
  const delta = trend(topic, sub);
  const arrow = delta > 0 ? `▲ +${formatNumber(delta)}` : delta < 0 ? `▼ ${formatNumber(delta)}` : "–";
  return el("tr", { class: health(topic, sub), "data-subscription": sub.name },
    withTopic ? el("td", {}, topic) : null,
    el("td", {}, sub.name), el("td", {}, sub.type), num(sub.msgBacklog),
    num(sub.unackedMessages), num(sub.consumerCount), num(sub.msgRateOut),
    el("td", { class: "num" }, arrow));
}

function renderSubscriptions(data) {
  const rank = { stuck: 0, idle: 1, "": 2 };
  const rows = [];
  for (const t of visibleTopics(data)) {
    for (const s of t.subscriptions) rows.push([t.topic, s]);
  }
  rows.sort(([ta, a], [tb, b]) =>
    rank[health(ta, a)] - rank[health(tb, b)] || b.msgBacklog - a.msgBacklog);
  const body = rows.map(([topic, sub]) => subscriptionRow(topic, sub, true));
  $("subscriptions-table").tBodies[0].replaceChildren(
    ...(body.length ? body : [emptyRow(8, "No subscriptions")]));
}

function renderTransactions(data) {
  const txns = data.transactions;
  if (!txns.enabled) {
    $("coordinators").replaceChildren(
      el("p", { class: "hint" }, "Transactions are disabled on this broker (transactionCoordinatorEnabled=false)."));
  } else {
    $("coordinators").replaceChildren(...txns.coordinators.map((tc) =>
      fact(`Coordinator ${tc.id}: open`, tc.loaded ? formatNumber(tc.activeCount) : "not loaded",
        `tc-${tc.id}`)));
  }
  const now = data.broker.timestamp;
  const rows = txns.open.map((txn) =>
    el("tr", { "data-txn": txn.txnId },
      el("td", {}, txn.txnId), num(txn.coordinatorId), el("td", {}, txn.status),
      el("td", { class: "num" }, formatDuration(txn.ageMs)),
      el("td", { class: "num" }, formatDuration(txn.timeoutAt - now)),
      el("td", {}, txn.owner ?? "–"), el("td", {}, txn.clientName ?? "–"),
      el("td", {}, list(txn.producedPartitions)),
      el("td", {}, list(txn.ackedPartitions.map((a) => `${a.topic} / ${a.subscription}`))),
      el("td", {}, el("button", { class: "abort", type: "button", onclick: () => abort(txn) }, "Abort"))));
  if (txns.openTruncated) rows.push(emptyRow(10, "Only the oldest open transactions are shown."));
  $("transactions-table").tBodies[0].replaceChildren(
    ...(rows.length ? rows : [emptyRow(10, "No open transactions")]));
  const held = data.heldBack.map((h) =>
    el("tr", { "data-topic": h.topic },
      el("td", {}, h.topic), num(h.heldBackEntries), num(h.ongoingTxnCount),
      el("td", { class: "num" }, formatDuration(h.oldestOpenAgeMs)), el("td", {}, h.maxReadPosition)));
  $("held-back-table").tBodies[0].replaceChildren(
    ...(held.length ? held : [emptyRow(5, "No topic is held back")]));
}

function list(items) {
  if (!items.length) return "–";
  return el("ul", {}, ...items.map((item) => el("li", {}, item)));
}

async function abort(txn) {
  const question =
    `Abort transaction ${txn.txnId}?\n\nIts messages are discarded and its acknowledgments ` +
    `released; the client that opened it gets an error when it tries to commit.`;
  if (!window.confirm(question)) return;
  try {
    await api(`${ABORT_PATH}/${txn.mostSigBits}/${txn.leastSigBits}`, { method: "POST" });
    showError("");
  } catch (error) {
    if (error instanceof AuthRequired) {
      showSignIn(error.message);
      return;
    }
    showError(`Abort of ${txn.txnId} failed: ${error.message}`);
  }
  refresh();
}

$("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token").value = "";
  refresh();
});

$("sign-out").addEventListener("click", () => showSignIn(""));

$("show-system").addEventListener("change", render);
window.addEventListener("hashchange", render);
refresh();
