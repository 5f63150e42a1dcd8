// The structrag explorer: a small single-page app over the server's /v1 API. No build
// step and no network beyond this server. Every piece of text from the index goes into
// the page through textContent (never as HTML).
"use strict";

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
const PAGE = 50;
let token = sessionStorage.getItem("structrag-token") || "";

// -- helpers ----------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function enc(value) {
  return encodeURIComponent(value);
}

function query(params) {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => `${enc(k)}=${enc(v)}`);
  return parts.length ? `?${parts.join("&")}` : "";
}

function askToken() {
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        token = input.value.trim();
        sessionStorage.setItem("structrag-token", token);
        resolve();
      },
      { once: true },
    );
    dialog.showModal();
  });
}

class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

async function api(method, path, body, retried) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  statusLine.textContent = "…";
  const started = performance.now();
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  statusLine.textContent = `${method} ${path.split("?")[0]} ${response.status} in ${Math.round(performance.now() - started)} ms`;
  if (response.status === 401 && !retried) {
    await askToken();
    return api(method, path, body, true);
  }
  if (!response.ok) throw new ApiError(response.status, data.error || {});
  return data;
}

function showError(where, err) {
  const error = err instanceof ApiError ? err.error : { message: String(err) };
  const hint = error.hint ? `\nhint: ${error.hint}` : "";
  where.replaceChildren(h("div", { class: "card error", role: "alert" }, `${error.message || err}${hint}`));
}

function day(ts) {
  return ts ? ts.slice(0, 16).replace("T", " ") : "";
}

function conversationLink(conversation, messageId) {
  return `#/c/${enc(conversation)}${messageId ? `?focus=${enc(messageId)}` : ""}`;
}

// -- knowledge at its spans ---------------------------------------------------------------

function describe(item) {
  if (item.kind === "entity") {
    const types = (item.types || []).join("/");
    const facets = (item.facets || []).map((f) => `${f.name}=${f.value}`).join(", ");
    return `entity: ${item.name}${types ? ` (${types})` : ""}${facets ? ` [${facets}]` : ""}`;
  }
  if (item.kind === "action") {
    const parts = [item.subject || "?", (item.negated ? "NOT " : "") + (item.verbs || []).join(" ")];
    if (item.object) parts.push(item.object);
    if (item.indirect_object) parts.push(`(to ${item.indirect_object})`);
    return `action: ${parts.join(" ")} <${item.tense || "present"}>`;
  }
  return `${item.kind}: ${item.text || ""}`;
}

// The message text with every extracted item marked at its span. Spans count code points
// (as Python does), so the text is split into code points first. Overlapping spans split
// the text at every boundary; a piece is marked as its shortest covering item, and its
// tooltip names all of them. The speaker/recipient knowledge (whole-message spans from
// the metadata extractor) is listed in the header instead.
function highlighted(text, knowledge) {
  const chars = Array.from(text);
  const items = knowledge.filter((k) => !k.extractor.startsWith("metadata") && k.span[1] > k.span[0]);
  const cuts = new Set([0, chars.length]);
  for (const k of items) {
    cuts.add(Math.max(0, Math.min(chars.length, k.span[0])));
    cuts.add(Math.max(0, Math.min(chars.length, k.span[1])));
  }
  const points = [...cuts].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [start, end] = [points[i], points[i + 1]];
    const piece = chars.slice(start, end).join("");
    const covering = items.filter((k) => k.span[0] <= start && k.span[1] >= end);
    if (!covering.length) {
      out.push(piece);
      continue;
    }
    covering.sort((a, b) => a.span[1] - a.span[0] - (b.span[1] - b.span[0]));
    const inner = covering[0];
    const title = covering.map((k) => `#${k.ref_id} ${describe(k)}  [${k.span[0]}-${k.span[1]}, ${k.extractor}]`).join("\n");
    const entity = covering.find((k) => k.kind === "entity");
    out.push(
      h(
        "mark",
        {
          class: `k-${inner.kind}`,
          title,
          dataset: { ref: inner.ref_id, kind: inner.kind, name: entity ? entity.name : undefined },
          onclick: entity ? () => (location.hash = `#/e/${enc(entity.name)}`) : undefined,
        },
        piece,
      ),
    );
  }
  return out;
}

