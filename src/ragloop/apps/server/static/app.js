// ragloop pages: the ask page (index.html: a thread of turns, each a run followed live) and
// the dashboard (dashboard.html). Plain browser JavaScript, no build step, no third-party code.
// Every piece of document, question or answer text is put in as text (textContent or text
// nodes), never as HTML: a knowledge base may hold hostile text.
"use strict";

const KEY_NAME = "ragloop_api_key";

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// -- API access -------------------------------------------------------------------------

function apiKey() { return localStorage.getItem(KEY_NAME) || ""; }

function setApiKey(key) {
  localStorage.setItem(KEY_NAME, key);
  // The key goes only in the Authorization header of each request (streams included:
  // streamEvents). A cookie would also be sent to, and readable by, any other server on
  // this host (cookies are not kept apart by port): the one earlier pages set is removed.
  document.cookie = `${KEY_NAME}=; path=/; max-age=0; SameSite=Strict`;
}

function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (apiKey()) headers["Authorization"] = `Bearer ${apiKey()}`;
  return headers;
}

async function api(path, options = {}) {
  const headers = authHeaders(options.headers);
  // a FormData body (an upload) sets its own multipart type and boundary
  if (typeof options.body === "string" && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const message = (body && (body.message || body.detail)) || response.statusText;
    const error = new Error(`${response.status}: ${typeof message === "string" ? message : JSON.stringify(message)}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function encodeDocPath(docId) {
  return docId.split("/").map(encodeURIComponent).join("/");
}

async function setupAuth(onReady) {
  let health = { auth_required: false };
  try { health = await (await fetch("/healthz")).json(); } catch (_) { /* shown below */ }
  const box = $("auth");
  if (health.auth_required) {
    box.hidden = false;
    $("api-key").value = apiKey();
    // saved: the page starts again, so that what it read without the key is read with it
    $("save-key").addEventListener("click", () => { setApiKey($("api-key").value.trim()); location.reload(); });
    if (apiKey()) setApiKey(apiKey());
  }
  onReady();
}

function showError(id, message) {
  const box = $(id);
  box.textContent = message;
  box.hidden = !message;
}

// -- following a run: Server-Sent Events read with fetch ---------------------------------

// EventSource cannot send an Authorization header, so the stream is read with fetch (the
// key in the header, never in the URL or a cookie). As EventSource does, it reconnects after
// a dropped connection with Last-Event-ID, so the server replays only what was missed; an
// HTTP error (401, 404) ends it. `on(name, data)` hears each event; returns { close() }.
const RECONNECT_MS = 1000;
const MAX_RECONNECTS = 30;

function streamEvents(path, on, onStop) {
  const control = new AbortController();
  let lastId = null;
  let ended = false;
  const stop = (error) => { if (!ended) { ended = true; control.abort(); onStop(error); } };

  async function readOnce() {
    const headers = authHeaders({ Accept: "text/event-stream" });
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    const response = await fetch(path, { headers, signal: control.signal, cache: "no-store" });
    if (!response.ok) {
      let message = response.statusText;
      try { message = (await response.json()).message || message; } catch (_) { /* as is */ }
      const error = new Error(`${response.status}: ${message}`);
      error.fatal = true;
      throw error;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let event = { name: "message", data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r\n|\r|\n/)) >= 0) {
        if (cut === buffer.length - 1 && buffer[cut] === "\r") break; // its \n may follow
        const line = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer.startsWith("\r\n", cut) ? 2 : 1));
        if (line === "") { // a blank line ends an event (the spec's dispatch)
          if (event.id !== null) lastId = event.id;
          if (event.data.length) on(event.name, event.data.join("\n"));
          if (ended) return;
          event = { name: "message", data: [], id: null };
          continue;
        }
        if (line.startsWith(":")) continue; // a comment: the server's keep-alive ping
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        if (field === "event") event.name = text;
        else if (field === "data") event.data.push(text);
        else if (field === "id") event.id = text;
      }
    }
  }

  (async () => {
    for (let tries = 0; !ended && tries <= MAX_RECONNECTS; tries++) {
      try {
        await readOnce();
        tries = 0; // the connection worked: a drop after it starts the count again
      } catch (error) {
        if (ended || error.name === "AbortError") return;
        if (error.fatal) { stop(error); return; }
      }
      if (!ended) await new Promise((r) => setTimeout(r, RECONNECT_MS));
    }
    stop(new Error("the run's event stream was lost"));
  })();
  return { close: () => stop(null) };
}

// -- the section panel: a cited section with the cited sentence marked ------------------

// Whitespace-insensitive search: the quote comes from a chunk, whose spacing may differ
// from the section's (line breaks of the source file, collapsed runs of spaces).
function squeeze(text) {
  const chars = [];
  const index = [];
  let space = false;
  for (let i = 0; i < text.length; i++) {
    if (/\s/.test(text[i])) {
      if (!space && chars.length) { chars.push(" "); index.push(i); }
      space = true;
    } else {
      chars.push(text[i]); index.push(i); space = false;
    }
  }
  return { text: chars.join(""), index };
}

function words(text) { return new Set((text.toLowerCase().match(/[\p{L}\p{N}]+/gu) || [])); }

// The [start, end) of `quote` in `text`: verbatim (spacing and case aside), else the
// sentence of the text that shares most words with it (at least half of the quote's).
function locateQuote(text, quote) {
  const q = squeeze(quote.trim()).text.replace(/\s*\[\d+(?:\s*,\s*\d+)*\]\s*/g, " ").trim();
  if (!q) return null;
  const t = squeeze(text);
  let at = t.text.indexOf(q);
  if (at < 0) at = t.text.toLowerCase().indexOf(q.toLowerCase());
  if (at >= 0) return [t.index[at], t.index[at + q.length - 1] + 1];
  const wanted = words(q);
  let best = null, bestScore = 0;
  const sentence = /[^.!?。！？\n]+[.!?。！？]*/gu;
  for (const m of text.matchAll(sentence)) {
    const have = words(m[0]);
    let shared = 0;
    for (const w of wanted) if (have.has(w)) shared++;
    const score = wanted.size ? shared / wanted.size : 0;
    if (score > bestScore) { bestScore = score; best = m; }
  }
  if (!best || bestScore < 0.5) return null;
  const lead = best[0].length - best[0].trimStart().length;
  return [best.index + lead, best.index + best[0].trimEnd().length];
}

let sectionOpener = null; // the control that opened the panel: focus returns to it

// `kb`: the knowledge base a citation names when several are served (a doc id may be in two)
async function openSection(docId, section, quote, opener, kb) {
  const panel = $("section-panel");
  sectionOpener = opener || null;
  panel.hidden = false;
  $("layout").classList.add("with-section");
  $("section-title").textContent = `${docId} §${section}`;
  $("section-path").textContent = "loading…";
  $("section-quote-note").hidden = true;
  const box = $("section-text");
  box.replaceChildren();
  $("section-title").focus();
  try {
    const where = kb ? `?knowledge_base=${encodeURIComponent(kb)}` : "";
    const s = await api(`/documents/${encodeDocPath(docId)}/sections/${encodeURIComponent(section)}${where}`);
    $("section-title").textContent = `${s.doc_id} §${s.section} ${s.title || ""}`;
    $("section-path").textContent = (s.title_path || []).join(" › ");
    const span = quote ? locateQuote(s.text, quote) : null;
    if (span) {
      const mark = el("mark", { class: "cited" }, s.text.slice(span[0], span[1]));
      box.append(s.text.slice(0, span[0]), mark, s.text.slice(span[1]));
      box.scrollTop = Math.max(0, mark.offsetTop - box.clientHeight / 3);
    } else {
      box.append(s.text);
      if (quote) {
        $("section-quote-note").textContent = "The cited sentence could not be found in this section.";
        $("section-quote-note").hidden = false;
      }
    }
  } catch (err) {
    $("section-path").textContent = "";
    box.textContent = `Could not load the section: ${err.message}`;
  }
}

function closeSection() {
  $("section-panel").hidden = true;
  $("layout").classList.remove("with-section");
  if (sectionOpener && document.contains(sectionOpener)) sectionOpener.focus();
  sectionOpener = null;
}

function sectionButton(docId, section, label, quote, cls, kb) {
  const button = el("button", {
    type: "button", class: cls || "section-link", dataset: { doc: docId, section, kb: kb || undefined },
    title: `${docId} §${section}${kb ? ` (${kb})` : ""}`,
  }, label);
  button.addEventListener("click", () => openSection(docId, section, quote, button, kb));
  return button;
}

// -- one turn: its question, the answer (streamed), its sources, its steps ---------------

function quote(text) { return `“${text}”`; }

// One piece of a tool call's line as the server sends it (`shown.pieces`): plain text, a
// quote, a span of its class, or a button opening a section.
function shownPiece(p) {
  if (p.as === "quote") return el("q", {}, p.text);
  if (p.as === "section") return sectionButton(p.doc_id, p.section, p.text);
  if (p.as) return el("span", { class: p.as }, p.text);
  return document.createTextNode(p.text);
}

function stepLine(event) {
  const d = event.data || {};
  const kind = event.kind;
  const li = el("li", { class: `step step-${kind}`, dataset: { kind, seq: event.seq, step: event.step } });
  const tag = el("span", { class: "tag" }, kind === "tool_call" ? (d.tool || "tool") : kind);
  li.append(el("span", { class: "stepno" }, `step ${event.step}`), tag);
  if (kind === "route") {
    li.append(` ${d.route}`, el("span", { class: "muted" }, ` — ${d.reason || ""}`));
  } else if (kind === "condense") {
    li.append(` ${d.turn_kind || ""}: searched as `, el("q", {}, d.standalone || ""));
    if (d.reason) li.append(el("span", { class: "muted" }, ` — ${d.reason}`));
  } else if (kind === "plan") {
    const subs = (d.sub_questions || []).map(quote).join(", ");
    li.append(d.need_search ? ` sub-questions: ${subs}` : " no search needed");
  } else if (kind === "tool_call") {  // its line is made on the server (page_steps.py)
    const shown = event.shown || { pieces: [] };
    if (shown.tool) li.dataset.tool = shown.tool;
    for (const p of shown.pieces) li.append(shownPiece(p));
  } else if (kind === "grade") {
    li.append(` kept ${d.kept}/${d.chunks} for `, el("q", {}, d.query || ""),
      el("span", { class: d.enough ? "ok" : "warn" }, d.enough ? " — enough" : " — not enough"));
    if (d.missing) li.append(el("span", { class: "muted" }, ` missing: ${d.missing}`));
    if ((d.verdicts || []).length) {
      const list = el("ul", { class: "verdicts" });
      for (const v of d.verdicts) {
        const score = typeof v.score === "number" ? ` ${v.score.toFixed(2)}` : "";
        list.append(el("li", { class: v.verdict === "relevant" ? "ok" : "discarded" },
          `${v.doc_id} §${v.section}: ${v.verdict}${score}`));
      }
      li.append(list);
    }
  } else if (kind === "rewrite") {
    li.append(" → ", el("q", {}, d.query || "(nothing new)"),
      el("span", { class: "muted" }, d.missing ? ` from the gap: ${d.missing}` : ""));
  } else if (kind === "clarify") {
    li.append(" asked: ", el("q", {}, d.question || ""),
      el("span", { class: "muted" }, ` (${(d.options || []).length} options)`));
  } else if (kind === "answer") {
    li.append(` ${(d.citations || []).length} citation(s)`);
  } else if (kind === "error") {
    li.append(el("span", { class: "error" }, ` ${d.error}`));
  } else if (kind === "placement") {  // why each document holds its place in the evidence
    const places = d.places || [];
    li.append(` ${plural(places.length, "document", "documents")} in order`);
    if (places.length) {
      const list = el("ol", { class: "verdicts" });
      // runs stored before `reason` existed carry only the codes
      for (const p of places) list.append(el("li", {}, `${p.doc_id}`, el("span", { class: "muted" }, ` — ${p.reason || (p.why || []).join(", ")}`)));
      li.append(list);
    }
  } else if (kind === "source") {  // several knowledge bases: which ones this part searches
    li.append(` ${(d.knowledge_bases || []).join(", ")}`, el("span", { class: "muted" }, ` — ${d.reason || ""}`));
  }
  return li;
}

function plural(n, one, many) { return `${n} ${n === 1 ? one : many}`; }

// A run's usage, as core/types.py usage_summary says it: a model call that reported none
// (llama-cpp-python's streamed replies) makes it unknown, never 0 tokens / $0.
function usageText(usage) {
  const u = usage || {};
  if (u.unmeasured) {
    return `usage unknown (${u.unmeasured} of ${plural(u.calls || u.unmeasured, "model call",
      "model calls")} reported none)`;
  }
  return `tokens in ${u.input_tokens || 0} out ${u.output_tokens || 0} · ` +
    `$${(u.cost_usd || 0).toFixed(4)}`;
}

class Turn {
  constructor(question) {
    this.question = question;
    this.runId = null;
    this.lastSeq = -1;
    this.source = null;
    this.streamed = "";     // the answer as streamed, before its check
    this.final = false;     // the checked answer event has arrived
    this.clarified = false;
    this.clarifyQuestion = "";
    this.userToggled = false;
    this.counts = { steps: 0, searches: 0, kept: 0 };
    this.keptIds = new Set();
    this.keptUnnamed = 0; // kept by a grade that does not name its chunks
    const n = document.querySelectorAll("#thread .turn").length + 1;
    this.status = el("span", { class: "badge run-status", role: "status" });
    this.standalone = el("p", { class: "standalone muted", hidden: "" });
    this.answer = el("div", { class: "answer", "aria-live": "polite", "aria-busy": "true",
      "aria-label": "Answer" });
    this.checkNote = el("p", { class: "check-note", hidden: "" });
    this.clarify = el("div", { class: "clarify", "aria-live": "polite", hidden: "" });
    this.sources = el("ol", { class: "sources" });
    this.sourcesBox = el("div", { class: "sources-box", hidden: "" },
      el("h3", {}, "Sources"), this.sources);
    this.closest = el("div", { class: "closest-box", hidden: "" });
    this.meta = el("p", { class: "run-meta muted" });
    this.summary = el("summary", { class: "steps-summary" }, "working…");
    this.steps = el("ol", { class: "steps" });
    this.details = el("details", { class: "steps-box", open: "" }, this.summary, this.steps);
    this.summary.addEventListener("click", () => { this.userToggled = true; });
    this.root = el("article", { class: "card turn", dataset: { turn: n } },
      el("div", { class: "turn-head" },
        el("h2", { class: "turn-question" }, question), this.status),
      this.standalone,
      el("section", { class: "answer-box", "aria-label": `Answer ${n}` },
        this.answer, this.checkNote, this.clarify, this.sourcesBox, this.closest, this.meta),
      this.details);
    this.setStatus("queued");
  }

  setStatus(status) {
    this.status.textContent = status.replace("_", " ");
    this.status.className = `badge run-status status-${status}`;
    this.status.dataset.status = status;
    this.root.dataset.status = status;
  }

  setStandalone(typed, standalone) {
    if (!standalone || standalone.trim() === (typed || this.question).trim()) return;
    this.standalone.replaceChildren("Searched as ", el("q", {}, standalone));
    this.standalone.hidden = false;
  }

  // The steps fold into their one-line summary once the answer starts (unless the user
  // opened or closed them by hand).
  answerStarted() {
    if (!this.userToggled) this.details.open = false;
  }

  // Passages kept over the run, each once: a passage kept by two searches is one passage.
  // A grade lists the kept chunks first among its verdicts (or as kept_ids).
  countKept(d) {
    const ids = d.kept_ids || (d.verdicts || []).slice(0, d.kept || 0).map((v) => v.chunk_id);
    if (ids.length === (d.kept || 0) && ids.every((id) => id !== undefined && id !== null)) {
      for (const id of ids) this.keptIds.add(id);
      this.counts.kept = this.keptIds.size + this.keptUnnamed;
    } else {
      this.keptUnnamed += d.kept || 0;
      this.counts.kept = this.keptIds.size + this.keptUnnamed;
    }
  }

  updateSummary(running) {
    const c = this.counts;
    const text = `${plural(c.steps, "step", "steps")} · ${plural(c.searches, "search", "searches")}` +
      ` · ${plural(c.kept, "passage", "passages")} kept`;
    this.summary.textContent = running ? `${text} · working…` : text;
  }

  onEvent(event) {
    const d = event.data || {};
    if (event.kind === "answer_delta") {
      if (this.final) return;
      if (d.reset) { // what was streamed since the last reset is not the answer: drop it
        this.streamed = "";
        this.answer.replaceChildren();
      }
      if (!d.text) return;
      if (!this.streamed) this.answerStarted();
      this.streamed += d.text;
      this.answer.append(d.text);
      this.answer.classList.add("streaming");
      return;
    }
    this.counts.steps = Math.max(this.counts.steps, event.step || 0);
    if (event.kind === "tool_call" && d.tool === "search_knowledge_base") this.counts.searches++;
    if (event.kind === "grade") this.countKept(d);
    this.steps.append(stepLine(event));
    this.updateSummary(true);
    if (event.kind === "condense") this.setStandalone(d.typed, d.standalone);
    else if (event.kind === "answer") this.renderAnswer(d);
    else if (event.kind === "clarify") this.renderClarify(d);
  }

  renderAnswer(d) {
    this.final = true;
    this.answerStarted();
    const text = d.text || "";
    // a run that asks back carries its question as the answer too (for clients that know
    // only answers): here the question and its options stand in the answer's place
    this.answer.hidden = this.clarified && text.trim() === this.clarifyQuestion;
    const citations = d.citations || [];
    const byN = new Map(citations.map((c) => [Number(c.n), c]));
    const box = this.answer;
    box.classList.remove("streaming");
    box.replaceChildren();
    const pattern = /\[(\d+(?:\s*,\s*\d+)*)\]/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      box.append(text.slice(last, match.index));
      const numbers = match[1].split(",").map((s) => Number(s.trim()));
      box.append("[");
      numbers.forEach((n, i) => {
        if (i) box.append(", ");
        const c = byN.get(n);
        box.append(c ? sectionButton(c.doc_id, c.section, String(n),
          c.quote || citingSentence(text, match.index), "cite", c.kb) : String(n));
      });
      box.append("]");
      last = match.index + match[0].length;
    }
    box.append(text.slice(last));
    box.setAttribute("aria-busy", "false");
    this.sources.replaceChildren();
    for (const c of citations) {
      const item = el("li", { value: c.n },
        sectionButton(c.doc_id, c.section, `${c.doc_id} §${c.section}${c.kb ? ` (${c.kb})` : ""}`,
          c.quote || citingSentence(text, text.indexOf(`[${c.n}]`)), undefined, c.kb));
      if (c.quote) item.append(el("span", { class: "source-quote" }, ` ${quote(c.quote)}`));
      this.sources.append(item);
    }
    this.sourcesBox.hidden = citations.length === 0;
    this.renderCheckNote(d);
    this.renderClosest(d.closest || []);
  }

  // What the citation check took out, said beside the checked text (which replaced the
  // streamed one).
  renderCheckNote(d) {
    const parts = [];
    const invalid = d.invalid_citations || [];
    if (invalid.length) {
      parts.push(`The check removed citation${invalid.length > 1 ? "s" : ""} ` +
        `${invalid.map((n) => `[${n}]`).join(" ")}: not a passage the grader kept.`);
    }
    for (const u of d.unsupported || []) {
      parts.push(`The check removed [${u.n}] from ${quote(u.sentence)}: the passage does not support it.`);
    }
    if (d.citations_unchecked) parts.push("The citations could not be checked against their passages.");
    const changed = d.changed_by_check || (this.streamed && this.streamed.trim() !== (d.text || "").trim());
    if (changed && !parts.length) parts.push("The check changed the answer as streamed: this is the checked text.");
    this.checkNote.replaceChildren(...parts.map((p) => el("span", {}, p, " ")));
    this.checkNote.hidden = parts.length === 0;
  }

  renderClosest(closest) {
    this.closest.replaceChildren();
    if (!closest.length) { this.closest.hidden = true; return; }
    const list = el("ul", { class: "closest" });
    for (const c of closest) {
      list.append(el("li", {}, sectionButton(c.doc_id, c.section, `${c.doc_id} §${c.section}`, c.text,
        undefined, c.kb),
        el("span", { class: "muted" }, ` ${quote(c.text || "")}`)));
    }
    this.closest.append(el("h3", {}, "Closest passages (not confirmed)"), list);
    this.closest.hidden = false;
  }

  renderClarify(d) {
    if (this.clarified) return;
    this.clarified = true;
    this.clarifyQuestion = (d.question || "").trim();
    if (this.final && this.answer.textContent.trim() === this.clarifyQuestion) this.answer.hidden = true;
    this.answerStarted();
    const options = d.options || [];
    const group = el("div", { class: "options", role: "group", "aria-label": d.question || "Options" });
    for (const option of options) {
      const button = el("button", { type: "button", class: "option" }, option);
      button.addEventListener("click", () => {
        for (const b of group.querySelectorAll("button")) b.disabled = true;
        button.classList.add("chosen");
        askFollowUp(option);
      });
      group.append(button);
    }
    this.clarify.replaceChildren(el("p", { class: "clarify-question" }, d.question || ""), group);
    this.clarify.hidden = false;
    this.answer.setAttribute("aria-busy", "false");
  }

  // Where the keyboard goes once the turn ended: its first option, else the follow-up box.
  focusNext() {
    const option = this.clarify.querySelector("button:not([disabled])");
    (option || $("followup")).focus();
  }

  async finish(end) {
    this.setStatus(end.status || "unknown");
    this.updateSummary(false);
    this.answer.setAttribute("aria-busy", "false");
    this.answer.classList.remove("streaming");
    try {
      const run = await api(`/runs/${encodeURIComponent(this.runId)}`);
      if (run.answer && !this.final) this.renderAnswer({ text: run.answer, citations: run.citations });
      if (run.clarification && !this.clarified) this.renderClarify(run.clarification);
      this.meta.textContent = `status ${run.status} · route ${run.route || "–"} · steps ` +
        `${run.steps}/${run.max_steps} · ${(run.latency_s || 0).toFixed(2)} s · ` +
        usageText(run.usage) + (run.error ? ` · error: ${run.error}` : "");
    } catch (err) {
      this.meta.textContent = err.message;
    }
  }

  // Follows the run's events over SSE (replayed from the store when it is finished);
  // resolves when the run has ended.
  follow(runId) {
    this.runId = runId;
    this.root.dataset.run = runId;
    this.setStatus("running");
    return new Promise((resolve) => {
      let finished = false;
      const source = streamEvents(`/runs/${encodeURIComponent(runId)}/events`, (name, data) => {
        if (name === "step") {
          const event = JSON.parse(data);
          if (event.seq <= this.lastSeq) return; // a replay after a reconnect
          this.lastSeq = event.seq;
          this.onEvent(event);
        } else if (name === "answer_delta") {
          // The answer's pieces come as their own SSE event, without an id: they are not
          // stored and share the seq of the step they precede (a follower resuming
          // mid-answer gets a reset, then the pieces again).
          this.onEvent(Object.assign({ kind: "answer_delta" }, JSON.parse(data)));
        } else if (name === "end") {
          finished = true;
          source.close();
          this.finish(JSON.parse(data)).then(resolve);
        }
      }, (error) => {
        if (finished) return;
        if (error) { this.setStatus("unknown"); this.meta.textContent = error.message; }
        resolve();
      });
      this.source = source;
    });
  }
}

// The answer's sentence that holds the citation at `at`: what the section is searched for
// when the citation carries no quote of its own (runs stored before citations had one).
function citingSentence(text, at) {
  if (at < 0) return "";
  const before = text.slice(0, at);
  const start = Math.max(before.lastIndexOf(". "), before.lastIndexOf("\n")) + 1;
  return before.slice(start).trim();
}

// -- the thread: turns of one conversation ---------------------------------------------

const thread = { conversationId: null, turns: [], busy: false };

function setBusy(busy) {
  thread.busy = busy;
  $("ask-button").disabled = busy;
  $("followup-button").disabled = busy;
  $("followup-box").hidden = busy || thread.turns.length === 0;
}

function clearThread() {
  for (const t of thread.turns) if (t.source) t.source.close();
  thread.turns = [];
  thread.conversationId = null;
  $("thread").replaceChildren();
  $("followup-box").hidden = true;
}

function addTurn(question) {
  const turn = new Turn(question);
  thread.turns.push(turn);
  $("thread").append(turn.root);
  return turn;
}

function remember() {
  const last = thread.turns[thread.turns.length - 1];
  const query = thread.conversationId ? `?conversation=${encodeURIComponent(thread.conversationId)}`
    : last && last.runId ? `?run=${encodeURIComponent(last.runId)}` : "";
  history.replaceState(null, "", `/${query}`);
}

function askBody(question) {
  const body = { question, route: $("route").value };
  const steps = $("max-steps").value;
  if (steps) body.max_steps = Number(steps);
  // every question of the page is a turn of a conversation: "new" starts one
  body.conversation_id = thread.conversationId || "new";
  return body;
}

// Starts one turn of the current conversation (a new one when there is none).
async function askTurn(question, errorId) {
  showError(errorId, "");
  setBusy(true);
  let started;
  try {
    started = await api("/runs", { method: "POST", body: JSON.stringify(askBody(question)) });
  } catch (err) {
    setBusy(false);
    showError(errorId, err.message);
    return false;
  }
  if (started.conversation_id) thread.conversationId = started.conversation_id;
  const turn = addTurn(question);
  turn.runId = started.run_id;
  remember();
  await turn.follow(started.run_id);
  setBusy(false);
  turn.focusNext();
  loadConversations();
  return true;
}

function askFollowUp(question) {
  if (thread.busy) return Promise.resolve(false);
  return askTurn(question, "followup-error");
}

async function openConversation(id) {
  clearThread();
  showError("form-error", "");
  let conversation;
  try {
    conversation = await api(`/conversations/${encodeURIComponent(id)}`);
  } catch (err) {
    showError("form-error", `Could not open the conversation: ${err.message}`);
    return;
  }
  thread.conversationId = conversation.id || conversation.conversation_id || id;
  remember();
  markCurrentConversation();
  setBusy(true);
  // one turn at a time: each replays its run's events from the store and ends
  for (const t of conversation.turns || []) {
    const turn = addTurn(t.question);
    turn.setStandalone(t.question, t.standalone);
    if (t.run_id) await turn.follow(t.run_id);
    else {
      if (t.answer) turn.renderAnswer({ text: t.answer, citations: t.citations || [] });
      turn.setStatus(t.status || "unknown");
    }
  }
  setBusy(false);
}

function conversationLabel(c) {
  const turns = c.turns;
  const first = c.title || c.question || c.first_question ||
    (Array.isArray(turns) && turns.length ? turns[0].question : "") || "(no question yet)";
  const count = Array.isArray(turns) ? turns.length : (c.turn_count ?? c.n_turns ?? turns);
  return { first, count: typeof count === "number" ? count : null };
}

function markCurrentConversation() {
  for (const b of document.querySelectorAll("#conversations button")) {
    if (b.dataset.conversation === thread.conversationId) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
}

// The list of conversations (GET /conversations); hidden on a server without them.
async function loadConversations() {
  let body;
  try {
    body = await api("/conversations");
  } catch (_) {
    $("conversations-box").hidden = true;
    return;
  }
  const items = Array.isArray(body) ? body : (body.conversations || []);
  const list = $("conversations");
  list.replaceChildren();
  for (const c of items) {
    const id = c.id || c.conversation_id;
    if (!id) continue;
    const { first, count } = conversationLabel(c);
    const button = el("button", { type: "button", class: "conversation", title: first,
      dataset: { conversation: id } }, el("span", { class: "title" }, first),
    count === null ? null : el("span", { class: "muted" }, plural(count, "turn", "turns")));
    button.addEventListener("click", () => { if (!thread.busy) openConversation(id); });
    list.append(el("li", {}, button));
  }
  $("conversations-box").hidden = false;
  $("layout").classList.add("with-conversations");
  markCurrentConversation();
}

function initAsk() {
  $("ask-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    if (thread.busy) return;
    const question = $("question").value;
    clearThread();
    markCurrentConversation();
    await askTurn(question, "form-error");
  });
  $("followup-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const question = $("followup").value;
    if (await askFollowUp(question)) $("followup").value = "";
  });
  $("new-conversation").addEventListener("click", () => {
    if (thread.busy) return;
    clearThread();
    markCurrentConversation();
    history.replaceState(null, "", "/");
    $("question").value = "";
    $("question").focus();
  });
  $("close-section").addEventListener("click", closeSection);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !$("section-panel").hidden) closeSection();
  });
  loadConversations();
  const params = new URLSearchParams(location.search);
  if (params.get("conversation")) openConversation(params.get("conversation"));
  else if (params.get("run")) {
    const turn = addTurn("");
    setBusy(true);
    api(`/runs/${encodeURIComponent(params.get("run"))}`)
      .then((run) => {
        turn.root.querySelector(".turn-question").textContent = run.question;
        // a turn of a conversation: a follow-up continues that conversation
        if (run.conversation_id) thread.conversationId = run.conversation_id;
      })
      .catch(() => { /* the events say what is wrong */ });
    turn.follow(params.get("run")).then(() => setBusy(false));
  }
}

// -- adding documents (POST /documents) ---------------------------------------------------

async function initUpload() {
  // several knowledge bases served: the user chooses the one the files go to (the server
  // refuses an upload naming none); one KB served alone has no name and no selector
  try {
    const served = (await api("/knowledge_bases")).knowledge_bases || [];
    if (served.length > 1) {
      const select = $("upload-kb");
      select.required = true;
      select.append(el("option", { value: "" }, "choose…"),
        ...served.map((k) => el("option", { value: k.name, title: k.description || "" }, k.name)));
      $("upload-kb-label").hidden = false;
    }
  } catch (_) { /* the upload's own error says what is wrong */ }
  $("upload-box").dataset.ready = "true";
  $("upload-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = new FormData();
    for (const file of $("upload-files").files) form.append("files", file);
    if (!$("upload-kb-label").hidden) form.append("knowledge_base", $("upload-kb").value);
    $("upload-button").disabled = true;
    $("upload-error").hidden = true;
    $("upload-result").textContent = "uploading…";
    try {
      const r = await api("/documents", { method: "POST", body: form });
      const into = r.kb ? ` into ${r.kb}` : "";
      $("upload-result").textContent =
        `${r.added} added, ${r.updated} updated, ${r.unchanged} unchanged${into}` +
        ((r.conflicts || []).length ? `; ${r.conflicts.length} not replaced (not from an upload)` : "");
      $("upload-files").value = "";
    } catch (err) {
      $("upload-result").textContent = "";
      showError("upload-error", err.message);
    } finally {
      $("upload-button").disabled = false;
    }
  });
}

// -- the dashboard ----------------------------------------------------------------------

function barChart(svg, values, format, colorFor) {
  const width = 600, height = 140, pad = 4;
  svg.setAttribute("viewBox", `0 0 ${width} ${height + 16}`);
  svg.replaceChildren();
  const ns = "http://www.w3.org/2000/svg";
  const max = Math.max(...values.map((v) => v.value), 1e-9);
  const w = values.length ? (width - pad) / values.length : width;
  values.forEach((v, i) => {
    const h = Math.max(1, (v.value / max) * height);
    const rect = document.createElementNS(ns, "rect");
    rect.setAttribute("x", pad + i * w);
    rect.setAttribute("y", height - h);
    rect.setAttribute("width", Math.max(1, w - 2));
    rect.setAttribute("height", h);
    rect.setAttribute("class", colorFor ? colorFor(v) : "bar");
    const title = document.createElementNS(ns, "title");
    title.textContent = `${v.label}: ${format(v.value)}`;
    rect.append(title);
    svg.append(rect);
  });
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", width - pad);
  label.setAttribute("y", height + 14);
  label.setAttribute("text-anchor", "end");
  label.setAttribute("class", "axis");
  label.textContent = values.length ? `max ${format(max)} · oldest → newest` : "no runs yet";
  svg.append(label);
}

function setMetric(id, text, warn) {
  const box = $(id);
  box.querySelector(".value").textContent = text;
  box.classList.toggle("warn", Boolean(warn));
}

async function loadDashboard() {
  showError("dash-error", "");
  try {
    const [m, list] = await Promise.all([api("/metrics"), api("/runs?limit=100&source=default")]);
    setMetric("m-runs", String(m.runs));
    setMetric("m-steps", m.mean_steps.toFixed(2));
    setMetric("m-all-steps", `${m.used_all_steps_pct.toFixed(1)}%`, m.warn_used_all_steps);
    setMetric("m-truncated", `${m.truncated_pct.toFixed(1)}%`, m.truncated_pct > m.truncated_warn_pct);
    setMetric("m-discarded", `${m.discarded_pct.toFixed(1)}%`);
    setMetric("m-latency", `${m.mean_latency_s.toFixed(2)} s (${m.p95_latency_s.toFixed(2)} s)`);
    setMetric("m-cost", `$${m.mean_cost_usd.toFixed(4)}`);
    const runs = list.runs.slice().reverse();
    const done = runs.filter((r) => r.status !== "running");
    const cls = (v) => `bar status-${v.status}`;
    barChart($("chart-latency"), done.map((r) => ({ label: r.run_id, status: r.status, value: r.latency_s || 0 })),
      (x) => `${x.toFixed(2)} s`, cls);
    barChart($("chart-cost"), done.map((r) => ({ label: r.run_id, status: r.status, value: (r.usage || {}).cost_usd || 0 })),
      (x) => `$${x.toFixed(4)}`, cls);
    barChart($("chart-steps"), done.map((r) => ({ label: r.run_id, status: r.status, value: r.steps || 0 })),
      (x) => x.toFixed(0), cls);
    const body = $("runs-table").querySelector("tbody");
    body.replaceChildren();
    for (const r of list.runs) {
      body.append(el("tr", { dataset: { run: r.run_id } },
        el("td", {}, el("a", { href: `/?run=${encodeURIComponent(r.run_id)}` }, r.run_id)),
        el("td", {}, el("span", { class: `badge status-${r.status}` }, r.status)),
        el("td", {}, r.route || ""),
        el("td", {}, `${r.steps}/${r.max_steps}`),
        el("td", {}, r.latency_s == null ? "" : `${r.latency_s.toFixed(2)} s`),
        el("td", {}, (r.usage || {}).unmeasured ? "unknown"
          : `$${((r.usage || {}).cost_usd || 0).toFixed(4)}`),
        el("td", { class: "question" }, r.question)));
    }
  } catch (err) {
    showError("dash-error", err.message);
  }
}

function initDashboard() {
  loadDashboard();
  setInterval(loadDashboard, 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  let started = false;
  setupAuth(() => {
    if (page === "ask" && !started) { started = true; initAsk(); initUpload(); }
    else if (page === "dashboard") {
      if (!started) { started = true; initDashboard(); } else loadDashboard();
    }
  });
});
