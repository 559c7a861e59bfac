// The beige Node.js plugin host. It is embedded in the beige binary and run
// as `node --permission ... --input-type=module --eval <this file>`, one
// process per TypeScript/JavaScript plugin. It loads the plugin's
// index.ts/index.js, calls createPlugin(config, ctx) and register(), and
// then answers the gateway's requests (tool calls, hooks, start, stop).
//
// The protocol is newline-delimited JSON, one frame a line, on three pipes:
//   fd 3: gateway -> host, requests and the answers to asynchronous ctx calls
//   fd 4: host -> gateway, answers, ctx calls and log lines
//   fd 5: gateway -> host, the answers to synchronous ctx calls
// stdout and stderr are free for the plugin's own console output (the
// gateway logs them). A synchronous ctx method (listSessions, say) writes
// its request to fd 4 and blocks in fs.readSync on fd 5 until the answer
// comes: the JavaScript thread waits, as the original's synchronous methods
// make their callers expect, and no other frame can be read meanwhile.
import fs from "node:fs";
import net from "node:net";
import { pathToFileURL } from "node:url";
import http from "node:http";
import https from "node:https";
import { syncBuiltinESMExports } from "node:module";

// Network set-up, before the plugin is imported. In the jail the only way
// out is the egress forwarder that HTTP_PROXY/HTTPS_PROXY name. Node
// 22.21+ (NODE_USE_ENV_PROXY=1) routes fetch and every agent made with the
// proxyEnv option (its global agents are) through it itself; an older Node
// does neither, so the host's agents open every connection as a CONNECT
// tunnel through the proxy (plain HTTP too, as Node's fetch does). Either
// way http.Agent and https.Agent become subclasses that do so, so the
// agents a library makes (grammy's new https.Agent({keepAlive: true}))
// go through the proxy too, and so does agent: false (a new agent of the
// global agent's class); instanceof the original still holds. An agent
// that makes its own connections (overrides createConnection, a request's
// own createConnection) connects directly and so fails in the jail: the
// plugin's business.
(function proxyAgents() {
  const proxy = process.env.HTTPS_PROXY;
  if (!proxy) return;
  const OrigHTTP = http.Agent, OrigHTTPS = https.Agent;
  let HTTPAgent, HTTPSAgent;
  if (http.globalAgent.options?.proxyEnv) {
    const withProxyEnv = (o) => (o && o.proxyEnv !== undefined ? o : { ...o, proxyEnv: process.env });
    HTTPAgent = class Agent extends OrigHTTP {
      constructor(o) { super(withProxyEnv(o)); }
      static [Symbol.hasInstance](x) { return x instanceof OrigHTTP; }
    };
    HTTPSAgent = class Agent extends OrigHTTPS {
      constructor(o) { super(withProxyEnv(o)); }
      static [Symbol.hasInstance](x) { return x instanceof OrigHTTPS; }
    };
    // agent: false makes a new agent of the global one's class.
    http.globalAgent = new HTTPAgent({ ...http.globalAgent.options });
    https.globalAgent = new HTTPSAgent({ ...https.globalAgent.options });
  } else {
    const { hostname, port } = new URL(proxy);
    const tunnel = (options, cb) => {
      const host = options.host || options.hostname || "localhost";
      const target = `${host.includes(":") ? `[${host}]` : host}:${options.port}`;
      const s = net.connect({ host: hostname, port: Number(port) });
      // A request to the proxy itself (a library that proxies by itself,
      // as axios does from HTTP_PROXY) needs no tunnel.
      if (host === hostname && String(options.port) === port) return cb(null, s);
      let head = Buffer.alloc(0), done = false;
      const finish = (err) => {
        if (done) return;
        done = true;
        s.removeListener("data", onData);
        if (err) { s.destroy(); cb(err); } else cb(null, s);
      };
      const onData = (d) => {
        head = Buffer.concat([head, d]);
        const end = head.indexOf("\r\n\r\n");
        if (end < 0) { if (head.length > 65536) finish(new Error(`egress proxy: CONNECT ${target}: header too long`)); return; }
        const status = head.subarray(0, head.indexOf("\r\n")).toString();
        if (/^HTTP\/1\.[01] 200 /.test(status)) {
          if (head.length > end + 4) s.unshift(head.subarray(end + 4));
          return finish();
        }
        // A refusal: its body says why (egress: ... matches no rule).
        const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head.subarray(0, end).toString())?.[1] ?? 0);
        const body = head.subarray(end + 4);
        if (body.length < Math.min(len, 4096)) return;
        const err = new Error(`egress proxy refused ${target}: ${status.slice(9)}: ${body.subarray(0, 4096).toString().trim()}`);
        err.code = "ERR_PROXY_TUNNEL";
        finish(err);
      };
      s.on("data", onData);
      s.once("error", (e) => finish(e));
      s.once("end", () => finish(new Error(`egress proxy closed the connection to ${target}`)));
      s.once("connect", () => s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
    };
    HTTPAgent = class Agent extends OrigHTTP {
      createConnection(options, cb) { tunnel(options, cb); }
      static [Symbol.hasInstance](x) { return x instanceof OrigHTTP; }
    };
    HTTPSAgent = class Agent extends OrigHTTPS {
      createConnection(options, cb) {
        tunnel(options, (err, s) => {
          if (err) return cb(err);
          try { cb(null, super.createConnection({ ...options, socket: s })); } catch (e) { s.destroy(); cb(e); }
        });
      }
      static [Symbol.hasInstance](x) { return x instanceof OrigHTTPS; }
    };
    http.globalAgent = new HTTPAgent({ keepAlive: true });
    https.globalAgent = new HTTPSAgent({ keepAlive: true });
  }
  http.Agent = HTTPAgent;
  https.Agent = HTTPSAgent;
  syncBuiltinESMExports(); // import { Agent } from "node:https" too
})();

