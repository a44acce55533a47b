// ragloop pages: the live run view (index.html) and the dashboard (dashboard.html).
// Plain browser JavaScript, no build step, no third-party code.
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
  // EventSource cannot send headers: the same key goes in a same-site cookie.
  document.cookie = `${KEY_NAME}=${encodeURIComponent(key)}; path=/; SameSite=Strict`;
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (apiKey()) headers["Authorization"] = `Bearer ${apiKey()}`;
  if (options.body && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
  const response = await fetch(path, Object.assign({}, options, { headers }));
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const message = (body && (body.message || body.detail)) || response.statusText;
    const error = new Error(`${response.status}: ${message}`);
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
    $("save-key").addEventListener("click", () => { setApiKey($("api-key").value.trim()); onReady(); });
    if (apiKey()) setApiKey(apiKey());
  }
  onReady();
}

// -- the ask page -----------------------------------------------------------------------

const runView = { source: null, lastSeq: -1, runId: null, citations: [] };

function showError(id, message) {
  const box = $(id);
  box.textContent = message;
  box.hidden = !message;
}

function quote(text) { return `“${text}”`; }

function stepLine(event) {
  const d = event.data || {};
  const kind = event.kind;
  const li = el("li", { class: `step step-${kind}`, dataset: { kind, seq: event.seq, step: event.step } });
  const tag = el("span", { class: "tag" }, kind === "tool_call" ? (d.tool || "tool") : kind);
  li.append(el("span", { class: "stepno" }, `step ${event.step}`), tag);
  if (kind === "route") {
    li.append(` ${d.route}`, el("span", { class: "muted" }, ` — ${d.reason || ""}`));
  } else if (kind === "plan") {
    const subs = (d.sub_questions || []).map(quote).join(", ");
    li.append(d.need_search ? ` sub-questions: ${subs}` : " no search needed");
  } else if (kind === "tool_call" && d.tool === "search_knowledge_base") {
    li.dataset.tool = "search";
    li.append(" ", el("q", {}, d.query || ""));
    if (d.error) li.append(el("span", { class: "error" }, ` error: ${d.error}`));
    else li.append(" ", el("span", { class: "counts" }, `kept ${d.kept ?? "?"}/${d.chunks ?? "?"} chunks`));
  } else if (kind === "tool_call" && d.tool === "fetch_document_section") {
    li.dataset.tool = "fetch";
    li.append(" read ", sectionLink(d.doc_id, d.section, `${d.doc_id} §${d.section}`));
    if (d.error) li.append(el("span", { class: "error" }, ` error: ${d.error}`));
    else if (d.chars !== undefined) li.append(el("span", { class: "muted" }, ` (${d.chars} chars)`));
  } else if (kind === "tool_call") {
    li.append(d.error ? el("span", { class: "error" }, ` error: ${d.error}`)
      : ` ${d.documents ?? ""} documents`);
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
  } else if (kind === "answer") {
    li.append(` ${(d.citations || []).length} citation(s)`);
  } else if (kind === "error") {
    li.append(el("span", { class: "error" }, ` ${d.error}`));
  } else if (kind === "source") {  // several knowledge bases: which ones this part searches
    li.append(` ${(d.knowledge_bases || []).join(", ")}`, el("span", { class: "muted" }, ` — ${d.reason || ""}`));
  }
  return li;
}

function sectionLink(docId, section, label) {
  return el("a", {
    href: `#section=${encodeURIComponent(docId)}|${encodeURIComponent(section)}`,
    class: "section-link", dataset: { doc: docId, section },
    onclick: (e) => { e.preventDefault(); openSection(docId, section); },
  }, label);
}

async function openSection(docId, section) {
  const panel = $("section-panel");
  panel.hidden = false;
  $("section-title").textContent = `${docId} §${section}`;
  $("section-path").textContent = "loading…";
  $("section-text").textContent = "";
  try {
    const s = await api(`/documents/${encodeDocPath(docId)}/sections/${encodeURIComponent(section)}`);
    $("section-title").textContent = `${s.doc_id} §${s.section} ${s.title || ""}`;
    $("section-path").textContent = (s.title_path || []).join(" › ");
    $("section-text").textContent = s.text;
  } catch (err) {
    $("section-path").textContent = "";
    $("section-text").textContent = `Could not load the section: ${err.message}`;
  }
}

