// ctxgate's manifest explorer (docs/ops.md, "Explorer").
//
// Framework-free vanilla JS on purpose: the files ship inside the Python package and are
// served as they are, so there is no build step at install time; no third-party code means
// nothing to pin, audit or update (no supply chain into a page that holds an ops key); and
// the whole page is a few hundred lines a reviewer can read.
//
// Safety rule: every value from the API reaches the DOM as text — el() appends strings as
// Text nodes and sets properties, never markup. There is no innerHTML, outerHTML,
// insertAdjacentHTML or document.write here, and the page's CSP requires Trusted Types, so
// such a sink would throw instead of parsing data as HTML.
"use strict";

// The ops key lives in sessionStorage (gone with the tab, never in a URL, never a cookie) and
// leaves only as an Authorization header to this origin.
const KEY = "ctxgate.ops.key";
// The order the turn runs its stages in (app/service/assemble.py, app/core/pipeline.py):
// a stored manifest's timings_ms comes back from JSONB with its keys reordered.
const STAGES = ["collect", "compaction", "permission", "safety", "relevance", "dedupe",
  "compress", "budget", "compile", "validate", "persist"];
const SECTIONS = ["stable", "session", "dynamic"];
const PAGE = 50;
const USER_SCAN_PAGES = 5; // a user filter reads at most this many pages per search
const SHOWN = new Set(["turn_id", "tenant_id", "session_id", "task_id", "user_id",
  "created_at", "policy_revision", "render", "token_budget", "reserve_output", "total_tokens",
  "redaction_profile", "stable_prefix_sha256", "degraded", "segments", "dropped", "counts",
  "bundle", "validation", "timings_ms"]);

const $ = (id) => document.getElementById(id);

/** An element with properties/attributes set and children appended as nodes or text. */
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (name === "class") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child)); // a string becomes a Text node
  }
  return node;
}

const text = (value) => (value === null || value === undefined ? "—"
  : typeof value === "object" ? JSON.stringify(value) : String(value));

function show(id, visible) { $(id).hidden = !visible; }

// --- the API -----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem, requestId) {
    super(problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.requestId = problem.request_id || requestId;
  }
}

