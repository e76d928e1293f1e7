"use strict";
// The dashboard's page. Routes (the URL's hash): #/?q=&ns=&phase=&queue=&cluster=&label=&sort=&dir=&page=
// (the HyperJobs), #/hyperjobs/NAMESPACE/NAME, #/jobs/NAME, #/queues[/NAME], #/clusters[/NAME],
// #/nodes/NAME. The lists come whole in the event stream's snapshot, so the page searches, filters,
// sorts and pages them itself (no round trip per keystroke) and draws one page of rows at a time.
let snap = null;
let detail = null;
const PAGE_SIZE = 50;
const PHASES = ["Pending", "Admitted", "Running", "Suspended", "Terminating", "Completed", "Failed", "Aborted"];
const view = document.getElementById("view");
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const enc = encodeURIComponent;
const phase = (p) => `<span class="phase ${esc(p)}">${esc(p)}</span>`;
const since = (s) => { s = Math.max(0, s);
  return s < 120 ? `${Math.round(s)}s` : s < 7200 ? `${Math.round(s / 60)}m` : s < 172800 ? `${Math.round(s / 3600)}h` : `${Math.round(s / 86400)}d`; };
const age = (t) => t ? since(Date.now() / 1000 - t) : "-";
const res = (m) => Object.entries(m || {}).filter(([k]) => ["cpu", "memory", "nvidia.com/gpu"].includes(k))
  .map(([k, v]) => `${k.split("/").pop()}=${k === "memory" ? (v / 2 ** 30).toFixed(0) + "Gi" : +(+v).toFixed(2)}`).join(", ") || "-";
const table = (head, rows, attrs = "") => `<table ${attrs}><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>${
  rows.length ? rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")
              : `<tr><td colspan="${head.length}" class="muted">none</td></tr>`}</table>`;

// Links: every object names its page.
const hjLink = (ns, name) => `<a href="#/hyperjobs/${enc(ns)}/${enc(name)}">${esc(name)}</a>`;
const jobLink = (name) => `<a href="#/jobs/${enc(name)}">${esc(name)}</a>`;
const podLink = (job, pod) => `<a href="#/jobs/${enc(job)}?pod=${enc(pod)}">${esc(pod)}</a>`;
const queueLink = (q) => `<a href="#/queues/${enc(q)}">${esc(q)}</a>`;
const clusterLink = (c) => c ? `<a href="#/clusters/${enc(c)}">${esc(c)}</a>` : "-";
const nodeLink = (n) => n ? `<a href="#/nodes/${enc(n)}">${esc(n)}</a>` : "-";
const nsLink = (ns) => `<a href="#/?ns=${enc(ns)}">${esc(ns)}</a>`;

function route() {
  const [path, query] = (location.hash || "#/").slice(1).split("?");
  return {path, params: new URLSearchParams(query || "")};
}

function placement(h) {
  const p = (h.status && h.status.placement) || {};
  const planned = {};
  for (const c of h.children) if (c.cluster) planned[c.cluster] = (planned[c.cluster] || 0) + c.replicas;
  const shown = Object.keys(p).length ? p : planned;
  return Object.entries(shown).sort().map(([c, n]) => `${clusterLink(c)}: ${n}`).join(", ") || "-";
}

// -- the HyperJobs: search, filters, sorting, pages ------------------------------------------------

// kubectl's equality-based selector (k=v, k==v, k!=v, k, !k; all must hold), as `get -l` takes it.
function selector(text) {
  const tests = text.split(",").map((t) => t.trim()).filter(Boolean).map((term) => {
    if (term.includes("!=")) { const [k, v] = term.split("!=").map((s) => s.trim()); return (l) => l[k] !== v; }
    if (term.includes("=")) { const [k, v] = term.replace("==", "=").split("=").map((s) => s.trim()); return (l) => l[k] === v; }
    if (term.startsWith("!")) { const k = term.slice(1).trim(); return (l) => !(k in l); }
    return (l) => term in l;
  });
  return (labels) => tests.every((t) => t(labels || {}));
}

