// The console: Chat, Activity, Agents & health. Everything shown comes
// through textContent or renderMarkdown (which builds DOM nodes): nothing
// from the gateway is ever parsed as HTML. Live updates come from one
// EventSource (/ui/events); the page polls nothing.
import { renderMarkdown } from "./md.js";

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
};

const state = { agent: "", session: "", running: null, records: [], status: null, serverSkew: 0 };

async function api(path, opts = {}) {
  const res = await fetch(path, {
    credentials: "same-origin",
    ...opts,
    headers: opts.body ? { "Content-Type": "application/json" } : {},
  });
  if (res.status === 401) {
    location.replace("/ui/login");
    throw new Error("not logged in");
  }
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error(body.error || `${res.status} ${res.statusText}`);
  }
  return res;
}
const getJSON = async (path) => (await api(path)).json();
const postJSON = (path, body, method = "POST") => api(path, { method, body: JSON.stringify(body) });

// ---- views ----
for (const b of document.querySelectorAll("nav button")) {
  b.addEventListener("click", () => show(b.dataset.view));
}
function show(view) {
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.view === view);
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  location.hash = view;
}
$("logout").addEventListener("click", async () => {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  location.replace("/ui/login");
});

// ---- chat ----
function sessionKeyFor(agent) { return `ui:${agent}:default`; }

async function loadAgents() {
  const { agents } = await getJSON("/api/agents");
  const sel = $("agent");
  sel.replaceChildren();
  for (const a of agents) sel.append(new Option(a.name, a.name));
  const fa = $("f-agent");
  for (const a of agents) fa.append(new Option(a.name, a.name));
  if (agents.length) await selectAgent(agents[0].name);
}
$("agent").addEventListener("change", () => selectAgent($("agent").value));

async function selectAgent(name) {
  delete document.body.dataset.ready;
  state.agent = name;
  setSession(sessionKeyFor(name));
  const models = $("model");
  models.replaceChildren();
  try {
    const { models: ms } = await getJSON(`/api/agents/${encodeURIComponent(name)}/models`);
    for (const m of ms) models.append(new Option(`${m.provider}/${m.id}`, JSON.stringify([m.provider, m.id])));
  } catch (e) { note(`models: ${e.message}`); }
  await loadHistory();
  await loadSessions();
  document.body.dataset.ready = "1"; // the session shown: the page takes messages
}

// loadHistory shows the session so far, replayed as the events of its
// prompts.
async function loadHistory() {
  const key = state.session;
  let events;
  try {
    let thinkingLevel;
    ({ events, thinkingLevel } = await (await postJSON(`/ui/api/agents/${encodeURIComponent(state.agent)}/history`, { sessionKey: key })).json());
    $("thinking").value = thinkingLevel || "";
  } catch (e) { note(`history: ${e.message}`, true); return; }
  if (key !== state.session || state.running) return; // another session was chosen, or a prompt began, meanwhile
  const t = $("transcript");
  t.replaceChildren();
  let turn = null;
  for (const ev of events) {
    if (ev.type === "user") {
      if (turn) turn.finish(true);
      t.append(el("div", "msg user", ev.text));
      const box = el("div", "msg assistant");
      t.append(box);
      turn = new Turn(box);
      continue;
    }
    if (!turn) { const box = el("div", "msg assistant"); t.append(box); turn = new Turn(box); }
    turn.event(ev);
  }
  if (turn) turn.finish(true);
}
$("model").addEventListener("change", async () => {
  const [provider, modelId] = JSON.parse($("model").value);
  try {
    await postJSON(`/api/agents/${encodeURIComponent(state.agent)}/sessions/${encodeURIComponent(state.session)}/model`, { provider, modelId }, "PATCH");
    note(`model: ${provider}/${modelId}`);
  } catch (e) { note(`model switch failed: ${e.message}`, true); }
});

$("thinking").addEventListener("change", async () => {
  const level = $("thinking").value;
  try {
    await postJSON(`/ui/api/agents/${encodeURIComponent(state.agent)}/thinking`, { sessionKey: state.session, level });
    note(`thinking: ${level || "the model's own"}`);
  } catch (e) { note(`thinking switch failed: ${e.message}`, true); }
});