/** GET a JSON resource with the ops key; a non-2xx answer throws ApiError (problem+json). */
async function api(path) {
  let response;
  try {
    response = await fetch(path, {
      headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}`,
                 Accept: "application/json, application/problem+json" },
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
  } catch (err) {
    throw new ApiError(0, { title: "Network error", detail: String(err && err.message) }, null);
  }
  const raw = await response.text();
  let body = null;
  try { body = raw ? JSON.parse(raw) : null; } catch { body = null; }
  if (!response.ok) {
    const problem = body && typeof body === "object" && !Array.isArray(body) ? body
      : { title: response.statusText || "HTTP error", detail: raw.slice(0, 500) };
    const error = new ApiError(response.status, problem, response.headers.get("X-Request-ID"));
    if (response.status === 401) signOut(); // a revoked or wrong key: ask for one again
    throw error;
  }
  return body;
}

const seg = encodeURIComponent;

/** An RFC 9457 problem as readable text: title and status, detail, type, request id. */
function problemView(err) {
  if (!(err instanceof ApiError)) {
    return el("div", { class: "problem" }, el("strong", {}, "Error"),
      el("p", {}, String(err && err.message ? err.message : err)));
  }
  const p = err.problem;
  const facts = el("dl", {});
  const fact = (name, value) => { if (value) facts.append(el("dt", {}, name), el("dd", {}, text(value))); };
  fact("type", p.type);
  fact("request_id", err.requestId);
  fact("instance", p.instance);
  const errors = Array.isArray(p.errors) ? el("ul", {}, p.errors.map((e) =>
    el("li", {}, `${Array.isArray(e.loc) ? e.loc.join(".") : text(e.loc)}: ${text(e.msg)}`)))
    : null;
  return el("div", { class: "problem" },
    el("strong", {}, `${text(p.title)}${err.status ? ` (${err.status})` : ""}`),
    p.detail ? el("p", {}, text(p.detail)) : null, facts, errors);
}

function showError(err) {
  $("error").replaceChildren(problemView(err));
  show("error", true);
}

function clearError() { show("error", false); $("error").replaceChildren(); }

// --- sign in -----------------------------------------------------------------------------

function signedIn(yes) {
  show("signin", !yes);
  show("signed-in", yes);
  for (const id of ["search-panel", "diff-panel"]) show(id, yes);
  if (!yes) show("turn", false);
}

function signOut() {
  sessionStorage.removeItem(KEY);
  current = null;
  signedIn(false);
}

async function signIn(event) {
  event.preventDefault();
  clearError();
  const key = $("key").value.trim();
  $("key").value = "";
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  try {
    await api("/v1/manifests?limit=1"); // proves the key reads manifests before showing more
    $("whoami").textContent = "signed in";
    signedIn(true);
    openLinked();
  } catch (err) {
    sessionStorage.removeItem(KEY);
    showError(err);
  }
}

// --- search ------------------------------------------------------------------------------

const search = { params: null, user: "", cursor: null };

function resultRow(m) {
  const pick = (slot) => () => { $(slot).value = m.turn_id; };
  return el("tr", {},
    el("td", {}, text(m.created_at)), el("td", {}, el("code", {}, text(m.turn_id))),
    el("td", {}, text(m.session_id)), el("td", {}, text(m.task_id)), el("td", {}, text(m.user_id)),
    el("td", { class: "num" }, text(m.total_tokens)),
    el("td", { class: "num" }, text((m.segments || []).length)),
    el("td", { class: "actions" },
      el("button", { type: "button", class: "open", onclick: () => openTurn(m.turn_id) }, "Open"),
      el("button", { type: "button", class: "as-a", onclick: pick("diff-a") }, "A"),
      el("button", { type: "button", class: "as-b", onclick: pick("diff-b") }, "B")));
}

/** One more page of the search (or the first): the server filters session and task; a user
 *  filter keeps the matching rows of up to USER_SCAN_PAGES pages. The cursor is opaque. */
async function page() {
  const rows = [];
  let scanned = 0;
  for (let pages = 0; pages < (search.user ? USER_SCAN_PAGES : 1); pages += 1) {
    const query = new URLSearchParams(search.params);
    if (search.cursor) query.set("cursor", search.cursor);
    const body = await api(`/v1/manifests?${query}`);
    const found = body.manifests || [];
    scanned += found.length;
    rows.push(...found.filter((m) => !search.user || m.user_id === search.user));
    search.cursor = body.next_cursor || null;
    if (!search.cursor || rows.length >= PAGE) break;
  }
  const body = $("results").tBodies[0];
  body.append(...rows.map(resultRow));
  show("results", body.rows.length > 0);
  show("more", Boolean(search.cursor));
  $("results-note").textContent = `${body.rows.length} turn(s) shown` +
    (search.user ? `; ${scanned} manifest(s) read for user ${search.user}` : "") +
    (search.cursor ? "; more below" : "");
}

async function runSearch(event) {
  event.preventDefault();
  clearError();
  $("results").tBodies[0].replaceChildren();
  show("results", false);
  show("more", false);
  $("results-note").textContent = "";
  const turnId = $("q-turn").value.trim();
  try {
    if (turnId) {
      const m = await api(`/v1/manifests/${seg(turnId)}`);
      $("results").tBodies[0].append(resultRow(m));
      show("results", true);
      await openTurn(turnId, m);
      return;
    }
    const params = new URLSearchParams({ limit: String(PAGE) });
    for (const [id, name] of [["q-session", "session_id"], ["q-task", "task_id"]]) {
      const value = $(id).value.trim();
      if (value) params.set(name, value);
    }
    Object.assign(search, { params, user: $("q-user").value.trim(), cursor: null });
    await page();
  } catch (err) {
    showError(err);
  }
}

async function more() {
  clearError();
  try { await page(); } catch (err) { showError(err); }
}

// --- one turn ----------------------------------------------------------------------------

let current = null; // the manifest on screen

function explainButton(ref) {
  return el("button", { type: "button", class: "explain", title: `explain ${ref}`,
                        onclick: () => explain(ref) }, "explain");
}

function refCell(ref) {
  return el("td", { class: "ref" }, el("code", {}, text(ref)), " ", explainButton(ref));
}

function table(headers, rows, cls) {
  return el("table", { class: `grid ${cls || ""}` },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function freshness(f) {
  if (!f) return "—";
  return [f.observed_at ? `observed ${f.observed_at}` : null,
          f.expires_at ? `expires ${f.expires_at}` : null,
          f.revision !== null && f.revision !== undefined ? `rev ${f.revision}` : null]
    .filter(Boolean).join(" · ") || "—";
}

function renderSummary(m) {
  const dl = $("turn-summary");
  dl.replaceChildren();
  const rows = [["tenant", m.tenant_id], ["session", m.session_id], ["task", m.task_id],
    ["user", m.user_id], ["created", m.created_at], ["policy revision", m.policy_revision],
    ["render", m.render], ["budget", `${text(m.token_budget)} (reserve ${text(m.reserve_output)})`],
    ["total tokens", m.total_tokens], ["redaction profile", m.redaction_profile],
    ["candidates", m.counts && m.counts.candidates],
    ["stable prefix sha256", m.stable_prefix_sha256],
    ["degraded", (m.degraded || []).length ? m.degraded.join(", ") : "no"]];
  for (const [name, value] of rows) dl.append(el("dt", {}, name), el("dd", {}, text(value)));
}

function renderSegments(m) {
  const bySection = new Map(SECTIONS.map((s) => [s, []]));
  for (const s of m.segments || []) {
    if (!bySection.has(s.section)) bySection.set(s.section, []);
    bySection.get(s.section).push(s);
  }
  $("segments").replaceChildren(...[...bySection].map(([section, segs]) => {
    const tokens = segs.reduce((sum, s) => sum + (Number(s.tokens) || 0), 0);
    return el("div", { class: "section", "data-section": section },
      el("h4", {}, `${section} — ${segs.length} segment(s), ${tokens} tokens`),
      segs.length === 0 ? el("p", { class: "muted" }, "none") :
        table(["ref", "kind", "trust", "sensitivity", "freshness", "tokens", "reason"],
          segs.map((s) => el("tr", { class: "segment" }, refCell(s.ref), el("td", {}, text(s.kind)),
            el("td", {}, text(s.trust)), el("td", {}, text(s.sensitivity)),
            el("td", {}, freshness(s.freshness)), el("td", { class: "num" }, text(s.tokens)),
            el("td", {}, text(s.reason))))));
  }));
}

function renderDrops(m) {
  const counts = (m.counts && m.counts.dropped) || {};
  const byLayer = new Map(Object.keys(counts).map((layer) => [layer, []]));
  for (const d of m.dropped || []) {
    if (!byLayer.has(d.layer)) byLayer.set(d.layer, []);
    byLayer.get(d.layer).push(d);
  }
  const parts = [table(["layer", "dropped"], [...byLayer.keys()].map((layer) =>
    el("tr", {}, el("td", {}, layer), el("td", { class: "num" }, text(counts[layer] ?? byLayer.get(layer).length)))),
    "counts")];
  for (const [layer, drops] of byLayer) {
    if (layer === "permission" && counts.permission) {
      parts.push(el("p", { class: "muted" }, `permission: ${counts.permission} candidate(s); ` +
        "their refs are never in a manifest — see the audit records below, or explain a ref."));
    }
    if (drops.length === 0) continue;
    parts.push(el("h4", {}, `${layer} — ${drops.length}`),
      table(["ref", "kind", "type", "reason", "score / floor"], drops.map((d) =>
        el("tr", { class: "drop" }, refCell(d.ref), el("td", {}, text(d.kind)), el("td", {}, text(d.type)),
          el("td", {}, text(d.reason)),
          el("td", {}, d.score === undefined ? "—" : `${text(d.score)} / ${text(d.floor)}`)))));
  }
  $("drops").replaceChildren(...parts);
}

/** The stage timings as bars laid end to end in the order the turn ran them. */
function renderWaterfall(m) {
  const timings = m.timings_ms || {};
  const names = [...STAGES.filter((s) => s in timings),
    ...Object.keys(timings).filter((s) => !STAGES.includes(s)).sort()];
  const total = names.reduce((sum, s) => sum + (Number(timings[s]) || 0), 0);
  const box = $("waterfall");
  if (names.length === 0) {
    box.replaceChildren(el("p", { class: "muted" }, "no timings recorded"));
    return;
  }
  let offset = 0;
  box.replaceChildren(...names.map((name) => {
    const ms = Number(timings[name]) || 0;
    const bar = el("div", { class: "wf-bar" });
    // CSSOM properties, not a style attribute: the CSP forbids inline style markup
    bar.style.marginLeft = `${total ? (offset / total) * 100 : 0}%`;
    bar.style.width = `${total ? Math.max((ms / total) * 100, 0.3) : 0}%`;
    offset += ms;
    return el("div", { class: "wf-row" }, el("span", { class: "wf-name" }, name),
      el("div", { class: "wf-track" }, bar), el("span", { class: "wf-ms num" }, `${ms.toFixed(3)} ms`));
  }), el("div", { class: "wf-row total" }, el("span", { class: "wf-name" }, "total"),
    el("div", { class: "wf-track" }), el("span", { class: "wf-ms num" }, `${total.toFixed(3)} ms`)));
}

function renderBundle(m) {
  const b = m.bundle;
  if (!b) {
    $("bundle").replaceChildren(el("p", { class: "muted" }, "no bundle in this turn"));
    return;
  }
  const facts = el("dl", { class: "summary" });
  for (const name of ["bundle_id", "revision", "sha256", "runtime", "rebound_from", "pinned"]) {
    facts.append(el("dt", {}, name), el("dd", {}, text(b[name])));
  }
  const parts = [facts, resolvedOrder(b.resolved_order)];
  const s = b.shadow;
  if (s) {  // resolved beside the served revision, never served (docs/bundles.md#shadow)
    const shadow = el("dl", { class: "summary" });
    for (const [name, value] of [["revision", s.revision], ["sha256", s.sha256],
      ["stable prefix if served", s.stable_prefix_sha256],
      ["stable prefix served", m.stable_prefix_sha256]]) {
      shadow.append(el("dt", {}, name), el("dd", {}, text(value)));
    }
    parts.push(el("h3", {}, "shadow (not served)"), shadow, resolvedOrder(s.resolved_order));
  }
  $("bundle").replaceChildren(...parts);
}

function resolvedOrder(files) {
  return table(
    ["#", "path", "layer", "bytes used", "truncated", "reason", "sha256"],
    (files || []).map((f, i) => el("tr", {}, el("td", { class: "num" }, String(i + 1)),
      el("td", {}, el("code", {}, text(f.path))), el("td", {}, text(f.layer)),
      el("td", { class: "num" }, text(f.bytes_used)), el("td", {}, text(f.truncated)),
      el("td", {}, text(f.reason)), el("td", {}, el("code", {}, text(f.sha256))))));
}

function renderValidation(m) {
  const v = m.validation || {};
  $("validation").replaceChildren(
    el("p", { class: v.ok ? "ok" : "bad" }, `${v.ok ? "ok" : "NOT ok"} after ${text(v.attempts)} attempt(s)`),
    table(["check", "ok", "detail"], (v.checks || []).map((c) => el("tr", { class: c.ok ? "ok" : "bad" },
      el("td", {}, text(c.type)), el("td", {}, c.ok ? "yes" : "no"), el("td", {}, text(c.detail))))));
}

async function renderAudit(turnId) {
  const box = $("audit");
  box.replaceChildren(el("p", { class: "muted" }, "loading…"));
  try {
    const body = await api(`/v1/audit?turn_id=${seg(turnId)}&limit=1000`);
    const records = body.records || [];
    withheld(records);
    box.replaceChildren(records.length === 0 ? el("p", { class: "muted" }, "no audit records for this turn")
      : table(["at", "kind", "principal", "ref", "rule", "detail"], records.map((r) =>
        el("tr", { class: "audit" }, el("td", {}, text(r.at)), el("td", {}, text(r.kind)),
          el("td", {}, text(r.principal)), r.ref ? refCell(r.ref) : el("td", {}, "—"),
          el("td", {}, text(r.rule)), el("td", {}, el("code", {}, text(r.detail)))))));
  } catch (err) {
    box.replaceChildren(problemView(err));
  }
}

/** The stores apply permission inside their queries, so what they withheld is not in the
 *  manifest's drops: the turn's audit holds it as counts per label (never refs). */
function withheld(records) {
  for (const r of records.filter((x) => x.kind === "permission.withheld")) {
    const counts = Object.entries((r.detail && r.detail.counts) || {});
    if (counts.length === 0) continue;
    $("drops").append(el("p", { class: "withheld" },
      "withheld by permission in the stores (audit log, counts per label): ",
      counts.map(([label, n]) => `${label} ${text(n)}`).join(", ")));
  }
}

function renderOther(m) {
  const rest = Object.keys(m).filter((k) => !SHOWN.has(k)).sort();
  $("other").replaceChildren(...rest.map((k) => el("details", {},
    el("summary", {}, k), el("pre", {}, JSON.stringify(m[k], null, 2)))));
}

async function openTurn(turnId, manifest) {
  clearError();
  try {
    const m = manifest || await api(`/v1/manifests/${seg(turnId)}`);
    current = m;
    $("turn-id").textContent = m.turn_id;
    $("explain").replaceChildren();
    renderSummary(m);
    renderSegments(m);
    renderDrops(m);
    renderWaterfall(m);
    renderBundle(m);
    renderValidation(m);
    renderOther(m);
    show("turn", true);
    // the turn (never the key) in the fragment: a link to it, and a reload reopens it
    history.replaceState(null, "", `#turn=${seg(m.turn_id)}`);
    $("turn").scrollIntoView({ block: "start" });
    await renderAudit(m.turn_id);
  } catch (err) {
    showError(err);
  }
}

// --- explain -----------------------------------------------------------------------------

/** Why ``ref`` was or was not in the current turn (GET /v1/manifests/{turn}/explain). */
async function explain(ref) {
  if (!current) return;
  $("explain-ref").value = ref;
  const box = $("explain");
  box.replaceChildren(el("p", { class: "muted" }, `explaining ${ref}…`));
  box.scrollIntoView({ block: "nearest" });
  try {
    const r = await api(`/v1/manifests/${seg(current.turn_id)}/explain?ref=${seg(ref)}`);
    const detail = el("dl", { class: "summary" });
    for (const [k, v] of Object.entries(r.detail || {})) detail.append(el("dt", {}, k), el("dd", {}, text(v)));
    box.replaceChildren(el("div", { class: `explanation outcome-${text(r.outcome)}` },
      el("p", {}, el("code", {}, text(r.ref)), " — ", el("strong", { class: "outcome" }, text(r.outcome)),
        r.stage ? ` at ${r.stage}` : ""),
      r.reason ? el("p", { class: "reason" }, text(r.reason)) : null, detail,
      el("p", { class: "muted" }, `evaluated ${text(r.evaluated_at)}`)));
  } catch (err) {
    box.replaceChildren(el("p", {}, "explain ", el("code", {}, ref), ":"), problemView(err));
  }
}

function explainTyped(event) {
  event.preventDefault();
  const ref = $("explain-ref").value.trim();
  if (ref) explain(ref);
}

// --- diff --------------------------------------------------------------------------------

function refList(title, refs, cls) {
  return el("div", { class: `changes ${cls}` }, el("h4", {}, `${title} (${refs.length})`),
    refs.length === 0 ? el("p", { class: "muted" }, "none")
      : el("ul", {}, refs.map((r) => el("li", {}, el("code", {}, r)))));
}

function diffColumn(label, m, marks) {
  return el("div", { class: "diff-col" },
    el("h4", {}, `${label}: `, el("code", {}, text(m.turn_id))),
    el("p", { class: "muted" }, `${text(m.created_at)} · ${text(m.total_tokens)} tokens`),
    SECTIONS.map((section) => {
      const segs = (m.segments || []).filter((s) => s.section === section);
      return el("div", { class: "section" }, el("h5", {}, section),
        el("ul", {}, segs.map((s) => {
          const mark = marks.get(s.ref);
          return el("li", { class: mark ? `mark-${mark.cls}` : "" }, mark ? `${mark.sign} ` : "  ",
            el("code", {}, text(s.ref)), ` ${text(s.tokens)} tok`);
        })));
    }));
}

async function diff(event) {
  event.preventDefault();
  clearError();
  const [a, b] = [$("diff-a").value.trim(), $("diff-b").value.trim()];
  if (!a || !b) return;
  try {
    const [ma, mb] = await Promise.all([a, b].map((t) => api(`/v1/manifests/${seg(t)}`)));
    const refs = (m) => new Map((m.segments || []).map((s) => [s.ref, s.section]));
    const [ra, rb] = [refs(ma), refs(mb)];
    const entered = [...rb.keys()].filter((r) => !ra.has(r));
    const left = [...ra.keys()].filter((r) => !rb.has(r));
    const moved = [...rb.keys()].filter((r) => ra.has(r) && ra.get(r) !== rb.get(r))
      .map((r) => `${r}: ${ra.get(r)} → ${rb.get(r)}`);
    const same = ma.stable_prefix_sha256 === mb.stable_prefix_sha256;
    $("diff").replaceChildren(
      el("p", { class: `prefix ${same ? "ok" : "bad"}` },
        same ? "stable prefix unchanged (the prompt cache can be reused): "
          : "stable prefix CHANGED (the prompt cache starts over): ",
        el("code", {}, text(ma.stable_prefix_sha256)),
        same ? null : [" → ", el("code", {}, text(mb.stable_prefix_sha256))]),
      el("div", { class: "diff-summary" }, refList("entered in B", entered, "entered"),
        refList("left since A", left, "left"), refList("changed section", moved, "moved")),
      el("div", { class: "diff-cols" },
        diffColumn("A", ma, new Map(left.map((r) => [r, { cls: "left", sign: "−" }]))),
        diffColumn("B", mb, new Map(entered.map((r) => [r, { cls: "entered", sign: "+" }])))));
  } catch (err) {
    $("diff").replaceChildren(problemView(err));
  }
}

// --- wiring ------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("signin").addEventListener("submit", signIn);
  $("signout").addEventListener("click", signOut);
  $("search").addEventListener("submit", runSearch);
  $("more").addEventListener("click", more);
  $("explain-form").addEventListener("submit", explainTyped);
  $("diff-form").addEventListener("submit", diff);
  if (sessionStorage.getItem(KEY)) {
    $("whoami").textContent = "signed in";
    signedIn(true);
    openLinked();
  }
  window.addEventListener("hashchange", openLinked);
});

/** Open the turn a ``#turn=`` fragment names, when signed in. */
function openLinked() {
  const linked = new URLSearchParams(location.hash.slice(1)).get("turn");
  if (linked && sessionStorage.getItem(KEY) && (!current || current.turn_id !== linked)) {
    openTurn(linked);
  }
}