function messageCard(message) {
  const counts = { entity: 0, action: 0, topic: 0 };
  for (const k of message.knowledge) if (!k.extractor.startsWith("metadata") && k.kind in counts) counts[k.kind] += 1;
  const to = message.recipients.length ? ` → ${message.recipients.join(", ")}` : "";
  return h(
    "div",
    { class: "msg", id: `m-${message.id}`, dataset: { id: message.id } },
    h(
      "div",
      { class: "head" },
      h("span", { class: "who" }, message.speaker || "?"),
      to,
      message.timestamp ? ` · ${day(message.timestamp)}` : "",
      ` · ${message.id} · ${counts.entity} entities, ${counts.action} actions, ${counts.topic} topics`,
    ),
    h("div", { class: "text" }, highlighted(message.text, message.knowledge)),
  );
}

function legend() {
  return h(
    "div",
    { class: "legend" },
    h("mark", { class: "k-entity" }, "entity"),
    h("mark", { class: "k-action" }, "action"),
    h("mark", { class: "k-topic" }, "topic"),
    h("span", { class: "muted" }, "hover a mark for its ref; click an entity for its page"),
  );
}

// -- views --------------------------------------------------------------------------------

// A token limited to some agents' memories gets 403 for the index's pages: say so, and
// offer to open an agent's memory (the server's message names the agents it reaches).
function agentsOnly(err) {
  if (!(err instanceof ApiError) || err.status !== 403 || err.error.code !== "access_denied") throw err;
  const name = h("input", { type: "text", id: "agent-name", placeholder: "agent", required: true });
  const form = h(
    "form",
    {
      class: "row",
      id: "agent-form",
      onsubmit: (event) => {
        event.preventDefault();
        if (name.value.trim()) location.hash = `#/a/${enc(name.value.trim())}`;
      },
    },
    name,
    h("button", { type: "submit" }, "Open its memory"),
  );
  return [
    h("h1", {}, "Agents' memory only"),
    h(
      "div",
      { class: "card", id: "agents-only", role: "status" },
      h("p", {}, err.error.message || "this token reaches some agents' memories only"),
      h("p", { class: "muted" }, "The index's pages (conversations, entities, ask) need a token granted the whole index. Open the memory of an agent this token reaches:"),
      form,
    ),
  ];
}

async function home() {
  try {
    return await indexView();
  } catch (err) {
    return agentsOnly(err);
  }
}

async function indexView() {
  const [stats, conversations, entities, topics] = await Promise.all([
    api("GET", "/v1/stats"),
    api("GET", "/v1/conversations"),
    api("GET", "/v1/entities?top=25"),
    api("GET", "/v1/topics?top=25"),
  ]);
  const refs = stats.semantic_refs;
  return [
    h("h1", {}, "Index"),
    h(
      "div",
      { class: "card stats" },
      ...[
        ["conversations", stats.conversations],
        ["messages", stats.messages],
        ["entities", refs.entity],
        ["actions", refs.action],
        ["topics", refs.topic],
      ].map(([label, n]) => h("div", { class: "stat" }, h("b", {}, n), h("span", {}, label))),
    ),
    h("h2", {}, "Conversations"),
    h(
      "div",
      { class: "card" },
      h(
        "table",
        { id: "conversations" },
        h("tr", {}, h("th", {}, "conversation"), h("th", { class: "num" }, "messages"), h("th", {}, "dates"), h("th", {}, "speakers")),
        conversations.map((c) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: conversationLink(c.id) }, c.name || c.id)),
            h("td", { class: "num" }, c.messages),
            h("td", { class: "muted" }, c.first ? `${c.first.slice(0, 10)} – ${(c.last || "").slice(0, 10)}` : ""),
            h("td", {}, c.speakers.slice(0, 8).join(", ")),
          ),
        ),
      ),
    ),
    h(
      "div",
      { class: "grid" },
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Entities"),
        h("div", { class: "chips", id: "entities" }, entities.map((e) => h("a", { class: "chip", href: `#/e/${enc(e.name)}` }, `${e.name} · ${e.mentions}`))),
      ),
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Topics"),
        h("div", { class: "chips" }, topics.map((t) => h("span", { class: "chip" }, `${t.topic} · ${t.mentions}`))),
      ),
    ),
  ];
}