const IN = 3, OUT = 4, SYNC = 5;
// The arguments of a ctx call that fit in a frame (the gateway's MaxFrame,
// 8 MiB, less room for the frame's own fields).
const MAX_ARGS = (8 << 20) - 4096;
let nextId = 1;
const pending = new Map();

function writeFrame(obj) {
  const b = Buffer.from(JSON.stringify(obj) + "\n");
  let off = 0;
  while (off < b.length) off += fs.writeSync(OUT, b, off, b.length - off);
}

function errText(e) {
  if (e instanceof Error) return e.message || String(e);
  return String(e);
}

function log(level, msg) {
  try { writeFrame({ t: "log", level, msg: String(msg) }); } catch { /* gateway gone */ }
}

let syncBuf = Buffer.alloc(0);
const chunk = Buffer.alloc(64 * 1024);
function syncCall(op, args) {
  const id = nextId++;
  writeFrame({ t: "req", id, op, sync: true, args });
  for (;;) {
    const nl = syncBuf.indexOf(10);
    if (nl >= 0) {
      const line = syncBuf.subarray(0, nl).toString();
      syncBuf = syncBuf.subarray(nl + 1);
      const m = JSON.parse(line);
      if (m.id !== id) continue;
      if (m.error !== undefined) throw new Error(m.error);
      return m.result;
    }
    const n = fs.readSync(SYNC, chunk, 0, chunk.length, null);
    if (n === 0) throw new Error("beige: the gateway closed the plugin host's connection");
    syncBuf = Buffer.concat([syncBuf, chunk.subarray(0, n)]);
  }
}

// asyncCall sends a ctx call and resolves with its answer; onEvent, if
// given, receives the call's events before it (a streaming prompt's text).
function asyncCall(op, args, onEvent) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, onEvent });
    writeFrame({ t: "req", id, op, args });
  });
}

let instance = null;
const tools = new Map();
const hooks = new Map();
let channelAdapter = null;

// The PromptOpts of prompt/promptStreaming beyond channel and the streaming
// and tool callbacks: a model for this prompt only, the session's reply
// target, and whether the plugin listens for automatic compaction.
function promptExtras(opts) {
  const out = { compaction: typeof opts?.onAutoCompactionStart === "function" || typeof opts?.onAutoCompactionEnd === "function" };
  const m = opts?.modelOverride;
  if (m) out.modelOverride = { provider: String(m.provider ?? ""), model: String(m.model ?? "") };
  if (opts?.replyTo !== undefined && opts?.replyTo !== null) out.replyTo = opts.replyTo;
  return out;
}

function compactionEvent(opts, ev) {
  if (ev.kind === "compactionStart" && typeof opts?.onAutoCompactionStart === "function") opts.onAutoCompactionStart();
  else if (ev.kind === "compactionEnd" && typeof opts?.onAutoCompactionEnd === "function") {
    const r = { success: !!ev.success, willRetry: !!ev.willRetry };
    if (typeof ev.tokensBefore === "number") r.tokensBefore = ev.tokensBefore;
    if (ev.errorMessage !== undefined) r.errorMessage = String(ev.errorMessage);
    opts.onAutoCompactionEnd(r);
  }
}