async function loadSessions() {
  const list = $("session-list");
  list.replaceChildren();
  try {
    const { sessions } = await getJSON(`/api/agents/${encodeURIComponent(state.agent)}/sessions`);
    for (const s of sessions) {
      const li = el("li");
      const b = el("button", "link", s.id);
      b.title = `updated ${s.updatedAt}`;
      b.addEventListener("click", async () => { setSession(s.id); await loadHistory(); note(`resumed ${s.id}`); });
      li.append(b);
      list.append(li);
    }
  } catch (e) { note(`sessions: ${e.message}`, true); }
}

function setSession(key) {
  state.session = key;
  $("session-key").textContent = `session ${key}`;
  $("transcript").replaceChildren();
}

function note(text, isError = false) {
  const n = el("div", isError ? "note error" : "note", text);
  $("transcript").append(n);
  n.scrollIntoView({ block: "end" });
}

$("message").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("composer").requestSubmit(); }
});
$("composer").addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
$("new-session").addEventListener("click", () => newSession());
$("abort").addEventListener("click", () => abort());

async function newSession() {
  try {
    await postJSON(`/ui/api/agents/${encodeURIComponent(state.agent)}/new`, { sessionKey: state.session });
    $("transcript").replaceChildren();
    note("new session");
    loadSessions();
  } catch (e) { note(`/new failed: ${e.message}`, true); }
}

async function abort() {
  try {
    await postJSON(`/ui/api/agents/${encodeURIComponent(state.agent)}/abort`, { sessionKey: state.session });
  } catch (e) { note(`abort failed: ${e.message}`, true); }
}

async function send() {
  const text = $("message").value.trim();
  if (!text || state.running || !document.body.dataset.ready) return;
  $("message").value = "";
  if (text === "/new") return newSession();
  const t = $("transcript");
  t.append(el("div", "msg user", text));
  const reply = el("div", "msg assistant");
  t.append(reply);
  const turn = new Turn(reply);
  state.running = turn;
  $("send").disabled = true;
  $("abort").disabled = false;
  try {
    const res = await postJSON(`/ui/api/agents/${encodeURIComponent(state.agent)}/prompt`, { message: text, sessionKey: state.session });
    await readNDJSON(res, (ev) => turn.event(ev));
  } catch (e) {
    turn.event({ type: "error", error: e.message });
  } finally {
    turn.finish();
    state.running = null;
    $("send").disabled = false;
    $("abort").disabled = true;
    loadSessions();
  }
}

async function readNDJSON(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onEvent(JSON.parse(line));
    }
  }
  if (buf.trim()) onEvent(JSON.parse(buf));
}

// Turn renders one answer: text blocks re-rendered as Markdown as they
// stream, tool calls as collapsible blocks.
class Turn {
  constructor(box) { this.box = box; this.text = ""; this.block = null; this.tools = new Map(); this.dirty = new Set(); this.frame = 0; }
  // render draws the text blocks that changed, at most once a frame: a
  // long answer streams in many deltas.
  render() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    for (const b of this.dirty) b.replaceChildren(renderMarkdown(b.mdText));
    this.dirty.clear();
  }
  textBlock() {
    if (!this.block) { this.block = el("div", "text"); this.box.append(this.block); this.text = ""; }
    return this.block;
  }
  event(ev) {
    switch (ev.type) {
      case "text_delta":
        this.textBlock();
        this.text += ev.delta;
        this.block.mdText = this.text;
        this.dirty.add(this.block);
        if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
        break;
      case "thinking_delta": {
        if (!this.thinking) { this.thinking = el("details", "thinking"); this.thinking.append(el("summary", "", "thinking")); this.thinkText = el("pre"); this.thinking.append(this.thinkText); this.box.insertBefore(this.thinking, this.block); }
        this.thinkText.textContent += ev.delta;
        break;
      }
      case "tool_start": {
        this.block = null; // text after the call is a new block
        const d = el("details", "tool running");
        d.dataset.tool = ev.tool;
        const s = el("summary");
        s.append(el("span", "tool-name", ev.tool), el("span", "tool-cmd", toolLabel(ev)), el("span", "tool-status", "running…"));
        d.append(s, el("pre", "tool-output"));
        this.box.append(d);
        this.tools.set(ev.id, d);
        break;
      }
      case "tool_end": {
        const d = this.tools.get(ev.id);
        if (!d) break;
        d.classList.remove("running");
        d.classList.toggle("failed", !!ev.isError);
        const parts = [];
        if (ev.exitCode !== undefined && ev.exitCode !== null) parts.push(`exit ${ev.exitCode}`);
        else parts.push(ev.isError ? "error" : "ok");
        if (ev.durationMs !== undefined) parts.push(`${ev.durationMs} ms`);
        d.querySelector(".tool-status").textContent = parts.join(" · ");
        d.querySelector(".tool-output").textContent = ev.output || "";
        break;
      }
      case "done":
        this.render();
        if (ev.text && !this.text) { this.textBlock(); this.text = ev.text; this.block.replaceChildren(renderMarkdown(ev.text)); }
        this.box.classList.add("done");
        break;
      case "error":
        this.box.append(el("div", "note error", ev.error || "failed"));
        break;
    }
    this.box.scrollIntoView({ block: "end" });
  }
  finish(done = false) {
    this.render();
    for (const d of this.tools.values()) {
      if (d.classList.contains("running")) d.querySelector(".tool-status").textContent = "no result";
      d.classList.remove("running");
    }
    if (done) this.box.classList.add("done");
  }
}