async function conversationView(id, params) {
  const focus = params.get("focus");
  const asked = Math.max(0, parseInt(params.get("page") || "0", 10) || 0);
  const where = focus ? { around: focus, limit: PAGE } : { offset: asked * PAGE, limit: PAGE };
  let data = await api("GET", `/v1/conversations/${enc(id)}/messages${query(where)}`);
  const pages = Math.max(1, Math.ceil(data.total / PAGE));
  const last = pages - 1;
  if (!focus && asked > last) {
    // a page past the end (an old link, a hand-typed ?page=): show the last one
    history.replaceState(null, "", `#/c/${enc(id)}?page=${last}`);
    data = await api("GET", `/v1/conversations/${enc(id)}/messages${query({ offset: last * PAGE, limit: PAGE })}`);
  }
  const page = Math.min(Math.floor(data.offset / PAGE), last);
  const pager = () =>
    h(
      "div",
      { class: "pager" },
      h("button", { class: "plain", disabled: page === 0, onclick: () => (location.hash = `#/c/${enc(id)}?page=${page - 1}`) }, "← previous"),
      h("span", { class: "muted" }, `page ${page + 1} of ${pages} · ${data.total} messages`),
      h("button", { class: "plain", disabled: page + 1 >= pages, onclick: () => (location.hash = `#/c/${enc(id)}?page=${page + 1}`) }, "next →"),
    );
  return [
    h("h1", {}, `Conversation ${id}`),
    legend(),
    pager(),
    h("div", { class: "card", id: "messages" }, data.messages.map(messageCard)),
    pager(),
  ];
}

async function entityView(name) {
  const data = await api("GET", `/v1/entities/${enc(name)}`);
  const most = Math.max(1, ...data.by_month.map((m) => m.mentions));
  return [
    h("h1", {}, data.name),
    h("p", { class: "muted" }, `${data.types.join(", ") || "no type"} · ${data.mentions} mentions in ${data.messages} messages`),
    h("h2", {}, "Mentions over time"),
    h(
      "div",
      { class: "card bars-wrap" },
      data.by_month.length
        ? h("div", { class: "bars", id: "timeline" }, data.by_month.map((m) => h("div", { class: "bar", style: `height:${Math.round((100 * m.mentions) / most)}%`, title: `${m.month}: ${m.mentions}` }, h("span", {}, m.month))))
        : h("p", { class: "muted" }, "no dated mentions"),
    ),
    h(
      "div",
      { class: "grid" },
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Related entities"),
        h("div", { class: "chips", id: "related" }, data.related.slice(0, 40).map((r) => h("a", { class: "chip", href: `#/e/${enc(r.name)}` }, `${r.name} · ${r.messages}`))),
      ),
      h(
        "div",
        { class: "card" },
        h("h2", {}, "Actions"),
        h(
          "table",
          { id: "actions" },
          data.actions.slice(0, 60).map((a) =>
            h(
              "tr",
              {},
              h("td", {}, `${a.subject || "?"} ${a.negated ? "NOT " : ""}${a.verb} ${a.object || ""}${a.indirect_object ? ` (to ${a.indirect_object})` : ""}`),
              h("td", {}, h("a", { href: conversationLink(a.conversation, a.message_id) }, a.message_id)),
            ),
          ),
        ),
      ),
    ),
    h("h2", {}, "Mentions"),
    h(
      "div",
      { class: "card" },
      h(
        "table",
        { id: "mentions" },
        h("tr", {}, h("th", {}, "when"), h("th", {}, "message"), h("th", {}, "speaker"), h("th", {}, "as written")),
        data.occurrences.map((o) =>
          h(
            "tr",
            {},
            h("td", { class: "muted" }, day(o.ts)),
            h("td", {}, h("a", { href: conversationLink(o.conversation, o.message_id) }, `${o.conversation}/${o.message_id}`)),
            h("td", {}, o.speaker || ""),
            h("td", {}, o.span_text),
          ),
        ),
      ),
    ),
  ];
}