function filtered(hyperjobs, p) {
  const q = (p.get("q") || "").toLowerCase(), labels = selector(p.get("label") || "");
  const ns = p.get("ns"), ph = p.get("phase"), queue = p.get("queue"), cluster = p.get("cluster");
  return hyperjobs.filter((h) => (!q || `${h.namespace}/${h.name}`.toLowerCase().includes(q)) &&
    (!ns || h.namespace === ns) && (!ph || h.phase === ph) && (!queue || h.queues.includes(queue)) &&
    (!cluster || h.clusters.includes(cluster)) && labels(h.labels));
}

const COLUMNS = [
  ["name", "Name", (h) => h.name], ["namespace", "Namespace", (h) => h.namespace], ["phase", "Phase", (h) => h.phase],
  ["queue", "Queue", (h) => h.queues.join(",")], ["children", "Children", (h) => h.splitCount],
  ["placement", "Placement", (h) => h.clusters.join(",")], ["age", "Age", (h) => -(h.created || 0)],
  ["waiting", "Waiting", (h) => h.waitingReason],
];

function sorted(hyperjobs, p) {
  const column = COLUMNS.find(([key]) => key === p.get("sort")) || COLUMNS[0], sign = p.get("dir") === "desc" ? -1 : 1;
  const key = column[2];
  return [...hyperjobs].sort((a, b) => { const x = key(a), y = key(b);
    return sign * (x < y ? -1 : x > y ? 1 : a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.name < b.name ? -1 : 1); });
}

const options = (label, name, values, chosen) => `<select name="${name}" aria-label="${label}"><option value="">${label}: all</option>${
  [...new Set(values)].sort().map((v) => `<option${v === chosen ? " selected" : ""}>${esc(v)}</option>`).join("")}</select>`;

function toolbar(p) {
  const hj = snap.hyperjobs;
  return `<input type="search" name="q" placeholder="Search names" value="${esc(p.get("q") || "")}">` +
    options("Namespace", "ns", hj.map((h) => h.namespace), p.get("ns")) +
    options("Phase", "phase", [...PHASES, ...hj.map((h) => h.phase)], p.get("phase")) +
    options("Queue", "queue", hj.flatMap((h) => h.queues), p.get("queue")) +
    options("Cluster", "cluster", [...snap.clusters.map((c) => c.name), ...hj.flatMap((h) => h.clusters)], p.get("cluster")) +
    `<input name="label" placeholder="Labels: team=a,!canary" value="${esc(p.get("label") || "")}">`;
}

// Set one parameter in the URL (page 1 again unless it is the page) and draw the results.
function setParam(name, value) {
  const p = route().params;
  if (value === "" || value === null) p.delete(name); else p.set(name, value);
  if (name !== "page") p.delete("page");
  history.replaceState(null, "", `#/?${p}`);
  renderResults(p);
}

function renderHyperJobs(p) {
  if (!document.getElementById("filters")) {
    view.innerHTML = `<h2>HyperJobs</h2><div class="cards" id="counts"></div><div class="toolbar" id="filters"></div><div id="results"></div>`;
    const bar = document.getElementById("filters");
    bar.addEventListener("input", (e) => { if (e.target.name === "q" || e.target.name === "label") setParam(e.target.name, e.target.value); });
    bar.addEventListener("change", (e) => { if (e.target.tagName === "SELECT") setParam(e.target.name, e.target.value); });
  }
  const bar = document.getElementById("filters");
  if (!bar.contains(document.activeElement)) bar.innerHTML = toolbar(p);  // never under the typist's cursor
  renderResults(p);
}