function toolLabel(ev) {
  const a = ev.args || {};
  if (typeof a.command === "string") return a.command;
  if (typeof a.path === "string") return a.path;
  if (Array.isArray(a.args)) return a.args.join(" ");
  const s = JSON.stringify(a);
  return s.length > 120 ? s.slice(0, 120) + "…" : s;
}

// ---- activity ----
const MAX_RECORDS = 1000;
const seen = { tool: new Set(), type: new Set(), agent: new Set() };
for (const id of ["f-agent", "f-tool", "f-decision", "f-type"]) $(id).addEventListener("change", applyFilter);

function addRecord(rec) {
  const li = el("li", "rec");
  li.dataset.agent = rec.agent || "";
  li.dataset.tool = rec.tool || "";
  li.dataset.decision = rec.decision || "";
  li.dataset.type = rec.type || "";
  if (rec.decision === "denied") li.classList.add("denied");
  const d = el("details");
  const s = el("summary");
  s.append(
    el("time", "", (rec.ts || "").replace("T", " ").replace("Z", "")),
    el("span", "agent", rec.agent || "-"),
    el("span", "tool", rec.tool || "-"),
    el("span", "phase", rec.phase || ""),
    el("span", "decision " + (rec.decision || ""), rec.decision || ""),
    el("span", "summary", recordSummary(rec)),
  );
  d.append(s, el("pre", "", JSON.stringify(rec, null, 2)));
  li.append(d);
  const list = $("activity");
  list.prepend(li);
  while (list.children.length > MAX_RECORDS) list.lastChild.remove();
  for (const [k, sel] of [["tool", "f-tool"], ["type", "f-type"], ["agent", "f-agent"]]) {
    const v = rec[k];
    if (v && !seen[k].has(v)) {
      seen[k].add(v);
      if (![...$(sel).options].some((o) => o.value === v)) $(sel).append(new Option(v, v));
    }
  }
  filterOne(li);
}

function recordSummary(rec) {
  const parts = [];
  if (rec.exitCode !== undefined) parts.push(`exit ${rec.exitCode}`);
  if (rec.durationMs !== undefined) parts.push(`${rec.durationMs} ms`);
  if (rec.host) parts.push(`${rec.method || ""} ${rec.host}:${rec.port || ""}`.trim());
  if (rec.error) parts.push(rec.error);
  return parts.join(" · ");
}

function filterOne(li) {
  const f = { agent: $("f-agent").value, tool: $("f-tool").value, decision: $("f-decision").value, type: $("f-type").value };
  li.hidden = Object.entries(f).some(([k, v]) => v && li.dataset[k] !== v);
}
function applyFilter() { for (const li of $("activity").children) filterOne(li); }