function askView(params) {
  const result = h("div", { id: "ask-result" });
  const input = h("input", { type: "search", name: "question", id: "question", placeholder: "When did Marco adopt Biscuit?", value: params.get("q") || "", required: true, maxlength: 2000 });
  const budget = h("input", { type: "number", id: "budget", min: 1, value: params.get("budget") || 1000, style: "width:7rem", title: "token budget" });
  async function run(event) {
    if (event) event.preventDefault();
    const question = input.value.trim();
    if (!question) return;
    history.replaceState(null, "", `#/ask${query({ q: question, budget: budget.value })}`);
    result.replaceChildren(h("p", { class: "muted" }, "asking…"));
    try {
      const data = await api("POST", "/v1/ask", { question, budget: budgetOf(budget.value), explain: true });
      result.replaceChildren(...answerView(data));
    } catch (err) {
      showError(result, err);
    }
  }
  const form = h("form", { class: "row card", id: "ask-form", onsubmit: run }, input, h("label", { class: "muted" }, "budget ", budget), h("button", { type: "submit" }, "Ask"));
  if (input.value) setTimeout(run, 0);
  return [h("h1", {}, "Ask"), form, result];
}

// The budget field's value as the API takes it: empty is the default (1000); anything
// else goes as typed (a number, or the text itself), so that the API's error says what is
// wrong with it (0, -5, 1.5, "abc") instead of the question being asked with 1000.
function budgetOf(value) {
  const text = String(value ?? "").trim();
  if (text === "") return 1000;
  const number = Number(text);
  return Number.isFinite(number) ? number : text;
}

function answerView(data) {
  return [
    h(
      "div",
      { class: "card" },
      h("h2", {}, "Translated query"),
      h("p", {}, h("code", { class: "query" }, data.query), h("span", { class: "muted" }, `  (${data.question_type} question, ${Math.round(data.seconds * 1000)} ms)`)),
      data.notes.length ? h("ul", {}, data.notes.map((n) => h("li", { class: "muted" }, n))) : null,
      h("details", { open: true }, h("summary", {}, "Plan"), h("pre", { class: "plan" }, data.plan || "")),
      h("details", {}, h("summary", {}, "AST"), h("pre", { class: "ast" }, data.ast || "")),
    ),
    h(
      "div",
      { class: "card" },
      h("h2", {}, "Packed context ", h("span", { class: "tokens" }, `${data.tokens} / ${data.budget} tokens`)),
      h("pre", { class: "context" }, data.context),
      h(
        "table",
        { class: "packed" },
        h("tr", {}, h("th", {}, "message"), h("th", {}, "source"), h("th", { class: "num" }, "score"), h("th", { class: "num" }, "tokens")),
        data.messages.map((m) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: conversationLink(m.conversation, m.id) }, `${m.conversation}/${m.id}`)),
            h("td", {}, m.source),
            h("td", { class: "num" }, m.score.toFixed(3)),
            h("td", { class: "num" }, m.tokens),
          ),
        ),
      ),
    ),
  ];
}