function renderResults(p) {
  const shown = sorted(filtered(snap.hyperjobs, p), p);
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE)), page = Math.min(Math.max(1, +p.get("page") || 1), pages);
  const rows = shown.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
  const count = (ph) => shown.filter((h) => h.phase === ph).length;
  document.getElementById("counts").innerHTML = ["Running", "Pending", "Completed", "Failed", "Aborted"].map((ph) =>
    `<div class="card"><div class="n">${count(ph)}</div><div class="muted">${ph}</div></div>`).join("");
  const sort = p.get("sort") || "name", dir = p.get("dir") || "asc";
  const head = COLUMNS.map(([key, title]) => `<th class="sortable ${key === sort ? dir : ""}" data-sort="${key}">${title}</th>`).join("");
  const body = rows.map((h) => `<tr><td>${hjLink(h.namespace, h.name)}</td><td>${nsLink(h.namespace)}</td><td>${phase(h.phase)}</td>` +
    `<td>${h.queues.map(queueLink).join(", ")}</td><td>${h.splitCount}</td><td>${placement(h)}</td><td>${age(h.created)}</td>` +
    `<td class="muted">${esc(h.waitingReason)}</td></tr>`).join("") ||
    `<tr><td colspan="${COLUMNS.length}" class="muted">no HyperJob matches</td></tr>`;
  const from = shown.length ? (page - 1) * PAGE_SIZE + 1 : 0;
  const results = document.getElementById("results");
  results.dataset.matches = shown.length;
  results.innerHTML = `<table id="hyperjobs"><tr>${head}</tr>${body}</table>
    <div class="pager"><button data-page="${page - 1}" ${page <= 1 ? "disabled" : ""}>‹ Previous</button>
    <span id="range">${from}–${from + rows.length - (rows.length ? 1 : 0)} of ${shown.length} (page ${page} of ${pages})</span>
    <button data-page="${page + 1}" ${page >= pages ? "disabled" : ""}>Next ›</button></div>`;
  results.querySelectorAll("th.sortable").forEach((th) => th.addEventListener("click", () => {
    const q = route().params, same = (q.get("sort") || "name") === th.dataset.sort;
    q.set("dir", same && (q.get("dir") || "asc") === "asc" ? "desc" : "asc"); q.set("sort", th.dataset.sort);
    history.replaceState(null, "", `#/?${q}`); renderResults(q);
  }));
  results.querySelectorAll("button[data-page]").forEach((b) => b.addEventListener("click", () => setParam("page", b.dataset.page)));
  if (!document.body.dataset.firstRows) document.body.dataset.firstRows = performance.now().toFixed(1);  // first paint, for tests
}

// -- one HyperJob ----------------------------------------------------------------------------------

// The pods' timeline, as wide as the page: a label column, then time scaled to what is left.
function gantt(jobs, width) {
  const pods = jobs.flatMap((j) => j.pods.map((p) => ({...p, job: j.name, cluster: j.cluster})));
  const times = pods.flatMap((p) => [p.created, p.started, p.finished]).filter((t) => t);
  if (!times.length) return `<p class="muted">No pod has been created yet.</p>`;
  const now = Date.now() / 1000, t0 = Math.min(...times);
  const t1 = Math.max(...times, pods.some((p) => !p.finished) ? now : 0);
  const span = Math.max(t1 - t0, 1), left = Math.min(260, Math.round(width * 0.3)), right = 12, row = 14;
  const plot = Math.max(width - left - right, 100);
  const x = (t) => left + ((t - t0) / span) * plot;
  const shown = pods.slice(0, 500);
  let y = 24, out = "", lastJob = "";
  for (const p of shown) {
    if (p.job !== lastJob) {
      out += `<text x="0" y="${y + 10}" font-weight="600">${esc(p.job)} @ ${esc(p.cluster)}</text>`;
      y += row + 2; lastJob = p.job;
    }
    const created = p.created || t0, started = p.started, end = p.finished || now;
    out += `<text x="12" y="${y + 10}">${esc(p.name)}</text>`;
    out += `<rect class="pending" x="${x(created)}" y="${y + 2}" width="${Math.max((started || end) - created, 0) / span * plot}" height="9" fill="#fcd34d"><title>${esc(p.name)} pending</title></rect>`;
    if (started) out += `<rect class="running" x="${x(started)}" y="${y + 2}" width="${Math.max(end - started, 0) / span * plot}" height="9" fill="${p.phase === "Failed" ? "#f87171" : p.finished ? "#4ade80" : "#5b9cff"}"><title>${esc(p.name)} ${esc(p.phase)}</title></rect>`;
    y += row;
  }
  // The first tick's label starts at its line, the last one ends at it: none is cut at an edge.
  const axis = [0, 0.25, 0.5, 0.75, 1].map((f) => `<line x1="${left + f * plot}" x2="${left + f * plot}" y1="16" y2="${y}" stroke="#e5e7eb"/>` +
    `<text x="${left + f * plot}" y="12" text-anchor="${f === 0 ? "start" : f === 1 ? "end" : "middle"}">+${Math.round(f * span)}s</text>`).join("");
  const more = pods.length > shown.length ? `<p class="muted">first ${shown.length} of ${pods.length} pods</p>` : "";
  return `<div class="scroll"><svg id="gantt" width="${width}" height="${y + 8}" style="background:#fff;display:block">${axis}${out}</svg></div>
    <div class="muted">yellow: pending · blue: running · green: succeeded · red: failed</div>${more}`;
}