function renderAnswer(text, citations) {
  const byN = new Map((citations || []).map((c) => [Number(c.n), c]));
  const box = $("answer");
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
      box.append(c ? el("a", {
        href: "#", class: "cite", dataset: { n, doc: c.doc_id, section: c.section },
        title: `${c.doc_id} §${c.section}`,
        onclick: (e) => { e.preventDefault(); openSection(c.doc_id, c.section); },
      }, String(n)) : String(n));
    });
    box.append("]");
    last = match.index + match[0].length;
  }
  box.append(text.slice(last));
  const list = $("citations");
  list.replaceChildren();
  for (const c of citations || []) {
    list.append(el("li", {}, `[${c.n}] `, sectionLink(c.doc_id, c.section, `${c.doc_id} §${c.section}`)));
  }
  $("answer-box").hidden = false;
}

function setStatus(status) {
  const badge = $("run-status");
  badge.textContent = status;
  badge.className = `badge status-${status}`;
  badge.dataset.status = status;
}

function followRun(runId) {
  if (runView.source) runView.source.close();
  Object.assign(runView, { runId, lastSeq: -1, citations: [] });
  $("run-panel").hidden = false;
  $("steps").replaceChildren();
  $("answer-box").hidden = true;
  $("run-meta").textContent = "";
  $("run-id").textContent = `run ${runId}`;
  setStatus("running");
  const source = new EventSource(`/runs/${encodeURIComponent(runId)}/events`);
  runView.source = source;
  source.addEventListener("step", (message) => {
    const event = JSON.parse(message.data);
    if (event.seq <= runView.lastSeq) return; // a replay after a reconnect
    runView.lastSeq = event.seq;
    $("steps").append(stepLine(event));
    if (event.kind === "answer") renderAnswer(event.data.text || "", event.data.citations || []);
  });
  source.addEventListener("end", async (message) => {
    source.close();
    const end = JSON.parse(message.data);
    setStatus(end.status);
    $("ask-button").disabled = false;
    try {
      const run = await api(`/runs/${encodeURIComponent(runId)}`);
      if (run.answer && $("answer-box").hidden) renderAnswer(run.answer, run.citations);
      const u = run.usage || {};
      $("run-meta").textContent = `status ${run.status} · route ${run.route || "–"} · steps ` +
        `${run.steps}/${run.max_steps} · ${(run.latency_s || 0).toFixed(2)} s · tokens in ` +
        `${u.input_tokens || 0} out ${u.output_tokens || 0} · $${(u.cost_usd || 0).toFixed(4)}` +
        (run.error ? ` · error: ${run.error}` : "");
    } catch (err) {
      $("run-meta").textContent = err.message;
    }
  });
  source.onerror = () => {
    // EventSource reconnects by itself, sending Last-Event-ID; a closed one stays closed.
    if (source.readyState === EventSource.CLOSED) $("ask-button").disabled = false;
  };
}

function initAsk() {
  $("ask-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    showError("form-error", "");
    const body = { question: $("question").value, route: $("route").value };
    const steps = $("max-steps").value;
    if (steps) body.max_steps = Number(steps);
    $("ask-button").disabled = true;
    try {
      const started = await api("/runs", { method: "POST", body: JSON.stringify(body) });
      history.replaceState(null, "", `/?run=${started.run_id}`);
      followRun(started.run_id);
    } catch (err) {
      $("ask-button").disabled = false;
      showError("form-error", err.message);
    }
  });
  $("close-section").addEventListener("click", () => { $("section-panel").hidden = true; });
  const run = new URLSearchParams(location.search).get("run");
  if (run) followRun(run);
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
        el("td", {}, `$${((r.usage || {}).cost_usd || 0).toFixed(4)}`),
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
    if (page === "ask" && !started) { started = true; initAsk(); }
    else if (page === "dashboard") {
      if (!started) { started = true; initDashboard(); } else loadDashboard();
    }
  });
});