async function agentsView() {
  let agents;
  try {
    agents = await api("GET", "/v1/agents");
  } catch (err) {
    return agentsOnly(err);
  }
  return [
    h("h1", {}, "Agents"),
    h(
      "div",
      { class: "card" },
      agents.length
        ? h(
            "table",
            { id: "agents" },
            h("tr", {}, h("th", {}, "agent"), h("th", { class: "num" }, "memories"), h("th", {}, "tables")),
            agents.map((a) =>
              h(
                "tr",
                {},
                h("td", {}, h("a", { href: `#/a/${enc(a.agent)}` }, a.agent)),
                h("td", { class: "num" }, a.memories),
                h("td", { class: "muted" }, Object.entries(a.tables).map(([t, n]) => `${t} ${n}`).join(", ")),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No agent has memories yet (POST /v1/agents/{agent}/memories, or the add_memory MCP tool)."),
    ),
  ];
}

// A one-line form whose answer replaces what is below it.
function formWithResult(fields, label, answer) {
  const out = h("div", { class: "form-result" });
  const form = h(
    "form",
    {
      class: "row",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          out.replaceChildren(await answer());
        } catch (err) {
          showError(out, err);
        }
      },
    },
    ...fields,
    h("button", { type: "submit" }, label),
  );
  return h("div", {}, form, out);
}

function memoryRows(rows, withScore) {
  if (!rows.length) return h("p", { class: "muted" }, "nothing");
  return h(
    "table",
    { class: "memories" },
    h("tr", {}, withScore ? h("th", { class: "num" }, "score") : null, h("th", {}, "id"), h("th", {}, "room"), h("th", {}, "when"), h("th", {}, "text"), h("th", { class: "num" }, "reads")),
    rows.map((m) =>
      h(
        "tr",
        {},
        withScore ? h("td", { class: "num" }, m.score.toFixed(3)) : null,
        h("td", { class: "muted" }, m.id),
        h("td", {}, `${m.table}/${m.room}`),
        h("td", { class: "muted" }, day(m.ts || m.created_at)),
        h("td", {}, m.user ? h("b", {}, `${m.user}: `) : null, m.text),
        h("td", { class: "num" }, m.access_count),
      ),
    ),
  );
}

function agentView(agent, params) {
  const base = `/v1/agents/${enc(agent)}`;
  const body = h("div", { id: "agent-body" });
  const tabs = {
    recent: async () => memoryRows(await api("GET", `${base}/memories?count=50`), false),
    knowledge: async () => memoryRows(await api("GET", `${base}/memories?count=50&table=knowledge`), false),
    facts: async () => {
      const facts = await api("GET", `${base}/facts`);
      return memoryRows(facts, false);
    },
    search: async () => {
      const input = h("input", { type: "search", id: "memory-query", placeholder: "where does the user live?", required: true });
      const table = h("select", { id: "memory-table" }, ["messages", "facts", "relationships", "goals", "knowledge"].map((t) => h("option", {}, t)));
      const mode = h("select", { id: "memory-mode" }, ["structured", "hybrid", "text", "vector"].map((m) => h("option", {}, m)));
      return formWithResult([input, table, mode], "Search", async () =>
        memoryRows(await api("POST", `${base}/memories/search`, { query: input.value, table: table.value, mode: mode.value, count: 20 }), true),
      );
    },
    profile: async () => {
      const input = h("input", { type: "text", id: "profile-user", placeholder: "user", required: true });
      return formWithResult([input], "Show profile", async () => {
        const entries = await api("GET", `${base}/profile${query({ user: input.value, history: true })}`);
        return entries.length
          ? h("table", {}, entries.map((e) => h("tr", {}, h("td", {}, e.category), h("td", {}, e.superseded_by ? h("s", {}, e.text) : e.text), h("td", { class: "muted" }, e.sources.join(", ")))))
          : h("p", { class: "muted" }, "nothing known about this user");
      });
    },
  };
  const current = tabs[params.get("tab")] ? params.get("tab") : "recent";
  const bar = h(
    "div",
    { class: "tabs", role: "tablist" },
    Object.keys(tabs).map((name) => h("button", { class: name === current ? "active" : "plain", role: "tab", onclick: () => (location.hash = `#/a/${enc(agent)}?tab=${name}`) }, name)),
  );
  tabs[current]()
    .then((node) => body.replaceChildren(node))
    .catch((err) => showError(body, err));
  return [h("h1", {}, `Memory of ${agent}`), bar, h("div", { class: "card" }, body)];
}

// -- routing ------------------------------------------------------------------------------

// One segment of the address, percent-decoded; one that does not decode ("100%") is an
// error the page shows, not an exception that leaves it loading.
function decodePart(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new Error(`the address ${JSON.stringify(location.hash)} is not valid: "${part}" is not percent-encoded (write % as %25)`);
  }
}

async function route() {
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(search || "");
  const raw = path.split("/").filter(Boolean);
  const section = raw[0] === "ask" ? "ask" : raw[0] === "agents" || raw[0] === "a" ? "agents" : "home";
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === section);
  main.replaceChildren(h("p", { class: "muted" }, "loading…"));
  try {
    const parts = raw.map(decodePart);
    let view;
    if (parts[0] === "c" && parts[1]) view = await conversationView(parts[1], params);
    else if (parts[0] === "e" && parts[1]) view = await entityView(parts[1]);
    else if (parts[0] === "ask") view = askView(params);
    else if (parts[0] === "agents") view = await agentsView();
    else if (parts[0] === "a" && parts[1]) view = agentView(parts[1], params);
    else view = await home();
    main.replaceChildren(...view);
    document.title = `structrag · ${parts[0] ? parts.join(" / ") : "index"}`;
    const focus = params.get("focus");
    if (focus) {
      const target = document.getElementById(`m-${focus}`);
      if (target) {
        target.style.background = "#fffbe6";
        target.scrollIntoView({ block: "center" });
      }
    }
  } catch (err) {
    showError(main, err);
  }
  main.dataset.ready = location.hash || "#/";
}

window.addEventListener("hashchange", route);
route();