function makeContext(init) {
  const frozen = (v) => Object.freeze(structuredClone(v));
  return {
    get config() { return frozen(init.gatewayConfig ?? {}); },
    get agentNames() { return [...(init.agentNames ?? [])]; },
    get dataDir() { fs.mkdirSync(init.dataDir, { recursive: true }); return init.dataDir; },
    log: {
      info: (m) => log("info", m),
      warn: (m) => log("warn", m),
      error: (m) => log("error", m),
    },
    prompt: (sessionKey, agentName, message, opts) =>
      asyncCall("prompt", { sessionKey, agentName, message, channel: opts?.channel ?? "", toolStart: typeof opts?.onToolStart === "function", ...promptExtras(opts) }, (ev) => {
        if (ev.kind === "tool") opts.onToolStart(String(ev.name ?? ""), ev.params ?? {});
        else compactionEvent(opts, ev);
      }),
    promptStreaming: (sessionKey, agentName, message, onDelta, opts) =>
      asyncCall("prompt", { sessionKey, agentName, message, channel: opts?.channel ?? "", stream: true, toolStart: typeof opts?.onToolStart === "function", ...promptExtras(opts) }, (ev) => {
        if (ev.kind === "delta" && typeof onDelta === "function") onDelta(String(ev.delta ?? ""));
        else if (ev.kind === "turn" && typeof opts?.onAssistantTurnStart === "function") opts.onAssistantTurnStart();
        else if (ev.kind === "tool" && typeof opts?.onToolStart === "function") opts.onToolStart(String(ev.name ?? ""), ev.params ?? {});
        else compactionEvent(opts, ev);
      }),
    newSession: (sessionKey, agentName) => asyncCall("newSession", { sessionKey, agentName }).then(() => undefined),
    abortSession: (sessionKey) => asyncCall("abortSession", { sessionKey }).then(() => undefined),
    compactSession: (sessionKey) => asyncCall("compactSession", { sessionKey }),
    createSession: (sessionKey, agentName, metadata) => syncCall("createSession", { sessionKey, agentName, metadata: metadata ?? null }),
    getSessionEntry: (sessionKey) => syncCall("getSessionEntry", { sessionKey }) ?? undefined,
    listSessions: (agentName, opts) => syncCall("listSessions", { agentName, includeToolSessions: !!opts?.includeToolSessions }),
    listSessionKeys: (agentName, opts) => syncCall("listSessionKeys", { agentName, includeToolSessions: !!opts?.includeToolSessions }),
    getSessionSettings: (sessionKey) => syncCall("getSessionSettings", { sessionKey }),
    updateSessionSettings: (sessionKey, update) => { syncCall("updateSessionSettings", { sessionKey, update }); },
    clearSessionSettings: (sessionKey) => { syncCall("clearSessionSettings", { sessionKey }); },
    setSessionMetadata: (sessionKey, key, value) => { syncCall("setSessionMetadata", { sessionKey, key, value }); },
    getSessionMetadata: (sessionKey, key) => syncCall("getSessionMetadata", { sessionKey, key }) ?? undefined,
    isSessionActive: (sessionKey) => !!syncCall("isSessionActive", { sessionKey }),
    getRegisteredTools: () => syncCall("getRegisteredTools", {}),
    invokeTool: (toolName, args, sessionContext) => asyncCall("invokeTool", { toolName, args, sessionContext }),
    steerSession: (sessionKey, text) => asyncCall("steerSession", { sessionKey, text }).then(() => undefined),
    disposeSession: (sessionKey) => asyncCall("disposeSession", { sessionKey }).then(() => undefined),
    // Only the fields of LlmMessage and LlmPromptOpts are sent (pi's
    // UserMessage carries a timestamp, say); the gateway checks the rest.
    // A call over the frame limit would end the host: it fails instead.
    llmPrompt: (provider, modelId, messages, opts) => {
      const args = {
        provider, modelId,
        messages: Array.isArray(messages) ? messages.map((m) => ({
          role: m?.role,
          content: Array.isArray(m?.content) ? m.content.map((b) => ({ type: b?.type, text: b?.text, data: b?.data, mimeType: b?.mimeType })) : m?.content,
        })) : messages,
        opts: opts ? { systemPrompt: opts.systemPrompt, maxTokens: opts.maxTokens, thinkingLevel: opts.thinkingLevel } : undefined,
      };
      if (Buffer.byteLength(JSON.stringify(args)) > MAX_ARGS) return Promise.reject(new Error(`ctx.llmPrompt: the messages are over 8 MiB in all (images included)`));
      return asyncCall("llmPrompt", args);
    },
    getModel: (provider, modelId) => syncCall("getModel", { provider, modelId }) ?? undefined,
    getModelHealth: (provider, modelId) => syncCall("getModelHealth", { provider, modelId }) ?? undefined,
    clearModelHealth: (provider, modelId) => { syncCall("clearModelHealth", { provider, modelId }); },
    getSessionUsage: (sessionKey) => syncCall("getSessionUsage", { sessionKey }) ?? undefined,
    getSessionModel: (sessionKey) => syncCall("getSessionModel", { sessionKey }) ?? undefined,
    persistSessionModel: (sessionKey, agentName, provider, modelId) => { syncCall("persistSessionModel", { sessionKey, agentName, provider, modelId }); },
    clearSessionModel: (sessionKey) => { syncCall("clearSessionModel", { sessionKey }); },
    // A channel of the gateway (the built-in telegram, another plugin's):
    // sends go through the gateway, which logs them.
    getChannel: (name) => {
      const c = syncCall("getChannel", { name: String(name) });
      if (!c) return undefined;
      return Object.freeze({
        supportsMessaging: () => !!c.messaging,
        sendMessage: (chatId, threadId, text, options) =>
          asyncCall("channel.sendTo", { name: c.name, chatId: String(chatId ?? ""), threadId: threadId ? String(threadId) : "", text: String(text ?? ""), options: options && options.parseMode !== undefined ? { parseMode: options.parseMode } : null }).then(() => undefined),
        sendPhoto: async () => { throw new Error(`channel ${c.name}: sendPhoto is not supported by beige yet`); },
      });
    },
  };
}

