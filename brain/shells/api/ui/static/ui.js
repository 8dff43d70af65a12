// The memory browser: every datum comes from brain's JSON API, called with the token kept in this tab's
// sessionStorage and sent as an Authorization header (never in a URL). Text from the store is only ever
// put into the page as text (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "brain.api-token";
const PAGE_SIZE = 50;
const SEARCH_K = 50;
const CONVERSATION_PAGE = 20;
const SECTION_TITLES = {
  persona: "Persona", core: "Always kept in mind about this person", faq: "Knowledge base", memory: "What you remember",
  summary: "Earlier in this conversation", related: "Earlier turns related to this message", turn: "Recent turns",
};
const DROP_REASONS = {
  max_chars: "the context was over its character budget (RAG_CONTEXT_MAX_CHARS)",
  max_tokens: "the context was over its token budget (RAG_CONTEXT_MAX_TOKENS)",
};
const STATUSES = ["active", "retracted", "superseded", "deprecated", "archived"];

const $ = (id) => document.getElementById(id);

// ---- the API ------------------------------------------------------------------------------------

class LoginNeeded extends Error {}

function token() { return sessionStorage.getItem(TOKEN_KEY); }

function url(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    for (const v of [].concat(value)) {
      if (v !== undefined && v !== null && v !== "") params.append(key, String(v));
    }
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

// {ok, status, data}; a 401 shows the token prompt and throws LoginNeeded
async function api(method, path, { query, body } = {}) {
  const headers = { Accept: "application/json" };
  const secret = token();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url(path, query), {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer",
    });
  } catch (err) {
    return { ok: false, status: 0, data: { message: `the server did not answer (${err.message})` } };
  }
  let data = null;
  try { data = await response.json(); } catch (err) { data = null; }
  if (response.status === 401) {
    showLogin(secret ? "That token was refused: check it and try again." : "");
    throw new LoginNeeded();
  }
  return { ok: response.ok, status: response.status, data };
}

// the message the API gave for a refusal, as brain words it
function problem(res) {
  const d = res.data || {};
  return d.message || d.detail || `the server answered ${res.status}`;
}

// a route this server does not have (an older brain), as opposed to brain's own "not found" for a thing
function missingEndpoint(res) {
  const d = res.data || {};
  return res.status === 404 || res.status === 405 ? ((d.message || d.detail) === "Not Found" ||
    (d.message || d.detail) === "Method Not Allowed") : false;
}

// ---- small DOM helpers --------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { node.replaceChildren(); return node; }

function say(id, text) { $(id).textContent = text || ""; }

function when(value) {
  if (value === undefined || value === null || value === "") return "never";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

function fixed(n) { return typeof n === "number" ? n.toFixed(3) : "–"; }

function guard(fn) {
  return async (...args) => {
    try { await fn(...args); } catch (err) { if (!(err instanceof LoginNeeded)) throw err; }
  };
}

// ---- the token prompt ---------------------------------------------------------------------------

function showLogin(message) {
  $("app").hidden = true;
  $("starting").hidden = true;
  $("login").hidden = false;
  say("login-error", message);
  $("token").value = "";
  $("token").focus();
}

async function start() {
  let res;
  try {
    res = await api("GET", "/v1/health");
  } catch (err) {
    if (err instanceof LoginNeeded) return;
    throw err;
  }
  $("starting").hidden = true;
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = !token();
  say("who", token() ? "signed in with a token (kept in this tab only)" : "no token needed: a loopback server");
  if (!res.ok && res.status !== 503) say("health-error", problem(res));
  const view = (location.hash || "").slice(1);
  showView(VIEWS[view] ? view : "memories");
}

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("token").value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  $("token").value = "";
  say("login-error", "");
  start();
});

$("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  for (const id of ["memory-list", "conversation-list", "conversation-items", "formation-result", "persona",
                    "knowledge", "try-result", "forget-result", "health"]) clear($(id));
  $("conversation-formation").hidden = true;
  showLogin("");
});

// ---- views --------------------------------------------------------------------------------------

const VIEWS = {
  memories: () => loadMemories(),
  conversations: () => loadConversations(),
  knowledge: () => loadKnowledge(),
  try: () => $("try-message").focus(),
  forget: () => $("forget-entity").focus(),
  health: () => loadHealth(),
};