function drawGantt() {
  const box = document.getElementById("timeline");
  if (box && detail) box.innerHTML = gantt(detail.jobs, box.clientWidth);
}

function renderHyperJob() {
  const h = detail.hyperjob, jobs = detail.jobs;
  const pods = jobs.flatMap((j) => j.pods.map((p) => [podLink(j.name, p.name), jobLink(j.name), clusterLink(j.cluster), phase(p.phase), nodeLink(p.node), p.restarts]));
  view.innerHTML = `<h2>HyperJob ${esc(h.name)} ${phase(h.phase)}</h2>
    <div class="cards">
      <div class="card"><div class="muted">Namespace</div>${nsLink(h.namespace)}</div>
      <div class="card"><div class="muted">Queue</div>${h.queues.map(queueLink).join(", ")}</div>
      <div class="card"><div class="muted">Placement</div>${placement(h)}</div>
      <div class="card"><div class="muted">Children</div>${h.splitCount}</div>
      <div class="card"><div class="muted">Age</div>${age(h.created)}</div>
      <div class="card"><div class="muted">Waiting</div>${esc(h.waitingReason) || "-"}</div>
    </div>
    <h3>Children per cluster</h3>` +
    table(["Job", "Cluster", "Phase", "Pending", "Running", "Succeeded", "Failed", "Retries"], jobs.map((j) => [
      jobLink(j.name), clusterLink(j.cluster), phase(j.phase), j.pending, j.running, j.succeeded, j.failed, j.retryCount]), 'id="children"') +
    `<h3>Timeline</h3><div id="timeline"></div>` +
    `<h3>Trace</h3>${waterfall(detail.trace)}` +
    `<h3>Pods (${pods.length})</h3><div class="scroll">${table(["Pod", "Job", "Cluster", "Phase", "Node", "Restarts"], pods, 'id="pods"')}</div>` +
    `<h3>Pod logs</h3><div id="logs">${podLogs(detail.logs)}</div>` +
    `<h3>Events</h3>${events(detail.events)}<h3>Spec</h3><pre class="yaml" id="spec">${esc(detail.yaml)}</pre>`;
  drawGantt();
  showLog();
}

// The trace as `hyperjob trace` draws it: one row per span in tree order, indented under its
// parent, its bar placed by its start and sized by its duration on the life's scale (percentages
// of the bar column, so it fits any width); an instant is a diamond.
const secs = (s) => s < 1 ? `${Math.round(s * 1000)}ms` : `${s.toFixed(s < 10 ? 2 : 1)}s`;
function waterfall(trace) {
  if (!trace.spans.length) return `<p class="muted">No event of this HyperJob in the event log yet.</p>`;
  const total = Math.max(trace.duration, 1e-9);
  const rows = trace.spans.map((s) => {
    const left = (100 * s.offset) / total, kind = s.warning ? " warn" : "";
    const bar = s.duration ? `<span class="span${kind}" style="left:${left}%;width:${(100 * s.duration) / total}%"></span>`
      : `<span class="instant${kind}" style="left:${left}%"></span>`;
    return `<tr data-depth="${s.depth}" data-parent="${s.parent ?? ""}"><td class="span-name" style="padding-left:${10 + 16 * s.depth}px" title="${esc(s.name)}">` +
      `${s.warning ? "! " : ""}${esc(s.name)}</td><td title="${esc(s.service)}">${esc(s.service)}</td><td class="num">+${secs(s.offset)}</td>` +
      `<td class="num">${s.duration ? secs(s.duration) : "·"}</td><td><div class="track" title="${esc(s.name)}">${bar}</div></td></tr>`;
  }).join("");
  const lives = trace.lives > 1 ? ` · life ${trace.lives} of ${trace.lives} (a re-created name is a new trace)` : "";
  return `<p class="muted">${trace.spans.length} spans in ${secs(trace.duration)} · trace id ${esc(trace.traceId) || "none"}${lives}</p>
    <div class="scroll"><table id="trace" class="waterfall"><colgroup><col style="width:36%"><col style="width:13%"><col style="width:8%"><col style="width:8%"><col></colgroup>
    <tr><th>Span</th><th>Service</th><th>Start</th><th>Duration</th><th>+0s<span style="float:right">+${secs(trace.duration)}</span></th></tr>${rows}</table></div>`;
}