function registrar(result) {
  return {
    tool(t) {
      if (!t || typeof t.name !== "string" || typeof t.handler !== "function") throw new Error("registrar.tool: a tool needs a name and a handler");
      if (tools.has(t.name)) throw new Error(`registrar.tool: tool ${t.name} registered twice`);
      tools.set(t.name, t.handler);
      result.tools.push({ name: t.name, description: String(t.description ?? ""), commands: Array.isArray(t.commands) ? t.commands.map(String) : [] });
    },
    hook(name, fn) {
      if (typeof fn !== "function") throw new Error(`registrar.hook(${name}): not a function`);
      if (!hooks.has(name)) { hooks.set(name, []); result.hooks.push(String(name)); }
      hooks.get(name).push(fn);
    },
    skill(s) {
      if (!s || typeof s.name !== "string" || typeof s.path !== "string") throw new Error("registrar.skill: a skill needs a name and a path");
      result.skills.push({ name: s.name, path: s.path, description: String(s.description ?? "") });
    },
    // A channel: the gateway registers it under the plugin's name (as the
    // original does) and sends through it with the channel.send request; its
    // receiving side runs in the plugin's start().
    channel(adapter) {
      if (!adapter || typeof adapter.sendMessage !== "function") throw new Error("registrar.channel: a channel adapter needs a sendMessage method");
      if (channelAdapter) throw new Error("registrar.channel: a plugin registers one channel");
      channelAdapter = adapter;
      result.channel = true;
      result.channelMessaging = typeof adapter.supportsMessaging === "function" ? !!adapter.supportsMessaging() : true;
    },
  };
}

async function runHook(name, event) {
  const fns = hooks.get(name) ?? [];
  if (name === "prePrompt") {
    let message = event.message;
    for (const fn of fns) {
      const r = await fn({ ...event, message });
      if (r && r.block) return { message, block: true, reason: String(r.reason ?? "") };
      if (r && typeof r.message === "string") message = r.message;
    }
    return { message, block: false };
  }
  if (name === "postResponse") {
    let response = event.response;
    for (const fn of fns) {
      const r = await fn({ ...event, response });
      if (r && r.block) return { response, block: true };
      if (r && typeof r.response === "string") response = r.response;
    }
    return { response, block: false };
  }
  if (name === "preToolExec") {
    for (const fn of fns) {
      const r = await fn(event);
      if (r && r.allow === false) return { allow: false, reason: String(r.reason ?? "") };
    }
    return { allow: true };
  }
  for (const fn of fns) await fn(event);
  return {};
}