// ---- health ----
function renderStatus(msg) {
  state.status = msg.status;
  state.serverSkew = Date.parse(msg.now) - Date.now();
  const st = msg.status;
  const h = st.health || {};
  const sum = $("health-summary");
  sum.replaceChildren();
  sum.append(el("span", "badge " + (h.status === "ok" ? "ok" : "bad"), `gateway ${h.status || "?"}`));
  if (h.stats) {
    sum.append(el("span", "badge", `${h.stats.toolCalls} tool calls`), el("span", "badge", `${h.stats.toolErrors} failed/denied`));
    sum.append(el("span", "badge", `audit chain head: ${h.stats.auditHead ?? "unknown"}`));
  }
  if (h.disk) sum.append(el("span", "badge bad", h.disk));
  if (h.config) sum.append(el("span", "badge bad", h.config));

  const tb = $("providers").querySelector("tbody");
  tb.replaceChildren();
  for (const p of st.providers || []) {
    const tr = el("tr");
    tr.dataset.key = p.key;
    const cd = el("td", "cooldown");
    if (p.cooldownUntil) { cd.dataset.until = p.cooldownUntil; tr.classList.add("cooling"); }
    tr.append(el("td", "", p.key), cd, el("td", "", p.consecutiveFailures), el("td", "", p.inUse), el("td", "", p.queueDepth), el("td", "err", p.lastError || ""));
    tb.append(tr);
  }
  tickCooldowns();

  const ag = $("agents");
  ag.replaceChildren();
  for (const a of st.agents || []) {
    const card = el("div", "card");
    card.append(el("h3", "", a.name));
    const dl = el("dl");
    const row = (k, v) => { if (v !== undefined && v !== "" && v !== null) dl.append(el("dt", "", k), el("dd", "", v)); };
    row("state", a.state);
    row("model", (a.models && a.models.length ? a.models : [a.model]).join(" → "));
    row("image", a.image);
    row("network", a.network);
    if (a.limits) row("limits", Object.entries(a.limits).map(([k, v]) => `${k} ${v}`).join(", "));
    row("tools", (a.tools || []).join(", ") || "none");
    row("skills", (a.skills || []).join(", ") || "none");
    card.append(dl);
    if (a.state !== "ready") card.classList.add("bad");
    ag.append(card);
  }
}

// tickCooldowns counts the cooldowns down; it redraws only what is on the
// page (no request to the gateway).
function tickCooldowns() {
  const now = Date.now() + state.serverSkew;
  for (const td of document.querySelectorAll("td.cooldown")) {
    if (!td.dataset.until) { td.textContent = "—"; continue; }
    const left = Math.max(0, Date.parse(td.dataset.until) - now);
    td.textContent = left > 0 ? `${Math.ceil(left / 1000)} s left` : "ending";
  }
}
setInterval(tickCooldowns, 1000);

// ---- approvals ----
// A banner per tool call that waits for a human: what would run (as text,
// never HTML) and three answers. The first answer on any channel wins; the
// banner goes when the "approvals" event no longer lists the call.
function renderApprovals({ approvals }) {
  const box = $("approvals");
  box.replaceChildren();
  for (const a of approvals || []) {
    const row = el("div", "approval");
    row.dataset.id = a.id;
    const what = [a.tool, ...(a.args || [])].join(" ");
    const egress = a.tool === "egress"; // a sandbox's connection: no session, "always" is per host:port
    row.append(el("span", "approval-text", egress ? `${a.agent}'s sandbox wants to connect: ` : `${a.agent} wants to run: `), el("code", "approval-call", what),
      el("span", "muted", ` (rule ${a.rule}${a.session ? ", session " + a.session : ""})`));
    const answer = (decision) => async () => {
      for (const b of row.querySelectorAll("button")) b.disabled = true;
      try {
        await postJSON(`/api/approvals/${encodeURIComponent(a.id)}`, { decision, via: "webui", by: "console" });
      } catch (e) {
        note(`approval: ${e.message}`, true);
      }
    };
    for (const [label, decision] of [["Approve", "approve"], ["Deny", "deny"], [egress ? "Always for this host:port" : "Always for this session", "always"]]) {
      const b = el("button", "approval-" + decision, label);
      b.addEventListener("click", answer(decision));
      row.append(b);
    }
    box.append(row);
  }
  box.hidden = !box.childElementCount;
}

// ---- live updates ----
function connect() {
  const es = new EventSource("/ui/events");
  es.addEventListener("hello", () => $("conn").classList.add("live"));
  es.addEventListener("audit", (ev) => addRecord(JSON.parse(ev.data)));
  es.addEventListener("status", (ev) => renderStatus(JSON.parse(ev.data)));
  es.addEventListener("approvals", (ev) => renderApprovals(JSON.parse(ev.data)));
  es.addEventListener("error", () => $("conn").classList.remove("live"));
}

show(["chat", "activity", "health"].includes(location.hash.slice(1)) ? location.hash.slice(1) : "chat");
connect();
loadAgents().catch((e) => note(`agents: ${e.message}`, true));