// The last lines of one pod's log at a time (a pod picked in the list), or why there are none.
let logPod = "";
function podLogs(logs) {
  const note = logs.note ? `<p class="muted" id="logs-note">${esc(logs.note)}</p>` : "";
  if (!logs.pods.length) return note;
  const chosen = logs.pods.find((l) => l.pod === logPod) || logs.pods[0];
  return `<div class="toolbar"><select id="log-pod" aria-label="Pod">${logs.pods.map((l) =>
    `<option value="${esc(l.pod)}"${l === chosen ? " selected" : ""}>${esc(l.pod)} @ ${esc(l.cluster)}</option>`).join("")}</select>
    <span class="muted">its last lines (all of it: hyperjob logs POD)</span></div><pre class="yaml" id="pod-log"></pre>${note}`;
}

function showLog() {
  const select = document.getElementById("log-pod"), pre = document.getElementById("pod-log");
  if (!select || !pre) return;
  const chosen = detail.logs.pods.find((l) => l.pod === select.value);
  pre.textContent = chosen.tail || "(no output yet)";
  pre.scrollTop = pre.scrollHeight;  // the end of the log is what matters
  select.onchange = () => { logPod = select.value; showLog(); };
}

function events(found) {
  const now = Date.now() / 1000;
  return `<div class="scroll">${table(["Type", "Reason", "Age", "From", "Object", "Message"], found.map((e) => [
    phase(e.type), esc(e.reason), since(now - e.lastTimestamp) + (e.count > 1 ? ` (x${e.count} over ${since(now - e.firstTimestamp)})` : ""),
    clusterLink(e.cluster), esc(e.object), `<span class="wrap">${esc(e.message)}</span>`]), 'id="events"')}</div>`;
}

// -- a job, queues, clusters, nodes -----------------------------------------------------------------

function renderJob(found, focus) {
  view.innerHTML = found.map((j) => `<h2>Job ${esc(j.name)} ${phase(j.phase)}</h2>
    <div class="cards"><div class="card"><div class="muted">HyperJob</div>${j.hyperJob ? hjLink(j.namespace, j.hyperJob) : "-"}</div>
      <div class="card"><div class="muted">Cluster</div>${clusterLink(j.cluster)}</div>
      <div class="card"><div class="muted">Queue</div>${queueLink(j.queue)}</div>
      <div class="card"><div class="muted">Waiting</div>${esc(j.waitingReason) || "-"}</div></div>
    <h3>Pods</h3><table><tr><th>Pod</th><th>Phase</th><th>Node</th><th>Restarts</th><th>Age</th></tr>${j.pods.map((p) =>
      `<tr id="pod-${esc(p.name)}" class="${p.name === focus ? "focus" : ""}"><td>${esc(p.name)}</td><td>${phase(p.phase)}</td>` +
      `<td>${nodeLink(p.node)}</td><td>${p.restarts}</td><td>${age(p.created)}</td></tr>`).join("")}</table>`).join("");
}

function renderQueues(only) {
  const queues = snap.queues.filter((q) => !only || q.name === only);
  view.innerHTML = `<h2>${only ? `Queue ${esc(only)}` : "Queues"}</h2>` + table(
    ["Name", "State", "Weight", "Inqueue", "Pending", "Running", "Allocated (fleet)", "Deserved (fleet)", "Per cluster", "HyperJobs"],
    queues.map((q) => [queueLink(q.name), phase(q.state), esc(q.spec.weight ?? 1), q.podgroups.inqueue,
      q.podgroups.pending, q.podgroups.running, res(q.allocated), res(q.deserved),
      `<span class="wrap">${Object.entries(q.usage).map(([c, u]) => `${clusterLink(c)}: ${res(u.allocated)}`).join("<br>") || "-"}</span>`,
      `<a href="#/?queue=${enc(q.name)}">${snap.hyperjobs.filter((h) => h.queues.includes(q.name)).length}</a>`]));
}