const ops = {
  async init(a) {
    let mod;
    try {
      mod = await import(pathToFileURL(a.entry).href);
    } catch (e) {
      // Node's type stripping handles only erasable syntax: an enum, a
      // namespace or a parameter property needs a real TypeScript loader.
      if (e && (e.code === "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX" || e.code === "ERR_INVALID_TYPESCRIPT_SYNTAX")) {
        throw new Error(`${a.entry} uses TypeScript syntax Node.js cannot strip (${errText(e).split("\n")[0]}); ship tsx with the plugin (node_modules/tsx in its folder) or compile it to JavaScript`);
      }
      throw e;
    }
    let create = mod.createPlugin;
    if (typeof create !== "function" && mod.default) {
      create = typeof mod.default === "function" ? mod.default : mod.default.createPlugin;
    }
    if (typeof create !== "function") throw new Error(`${a.entry} does not export a createPlugin function`);
    try {
      instance = create(a.config ?? {}, makeContext(a));
    } catch (e) {
      throw new Error(`createPlugin() failed: ${errText(e)}`);
    }
    if (!instance || typeof instance.register !== "function") throw new Error("createPlugin() returned no object with a register() method");
    const result = { tools: [], hooks: [], skills: [], channel: false, channelMessaging: false };
    try {
      instance.register(registrar(result));
    } catch (e) {
      throw new Error(`register() failed: ${errText(e)}`);
    }
    return result;
  },
  async tool(a) {
    const h = tools.get(a.tool);
    if (!h) throw new Error(`no tool ${a.tool}`);
    const r = await h(a.args ?? [], a.config ?? {}, a.session ?? {});
    const output = r && r.output !== undefined && r.output !== null ? String(r.output) : "";
    const exitCode = r && Number.isInteger(r.exitCode) ? r.exitCode : 0;
    return { output, exitCode };
  },
  hook: (a) => runHook(a.hook, a.event ?? {}),
  async "channel.send"(a) {
    if (!channelAdapter) throw new Error("the plugin registered no channel");
    const opts = a.options && typeof a.options === "object" ? a.options : undefined;
    await channelAdapter.sendMessage(String(a.chatId ?? ""), a.threadId ? String(a.threadId) : undefined, String(a.text ?? ""), opts);
    return {};
  },
  async start() { if (instance && typeof instance.start === "function") await instance.start(); return {}; },
  async stop() { if (instance && typeof instance.stop === "function") await instance.stop(); return {}; },
};

async function handle(m) {
  try {
    const op = Object.hasOwn(ops, m.op) ? ops[m.op] : null;
    if (!op) throw new Error(`unknown request ${m.op}`);
    const result = await op(m.args ?? {});
    writeFrame({ t: "res", id: m.id, result: result ?? {} });
  } catch (e) {
    const code = e && typeof e.code === "string" ? e.code : undefined;
    writeFrame({ t: "res", id: m.id, error: errText(e), code });
  }
}

function onLine(line) {
  if (!line) return;
  const m = JSON.parse(line);
  if (m.t === "ev") {
    const p = pending.get(m.id);
    if (p && p.onEvent) {
      try { p.onEvent(m); } catch (e) { log("error", `promptStreaming callback threw: ${errText(e)}`); }
    }
  } else if (m.t === "res") {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error !== undefined) p.reject(new Error(m.error));
    else p.resolve(m.result);
  } else if (m.t === "req") {
    handle(m);
  }
}

process.on("uncaughtException", (e) => {
  log("error", `uncaught exception: ${e && e.stack ? e.stack : errText(e)}`);
  process.exit(70);
});
process.on("unhandledRejection", (e) => {
  log("error", `unhandled promise rejection: ${e && e.stack ? e.stack : errText(e)}`);
  process.exit(70);
});

let buf = "";
// fd 3 is read through a libuv pipe handle, not fs.createReadStream: a
// blocking read in the thread pool would hold up process.exit until the
// gateway wrote again.
const input = new net.Socket({ fd: IN, readable: true, writable: false });
input.setEncoding("utf8");
input.on("data", (s) => {
  buf += s;
  let nl;
  while ((nl = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    onLine(line);
  }
});
input.on("end", () => process.exit(0));
input.on("error", () => process.exit(0));