function showView(name) {
  for (const tab of document.querySelectorAll(".tab")) {
    const on = tab.dataset.view === name;
    tab.setAttribute("aria-current", on ? "page" : "false");
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${name}`;
  if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  guard(VIEWS[name])();
}

for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => showView(tab.dataset.view));
}
window.addEventListener("hashchange", () => {
  const view = location.hash.slice(1);
  if (VIEWS[view] && !$("app").hidden) showView(view);
});

// ---- memories -----------------------------------------------------------------------------------

// ``load`` numbers each listing: an answer to an older one (overtaken by a newer search) is dropped
const memories = { offset: 0, searching: false, load: 0 };

function memoryFilters() {
  const form = $("memory-filters");
  return {
    q: form.q.value.trim(), entity: form.entity.value.trim(), tag: form.tag.value.trim(),
    importance: form.importance.value, status: form.status.value,
  };
}

function barLength(hit) {
  return [hit.similarity_part, hit.lexical_part, hit.importance_part, hit.recency_part]
    .reduce((sum, v) => sum + Math.max(v || 0, 0), 0);
}

// the score's three parts side by side; ``scale`` (the longest bar of the list) makes bars comparable
function scoreBar(hit, scale) {
  const parts = [["similarity", hit.similarity_part], ["lexical", hit.lexical_part || 0],
                 ["importance", hit.importance_part], ["recency", hit.recency_part]];
  const label = `score ${fixed(hit.score)} = similarity ${fixed(hit.similarity_part)} + ` +
    (hit.lexical_part ? `words in common ${fixed(hit.lexical_part)} + ` : "") +
    `importance ${fixed(hit.importance_part)} + recency ${fixed(hit.recency_part)}`;
  const total = scale || barLength(hit) || 1;
  const bar = el("div", { class: "scorebar", role: "img", "aria-label": label });
  for (const [name, value] of parts) {
    const part = el("span", { class: `part ${name}`, title: `${name} ${fixed(value)}` });
    part.style.width = `${(100 * Math.max(value || 0, 0)) / total}%`;
    bar.append(part);
  }
  return el("div", { class: "score" },
    el("span", { class: "score-total", text: `score ${fixed(hit.score)}` }), bar,
    el("span", { class: "score-parts" },
      ...parts.map(([name, value]) => el("span", { class: `legend ${name}`, "data-part": name },
        `${name} ${fixed(value)}`))));
}

function memoryRow(doc, hit, scale) {
  const meta = doc.metadata || {};
  const status = meta.status || "active";
  const row = el("li", { class: `memory status-${status}`, "data-id": doc.id });
  row.append(el("p", { class: "text", text: doc.text }));
  const facts = el("ul", { class: "facts", "aria-label": "About this memory" },
    el("li", { class: "scope" }, meta.entity ? `entity ${meta.entity}` : (meta.scope || "global")),
    el("li", { class: "importance", "data-importance": meta.importance }, `importance ${meta.importance ?? "–"}`),
    el("li", { class: "status" }, `status ${status}`),
    el("li", { class: "created" }, `created ${when(meta.created_at || meta.timestamp)}`),
    el("li", { class: "last-used" }, `last used ${when(meta.last_used)}`));
  const tags = el("li", { class: "tags" }, "tags ");
  for (const tag of meta.tags || []) tags.append(el("span", { class: "tag", text: tag }));
  if (!(meta.tags || []).length) tags.append("none");
  facts.append(tags);
  row.append(facts);
  if (hit) row.append(scoreBar(hit, scale));

  const error = el("p", { class: "error", role: "alert" });
  const editButton = el("button", { type: "button", class: "edit" }, "Edit");
  const deleteButton = el("button", { type: "button", class: "delete danger" }, "Delete");
  const actions = el("div", { class: "actions" }, editButton, deleteButton);
  row.append(actions);
  // a memory that replaced another or was replaced has a history to show; the list reaches superseded ones
  if (meta.supersedes || meta.superseded_by) {
    const historyButton = el("button", { type: "button", class: "show-history", "aria-expanded": "false" }, "History");
    const panel = el("section", { class: "history", hidden: true, "aria-label": "History of this memory" });
    actions.prepend(historyButton);
    row.append(panel);
    historyButton.addEventListener("click", guard(async () => {
      const open = panel.hidden;
      historyButton.setAttribute("aria-expanded", String(open));
      panel.hidden = !open;
      if (open) await showHistory(doc.id, panel);
    }));
  }

  // in-place edit
  const id = `m-${doc.id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const form = el("form", { class: "edit-form", hidden: true, "aria-label": "Edit this memory" },
    el("div", { class: "field wide" }, el("label", { for: `${id}-text` }, "Text"),
      el("textarea", { id: `${id}-text`, name: "text", rows: 2 })),
    el("div", { class: "field" }, el("label", { for: `${id}-importance` }, "Importance"),
      el("select", { id: `${id}-importance`, name: "importance" },
        ...[1, 2, 3, 4, 5].map((n) => el("option", { value: n }, String(n))))),
    el("div", { class: "field" }, el("label", { for: `${id}-tags` }, "Tags (comma-separated)"),
      el("input", { id: `${id}-tags`, name: "tags", type: "text" })),
    el("div", { class: "field" }, el("label", { for: `${id}-status` }, "Status"),
      el("select", { id: `${id}-status`, name: "status" }, ...STATUSES.map((s) => el("option", { value: s }, s)))),
    el("div", { class: "field buttons" }, el("button", { type: "submit" }, "Save"),
      el("button", { type: "button", class: "cancel" }, "Cancel")));
  form.text.value = doc.text;
  form.importance.value = String(meta.importance ?? 3);
  form.tags.value = (meta.tags || []).join(", ");
  form.status.value = status;
  row.append(form);

  const confirm = el("div", { class: "confirm", hidden: true, role: "group", "aria-label": "Confirm delete" },
    el("p", {}, "Delete this memory for good?"),
    el("button", { type: "button", class: "confirm-delete danger" }, "Yes, delete"),
    el("button", { type: "button", class: "cancel-delete" }, "Cancel"));
  row.append(confirm, error);

  editButton.addEventListener("click", () => {
    form.hidden = false; actions.hidden = true; error.textContent = ""; form.text.focus();
  });
  form.querySelector(".cancel").addEventListener("click", () => {
    form.hidden = true; actions.hidden = false; editButton.focus();
  });
  form.addEventListener("submit", guard(async (event) => {
    event.preventDefault();
    const patch = {};
    const text = form.text.value.trim();
    if (text !== doc.text) patch.text = text;
    const importance = Number(form.importance.value);
    if (importance !== meta.importance) patch.importance = importance;
    const newTags = form.tags.value.split(",").map((t) => t.trim()).filter(Boolean);
    if (newTags.join("\n") !== (meta.tags || []).join("\n")) patch.tags = newTags;
    const newStatus = form.status.value;
    if (newStatus !== status) patch.status = newStatus;
    if (!Object.keys(patch).length) { form.hidden = true; actions.hidden = false; return; }
    const res = await patchMemory(doc.id, patch);
    if (!res.ok) { error.textContent = problem(res); return; }
    say("memories-note", "Saved.");
    await loadMemories({ keepNote: true });
  }));

  deleteButton.addEventListener("click", () => {
    confirm.hidden = false; actions.hidden = true; confirm.querySelector(".cancel-delete").focus();
  });
  confirm.querySelector(".cancel-delete").addEventListener("click", () => {
    confirm.hidden = true; actions.hidden = false; deleteButton.focus();
  });
  confirm.querySelector(".confirm-delete").addEventListener("click", guard(async () => {
    const res = await api("DELETE", `/v1/memories/${encodeURIComponent(doc.id)}`);
    if (!res.ok) { error.textContent = problem(res); return; }
    say("memories-note", "Deleted.");
    await loadMemories({ keepNote: true });
  }));
  return row;
}

// the chain ``docId`` belongs to, oldest first; the current memory is the one nothing superseded
async function showHistory(docId, panel) {
  clear(panel).append(el("p", { class: "note" }, "Loading the history…"));
  const res = await api("GET", `/v1/memories/${encodeURIComponent(docId)}/history`);
  clear(panel);
  if (missingEndpoint(res)) {
    panel.append(el("p", { class: "note" }, "This server cannot show a memory's history (it needs a newer brain)."));
    return;
  }
  if (!res.ok) { panel.append(el("p", { class: "error", role: "alert" }, problem(res))); return; }
  const chain = res.data.history || [];
  panel.append(el("h3", {}, "History", el("span", { class: "small" },
    ` ${chain.length} version${chain.length === 1 ? "" : "s"}, oldest first`)));
  const list = el("ol", { class: "chain" });
  for (const version of chain) {
    const m = version.metadata || {};
    const current = !m.superseded_by && (m.status || "active") !== "superseded";
    const item = el("li", { class: `version status-${m.status || "active"}${current ? " current" : ""}`,
                            "data-id": version.id, "aria-current": current ? "true" : null },
      el("p", { class: "text", text: version.text }));
    const facts = el("ul", { class: "facts" },
      el("li", { class: "valid-from" }, `valid from ${when(m.valid_from || m.created_at || m.timestamp)}`),
      el("li", { class: "valid-until" }, m.valid_until ? `valid until ${when(m.valid_until)}` : "still holds"),
      el("li", { class: "change" }, m.change ? `change ${m.change}` : "first version"),
      el("li", { class: "status" }, `status ${m.status || "active"}`));
    if (m.expires_at) facts.append(el("li", { class: "expires" }, `expires ${when(m.expires_at)}`));
    if (current) item.prepend(el("p", { class: "label" }, el("span", { class: "badge current-badge" }, "current")));
    if (version.id === docId) facts.append(el("li", { class: "this" }, "this memory"));
    item.append(facts);
    list.append(item);
  }
  panel.append(list);
}

// status is a field of the patch where the server takes it there, else a metadata key (both validated)
async function patchMemory(docId, patch) {
  const path = `/v1/memories/${encodeURIComponent(docId)}`;
  const res = await api("PATCH", path, { body: patch });
  const refused = res.status === 422 && ((res.data || {}).problems || []).some((p) => p.field === "status");
  if (!refused || patch.status === undefined) return res;
  const { status, ...rest } = patch;
  return api("PATCH", path, { body: { ...rest, metadata: { status } } });
}

async function loadMemories({ keepNote = false } = {}) {
  const f = memoryFilters();
  const list = $("memory-list");
  const load = ++memories.load;
  say("memories-error", "");
  if (!keepNote) say("memories-note", "");
  let docs;
  let res;
  if (f.q) {
    res = await api("GET", "/v1/memories/search", { query: { q: f.q, k: SEARCH_K, entity: f.entity, tags: f.tag } });
    if (res.ok) {
      // search ranks active memories only, and filters by entity and tag on the server
      docs = res.data.results.filter((hit) =>
        (!f.importance || String(hit.metadata.importance) === f.importance) &&
        (!f.status || f.status === "history" || (hit.metadata.status || "active") === f.status));
    }
  } else {
    res = await api("GET", "/v1/memories", {
      // no status: the current memories; "history": every status
      query: { order: "newest", limit: PAGE_SIZE, offset: memories.offset, entity: f.entity, tags: f.tag,
               importance: f.importance, ...(f.status === "history" ? { history: "true" } : { status: f.status }) },
    });
    if (res.ok) docs = res.data.memories;
  }
  if (load !== memories.load) return;
  memories.searching = Boolean(f.q);
  clear(list);
  if (!res.ok) {
    say("memories-error", problem(res));
    updatePager(0);
    return;
  }
  const scale = Math.max(0, ...docs.map((d) => (f.q ? barLength(d) : 0)));
  for (const doc of docs) list.append(memoryRow(doc, f.q ? doc : null, scale));
  if (!docs.length) list.append(el("li", { class: "empty" }, f.q ? "No memory is relevant enough to this search (the chat context's floor)." : "No memories."));
  if (!keepNote) {
    say("memories-note", f.q ? `${docs.length} ranked by score (similarity + importance + recency)` :
      `newest first, ${docs.length ? `${memories.offset + 1}–${memories.offset + docs.length}` : "none"}`);
  }
  updatePager(docs.length);
}

function updatePager(count) {
  const paging = !memories.searching;
  $("prev-page").disabled = !paging || memories.offset === 0;
  $("next-page").disabled = !paging || count < PAGE_SIZE;
  say("page-label", paging ? `page ${Math.floor(memories.offset / PAGE_SIZE) + 1}` : "");
}

$("memory-filters").addEventListener("submit", guard(async (event) => {
  event.preventDefault();
  memories.offset = 0;
  await loadMemories();
}));
$("memory-filters").addEventListener("reset", () => {
  memories.offset = 0;
  setTimeout(guard(loadMemories), 0); // after the form has cleared its fields
});
$("prev-page").addEventListener("click", guard(async () => {
  memories.offset = Math.max(0, memories.offset - PAGE_SIZE);
  await loadMemories();
}));
$("next-page").addEventListener("click", guard(async () => {
  memories.offset += PAGE_SIZE;
  await loadMemories();
}));

// ---- conversations ------------------------------------------------------------------------------

const conversations = { offset: 0, open: null };

function markOpenConversation() {
  for (const button of document.querySelectorAll(".open-conversation")) {
    button.setAttribute("aria-current", String(button.dataset.id === conversations.open));
  }
}

async function loadConversations() {
  const list = clear($("conversation-list"));
  say("conversations-note", "");
  const res = await api("GET", "/v1/conversations",
    { query: { limit: CONVERSATION_PAGE, offset: conversations.offset } });
  $("conv-prev").disabled = conversations.offset === 0;
  $("conv-next").disabled = true;
  $("conv-pager").hidden = missingEndpoint(res);
  if (missingEndpoint(res)) {
    say("conversations-note", "This server cannot list conversations (it needs a newer brain): open one by id.");
    return;
  }
  if (!res.ok) { say("conversations-note", problem(res)); return; }
  const items = res.data.conversations || [];
  $("conv-next").disabled = items.length < CONVERSATION_PAGE;
  if (!items.length) say("conversations-note", "No conversations yet.");
  for (const c of items) {
    const button = el("button", { type: "button", class: "open-conversation", "data-id": c.conversation_id },
      c.conversation_id);
    button.addEventListener("click", guard(() => openConversation(c.conversation_id)));
    list.append(el("li", { "data-id": c.conversation_id }, button, el("span", { class: "small" },
      ` ${c.entity ? `entity ${c.entity} · ` : ""}${c.turns} turns · ${c.summaries} summaries · ` +
      `last ${when(c.last_activity)}`), formationLine(c.formation)));
  }
  markOpenConversation();
}

// memories still to be formed from a conversation (pending) or that could not be (failed); an older
// server sends no counts, and a conversation with neither needs no line
function formationLine(counts) {
  if (!counts || !(counts.pending || counts.failed)) return null;
  const line = el("span", { class: "small formation" }, "memory formation: ");
  if (counts.pending) line.append(el("span", { class: "badge pending", "data-state": "pending" }, `${counts.pending} pending`));
  if (counts.failed) line.append(el("span", { class: "badge failed", "data-state": "failed" }, `${counts.failed} failed`));
  return line;
}

$("conv-prev").addEventListener("click", guard(async () => {
  conversations.offset = Math.max(0, conversations.offset - CONVERSATION_PAGE);
  await loadConversations();
}));
$("conv-next").addEventListener("click", guard(async () => {
  conversations.offset += CONVERSATION_PAGE;
  await loadConversations();
}));

function turnRange(summary) {
  const match = /^(\d+)-(\d+)$/.exec(String(summary.metadata.turn_range || ""));
  return match ? [Number(match[1]), Number(match[2])] : null;
}

// a summary's window: its memories formed (how many), still pending (waiting for an unreachable model when
// an error is recorded), or failed (with the last error)
function formationBadge(meta) {
  const state = meta.formation;
  if (!state) return null;
  const text = state === "done" ? `memories formed: ${meta.formation_facts ?? 0}` :
    state === "failed" ? `memory formation failed after ${meta.formation_attempts ?? 0} ` +
      `attempt${meta.formation_attempts === 1 ? "" : "s"}` +
      (meta.formation_outcome ? ` (${meta.formation_outcome.replace("_", " ")})` : "") :
    meta.formation_error ? "memory formation waiting for the model" : "memory formation pending";
  return el("span", { class: `badge formation ${state}`, "data-state": state, title: meta.formation_error || "" }, text);
}

async function openConversation(id, { keepResult = false } = {}) {
  say("conversations-error", "");
  if (!keepResult) say("formation-result", "");
  const path = `/v1/conversations/${encodeURIComponent(id)}`;
  const [turns, summaries] = await Promise.all([api("GET", `${path}/turns`), api("GET", `${path}/summaries`)]);
  const items = clear($("conversation-items"));
  if (!turns.ok || !summaries.ok) {
    $("conversation-formation").hidden = true;
    say("conversation-title", "No conversation open");
    say("conversations-error", problem(turns.ok ? summaries : turns));
    return;
  }
  say("conversation-title", `Conversation ${turns.data.conversation_id}`);
  conversations.open = turns.data.conversation_id;
  $("conversation-formation").hidden = !summaries.data.summaries.some(
    (s) => s.metadata.formation === "pending" || s.metadata.formation === "failed");
  markOpenConversation();
  const ordered = [...turns.data.turns].sort((a, b) => (a.metadata.turn_index || 0) - (b.metadata.turn_index || 0));
  const pending = [...summaries.data.summaries].sort(
    (a, b) => (a.metadata.summary_index || 0) - (b.metadata.summary_index || 0));
  const summaryItem = (s) => {
    const range = turnRange(s);
    const fallback = s.metadata.fallback === true;
    return el("li", { class: `summary${fallback ? " fallback" : ""}` },
      el("p", { class: "label" }, range ? `Summary of turns ${range[0]}–${range[1]}` : "Summary",
        fallback ? el("span", { class: "badge", title: s.metadata.fallback_reason || "" },
          "extractive fallback") : null, formationBadge(s.metadata)),
      el("p", { class: "text", text: s.text }),
      s.metadata.formation === "failed" && s.metadata.formation_error ?
        el("p", { class: "small formation-error", text: s.metadata.formation_error }) : null);
  };
  for (const turn of ordered) {
    const m = turn.metadata;
    items.append(el("li", { class: `turn ${m.role}` },
      el("p", { class: "label" }, `${m.turn_index}. ${m.role}`,
        el("span", { class: "small" }, ` ${when(m.timestamp)}`)),
      el("p", { class: "text", text: turn.text })));
    while (pending.length && (turnRange(pending[0]) || [0, Infinity])[1] <= (m.turn_index || 0)) {
      items.append(summaryItem(pending.shift()));
    }
  }
  for (const s of pending) items.append(summaryItem(s));
  if (!ordered.length) items.append(el("li", { class: "empty" }, "This conversation has no turns."));
}

// the report of a formation run, in the words `brain memory extract` uses
function formationReport(r) {
  if (!r.batches.length) return "Nothing to run: no memory formation is pending or failed.";
  const failed = r.batches.filter((b) => b.status !== "done" && b.error).map((b) => ` ${b.turn_range}: ${b.error}`);
  return `${r.batches.length} batch${r.batches.length === 1 ? "" : "es"}: ${r.done} done, ${r.failed} failed, ` +
    `${r.waiting} waiting for the model; ` +
    `${r.added} added, ${r.merged} merged, ${r.updated} updated, ${r.contradicted} contradicted ` +
    `(${r.prompt_tokens} prompt and ${r.eval_tokens} generated tokens, ${fixed(r.seconds)} s)` +
    (failed.length ? `. Not formed:${failed.join(";")}` : "");
}

$("extract-memories").addEventListener("click", guard(async () => {
  const id = conversations.open;
  if (!id) return;
  const button = $("extract-memories");
  button.disabled = true;
  say("formation-result", "Forming memories… (the model answers in its own time)");
  try {
    const res = await api("POST", `/v1/conversations/${encodeURIComponent(id)}/extract`);
    if (missingEndpoint(res)) say("formation-result", "This server cannot form memories (it needs a newer brain).");
    else say("formation-result", res.ok ? formationReport(res.data) : problem(res));
  } finally {
    button.disabled = false;
  }
  await Promise.all([openConversation(id, { keepResult: true }), loadConversations()]);
}));

$("open-conversation").addEventListener("submit", guard(async (event) => {
  event.preventDefault();
  const id = $("conversation-id").value.trim();
  if (id) await openConversation(id);
}));

// ---- knowledge and persona ----------------------------------------------------------------------

// Markdown as written wraps its paragraphs at a fixed width: join a paragraph's lines so the text wraps at
// the page's width; headings, list items, quotes, table rows and code fences keep their own lines
function prose(text) {
  const lines = String(text || "").split("\n");
  const starts = (line) => /^\s*([-*+>|#]|\d+[.)]\s|```)/.test(line);
  const ownLine = (line) => /^\s*(#|\||```)/.test(line);
  return lines.reduce((out, line, i) => {
    if (i === 0) return line;
    const prev = lines[i - 1];
    const join = prev.trim() && line.trim() && !starts(line) && !ownLine(prev);
    return out + (join ? " " : "\n") + line;
  }, "");
}

async function loadKnowledge() {
  const [persona, knowledge] = await Promise.all([api("GET", "/v1/persona"), api("GET", "/v1/knowledge")]);
  const personaBox = clear($("persona"));
  say("persona-note", "");
  if (missingEndpoint(persona)) say("persona-note", "This server cannot show the persona (it needs a newer brain).");
  else if (!persona.ok) say("persona-note", problem(persona));
  else {
    const p = persona.data;
    const from = p.source ? ` · from ${p.source}` : "";
    say("persona-note", p.version ? `version ${p.version}${from}` : "No persona stored.");
    for (const section of p.sections || []) {
      personaBox.append(el("article", { class: "persona-section" },
        el("h4", { text: section.title || "(untitled)" }), el("p", { class: "text", text: prose(section.text) })));
    }
  }
  const kb = clear($("knowledge"));
  say("knowledge-note", "");
  if (missingEndpoint(knowledge)) {
    say("knowledge-note", "This server cannot list the knowledge base (it needs a newer brain).");
    return;
  }
  if (!knowledge.ok) { say("knowledge-note", problem(knowledge)); return; }
  const files = knowledge.data.files || [];
  if (!files.length) say("knowledge-note", "The knowledge base is empty.");
  for (const file of files) {
    const count = (file.topics || []).reduce((n, t) => n + (t.documents || []).length, 0);
    const details = el("details", { class: "kb-file" },
      el("summary", {}, file.kb_file || "(no file)", el("span", { class: "small" }, ` ${count} documents`)));
    for (const topic of file.topics || []) {
      details.append(el("h4", { text: topic.topic || "(no topic)" }));
      const docs = el("ul", { class: "kb-docs" });
      for (const doc of topic.documents || []) docs.append(el("li", { class: "text", text: prose(doc.text) }));
      details.append(docs);
    }
    kb.append(details);
  }
}

// ---- try a message ------------------------------------------------------------------------------

$("try-form").addEventListener("submit", guard(async (event) => {
  event.preventDefault();
  say("try-error", "");
  const body = { user_message: $("try-message").value };
  const entity = $("try-entity").value.trim();
  const conversation = $("try-conversation").value.trim();
  if (entity) body.entity = entity;
  if (conversation) body.conversation_id = conversation;
  const res = await api("POST", "/v1/context", { body });
  const out = clear($("try-result"));
  if (!res.ok) { say("try-error", problem(res)); return; }
  const ctx = res.data;
  out.append(el("p", { class: "note" }, ctx.enabled === false ? "Context is switched off on this server." :
    `${ctx.chars} characters${ctx.tokens != null ? `, ${ctx.tokens} tokens` : ""} in the prompt.`));
  for (const [name, items] of Object.entries(ctx.sections || {})) {
    const section = el("section", { class: `context-section${items.length ? "" : " nothing"}`, "data-section": name },
      el("h3", {}, SECTION_TITLES[name] || name,
        el("span", { class: "small" }, items.length ? ` ${items.length}` : " · nothing")));
    const gate = (ctx.relevance || {})[name];
    if (gate) {
      // empty is an answer: say how many candidates the relevance floor kept out
      section.append(el("p", { class: "small gate" }, `${gate.below_floor} of ${gate.candidates} below the ` +
        `relevance floor ${fixed(gate.floor)}` + (items.length ? "" : ": nothing relevant to this message")));
    }
    const list = el("ol", {});
    const scale = Math.max(0, ...items.map((item) => barLength(item.scores || {})));
    for (const item of items) {
      const li = el("li", { "data-id": item.id }, el("p", { class: "text", text: item.text }));
      const s = item.scores || {};
      if (s.score !== undefined && s.similarity_part !== undefined) li.append(scoreBar(s, scale));
      else if (s.similarity !== undefined) li.append(el("p", { class: "small" }, `similarity ${fixed(s.similarity)}`));
      if (item.why) li.append(el("p", { class: "small why", text: item.why }));
      list.append(li);
    }
    if (items.length) section.append(list);
    out.append(section);
  }
  const dropped = ctx.dropped || [];
  const droppedBox = el("section", { class: "dropped" }, el("h3", {}, "Dropped by the budget"));
  if (!dropped.length) droppedBox.append(el("p", { class: "empty" }, "nothing: everything fit"));
  else {
    const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Section"),
      el("th", { scope: "col" }, "Document"), el("th", { scope: "col" }, "Why"))));
    const rows = el("tbody", {});
    for (const d of dropped) {
      rows.append(el("tr", {}, el("td", { text: SECTION_TITLES[d.section] || d.section }), el("td", { text: d.id }),
        el("td", { text: DROP_REASONS[d.reason] || d.reason })));
    }
    table.append(rows);
    droppedBox.append(table);
  }
  out.append(droppedBox);
  out.append(el("details", { class: "prompt" }, el("summary", {}, "The prompt as rendered"),
    el("pre", { text: ctx.prompt || "(empty)" })));
}));

// ---- forget a person ----------------------------------------------------------------------------

$("forget-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const name = $("forget-entity").value.trim();
  if (!name) return;
  say("forget-error", "");
  say("forget-question", `Forget everything about “${name}”? This cannot be undone.`);
  $("forget-confirm").hidden = false;
  $("forget-yes").focus();
});
$("forget-no").addEventListener("click", () => {
  $("forget-confirm").hidden = true;
  $("forget-entity").focus();
});
$("forget-yes").addEventListener("click", guard(async () => {
  const name = $("forget-entity").value.trim();
  $("forget-confirm").hidden = true;
  const res = await api("DELETE", `/v1/entities/${encodeURIComponent(name)}`);
  const out = clear($("forget-result"));
  if (missingEndpoint(res)) {
    say("forget-error", "This server cannot forget a person (it needs a newer brain).");
    return;
  }
  if (!res.ok) { say("forget-error", problem(res)); return; }
  out.append(el("p", { class: "done" }, `Forgot ${res.data.entity}.`));
  const removed = [["Removed from the store", res.data.deleted], ["Removed from the mirror", res.data.mirror]];
  for (const [title, counts] of removed) {
    if (!counts || typeof counts !== "object") continue;
    out.append(el("h3", { text: title }), objectList(counts));
  }
}));

// ---- store health -------------------------------------------------------------------------------

function objectList(obj) {
  const dl = el("dl", { class: "kv" });
  for (const [key, value] of Object.entries(obj)) {
    dl.append(el("dt", { text: key.replaceAll("_", " ") }));
    const dd = el("dd", { "data-key": key });
    if (value && typeof value === "object" && !Array.isArray(value)) dd.append(objectList(value));
    else if (Array.isArray(value)) dd.textContent = value.length ? value.map((v) =>
      typeof v === "object" ? JSON.stringify(v) : String(v)).join(", ") : "none";
    else dd.textContent = value === null ? "not known yet" : String(value);
    dl.append(dd);
  }
  return dl;
}

async function loadHealth() {
  say("health-error", "");
  // the mirror comparison reads the whole store: only this view asks for it, not the start-up check
  const res = await api("GET", "/v1/health?verify=true");
  const box = clear($("health"));
  if (!res.data || (!res.ok && res.status !== 503)) { say("health-error", problem(res)); return; }
  const h = res.data;
  box.append(el("p", { class: `status-line ${h.status}` }, `Status: ${h.status}`,
    el("span", { class: "small" }, ` · brain ${h.version}`)));
  // expected states (an optional model not running): information in the text colour, not the status's
  for (const note of h.notes || []) box.append(el("p", { class: "note health-note" }, note));
  const order = ["counts", "store", "embedder", "mirror", "summariser", "formation"];
  const titles = { counts: "Documents by type", store: "Store", embedder: "Embedder", mirror: "Mirror (SQLite)",
                   summariser: "Summariser", formation: "Memory formation" };
  for (const key of order.concat(Object.keys(h).filter((k) => !order.includes(k) && typeof h[k] === "object" && !Array.isArray(h[k])))) {
    if (!h[key] || typeof h[key] !== "object") continue;
    box.append(el("section", { class: "health-part", "data-part": key }, el("h3", { text: titles[key] || key }),
      objectList(h[key])));
  }
  if (!h.counts) box.append(el("p", { class: "note" }, "Counts per type need an admin token and a newer brain."));
}

$("health-refresh").addEventListener("click", guard(loadHealth));

start();