function renderClusters(cluster, node) {
  const clusters = snap.clusters.filter((c) => !cluster || c.name === cluster);
  const nodes = snap.nodes.filter((n) => (!cluster || n.cluster === cluster) && (!node || n.name === node));
  view.innerHTML = `<h2>${node ? `Node ${esc(node)}` : cluster ? `Cluster ${esc(cluster)}` : "Clusters"}</h2>` + (node ? "" : table(
    ["Cluster", "Ready nodes", "Free", "Allocatable", "GPU healthy", "Fabric healthy", "Reported", "HyperJobs"],
    clusters.map((c) => [clusterLink(c.name), `${c.ready_nodes}/${c.nodes}`, res(c.free), res(c.allocatable),
      `${c.gpu_healthy_nodes}/${c.nodes}`, `${c.fabric_healthy_nodes}/${c.nodes}`, `${c.lastReportAge}s ago`,
      `<a href="#/?cluster=${enc(c.name)}">${snap.hyperjobs.filter((h) => h.clusters.includes(c.name)).length}</a>`]))) +
    `<h3>Nodes</h3>` + table(["Cluster", "Node", "Status", "GPUs used", "GPU", "Fabric", "Health"], nodes.map((n) => {
      const gpus = +(n.allocatable["nvidia.com/gpu"] || 0), used = +(n.used["nvidia.com/gpu"] || 0);
      return [clusterLink(n.cluster), nodeLink(n.name), phase(n.ready ? "Ready" : "NotReady"),
        `<div class="bar" title="${used}/${gpus}"><span style="width:${gpus ? (100 * used) / gpus : 0}%"></span></div> ${used}/${gpus}`,
        n.gpuHealthy ? "ok" : phase("Failed"), n.fabricHealthy ? "ok" : phase("Failed"), esc((n.health || []).join(", ")) || "-"];
    }));
}

// -- routing and the live stream ---------------------------------------------------------------------

async function fetched(url) {
  const r = await fetch(url);
  return r.ok ? r.json() : null;
}

function notFound(what) { view.innerHTML = `<h2>${esc(what)}</h2><p>Not found.</p>`; }

async function render() {
  const {path, params} = route();
  const section = path.startsWith("/queues") ? "queues" : path.startsWith("/clusters") || path.startsWith("/nodes") ? "clusters" : "hyperjobs";
  document.querySelectorAll("header a").forEach((a) => a.classList.toggle("active", a.dataset.route === section));
  if (!snap) return;
  const [, kind, ...rest] = path.split("/"), name = decodeURIComponent(rest.join("/"));
  if (kind === "hyperjobs") {
    const [ns, hj] = rest.length > 1 ? rest.map(decodeURIComponent) : ["default", name];
    detail = await fetched(`/api/hyperjobs/${enc(ns)}/${enc(hj)}`);
    if (detail) renderHyperJob(); else notFound(`HyperJob ${ns}/${hj}`);
  } else if (kind === "jobs") {
    const found = await fetched(`/api/jobs/${enc(name)}`);
    if (found) renderJob(found.jobs, params.get("pod")); else notFound(`Job ${name}`);
  } else if (kind === "queues") renderQueues(name);
  else if (kind === "clusters") renderClusters(name, "");
  else if (kind === "nodes") renderClusters("", name);
  else renderHyperJobs(params);
  document.body.dataset.rendered = path;
}

function connect() {
  const live = document.getElementById("live");
  const stream = new EventSource("/api/events");
  stream.addEventListener("snapshot", (e) => { snap = JSON.parse(e.data); live.textContent = "live"; live.className = "on"; render(); });
  stream.onerror = () => { live.textContent = "reconnecting…"; live.className = ""; };
}

window.addEventListener("hashchange", () => { view.innerHTML = ""; render(); });
window.addEventListener("resize", drawGantt);
fetch("/api/snapshot").then((r) => r.json()).then((s) => { snap = snap || s; render(); });
connect();
