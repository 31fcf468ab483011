// innet's live view: the topology, blue switches per job, link rates, jobs and events,
// pushed by the server as server-sent events (/api/events) about once a second.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const PALETTE = ["#1f6fd1", "#2ca02c", "#9467bd", "#e377c2", "#17becf", "#bcbd22",
                 "#8c564b", "#ff7f0e"];
const RED = "#d62728";
let cy = null;
let shapeKey = "";
let selected = null;

function api(path) {
  return path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN);
}

function jobColour(job) {
  return PALETTE[(Number(job) - 1 + PALETTE.length) % PALETTE.length];
}

// Levels from the server (hops from the nearest host): hosts at the bottom. Within a level,
// nodes follow their neighbours one level up (barycentre), the top level by name.
function positions(state) {
  const nodes = [...state.switches, ...state.hosts];
  const level = new Map(nodes.map(n => [n.name, n.level]));
  const adj = new Map(nodes.map(n => [n.name, []]));
  for (const l of state.links) { adj.get(l.a).push(l.b); adj.get(l.b).push(l.a); }
  const top = Math.max(...nodes.map(n => n.level));
  const byLevel = [];
  for (let i = 0; i <= top; i++) byLevel.push(nodes.filter(n => n.level === i).map(n => n.name));
  const natural = (a, b) => a.localeCompare(b, undefined, {numeric: true});
  const x = new Map();
  for (let i = top; i >= 0; i--) {
    const names = byLevel[i];
    const key = n => {
      const up = adj.get(n).filter(m => level.get(m) > i && x.has(m)).map(m => x.get(m));
      return up.length ? up.reduce((s, v) => s + v, 0) / up.length : Infinity;
    };
    names.sort((a, b) => (key(a) - key(b)) || natural(a, b));
    names.forEach((n, k) => x.set(n, (k + 1) / (names.length + 1)));
  }
  const width = Math.max(800, 60 * Math.max(...byLevel.map(l => l.length)));
  const out = {};
  for (const n of nodes) {
    out[n.name] = {x: x.get(n.name) * width, y: (top - level.get(n.name)) * 110};
  }
  return out;
}

function rateWidth(pps) {
  return pps ? Math.min(12, 1.5 + 2 * Math.log10(1 + pps)) : 1.5;
}

function rounded(x) {
  return x < 10 ? x.toFixed(1) : String(Math.round(x));
}

function linkData(l) {
  const pps = (l.pps_ab || 0) + (l.pps_ba || 0);
  const marks = (l.marks_ab || 0) + (l.marks_ba || 0);
  const known = l.pps_ab !== null && l.pps_ba !== null;
  return {width: rateWidth(pps), colour: marks > 0 ? "#e6550d" : (pps > 0 ? "#555" : "#bbb"),
          label: known && pps > 0 ? `${rounded(pps)} pps` + (marks > 0 ? ` ${rounded(marks)} CE/s` : "") : ""};
}

function build(state, live = true) {
  const pos = positions(state);
  const elements = [];
  for (const s of state.switches) {
    elements.push({group: "nodes", data: {id: s.name, label: s.name, kind: "switch", colour: "#888"},
                   position: pos[s.name]});
  }
  for (const h of state.hosts) {
    elements.push({group: "nodes", data: {id: h.name, label: h.name, kind: "host", colour: "#ccc"},
                   position: pos[h.name]});
  }
  for (const l of state.links) {
    elements.push({group: "edges", data: {id: `${l.a}--${l.b}`, source: l.a, target: l.b,
                                            width: 1.5, colour: "#bbb", label: ""}});
  }
  cy = cytoscape({
    container: document.getElementById("graph"),
    elements,
    layout: {name: "preset", fit: true, padding: 30},
    autoungrabify: true,
    style: [
      {selector: "node", style: {"label": "data(label)", "font-size": 11,
                                 "text-valign": "center", "color": "#fff"}},
      {selector: "node[kind = 'switch']", style: {"shape": "round-rectangle", "width": 44,
                                                  "height": 26, "background-color": "#888"}},
      {selector: "node[kind = 'host']", style: {"shape": "ellipse", "width": 30, "height": 30,
                                                "background-color": "#ccc", "color": "#222"}},
      {selector: "node.blue", style: {"background-color": "data(colour)"}},
      {selector: "node.down", style: {"border-width": 3, "border-color": RED}},
      {selector: "node:selected", style: {"border-width": 3, "border-color": "#000"}},
      {selector: "edge", style: {"width": "data(width)", "line-color": "data(colour)",
                                 "label": "data(label)", "font-size": 9,
                                 "text-background-color": "#fff",
                                 "text-background-opacity": 0.8}},
      {selector: "edge.shared", style: {"line-style": "dashed", "line-color": "#e6550d"}},
    ],
  });
  if (live) cy.on("tap", "node[kind = 'switch']", ev => showSwitch(ev.target.id()));
}

function update(state) {
  const key = JSON.stringify([state.switches.map(s => s.name), state.hosts.map(h => h.name),
                              state.links.map(l => [l.a, l.b])]);
  if (!cy || key !== shapeKey) { build(state); shapeKey = key; }
  document.getElementById("topology").textContent = state.topology;
  cy.batch(() => {
    for (const s of state.switches) {
      const n = cy.getElementById(s.name);
      const blue = s.aggregates_for.length > 0;
      n.toggleClass("blue", blue);
      n.toggleClass("down", s.state !== "primary");
      n.data("colour", blue ? jobColour(s.aggregates_for[0]) : "#888");
      n.data("label", blue ? `${s.name} [${s.aggregates_for.join(",")}]` : s.name);
      n.data("state", s.state);
    }
    for (const l of state.links) {
      const e = cy.getElementById(`${l.a}--${l.b}`);
      const d = linkData(l);
      e.data("width", d.width);
      e.data("colour", d.colour);
      e.data("label", d.label);
    }
  });
  jobsTable(state.jobs, state.plan);
  eventLog(state.events || []);
  document.body.dataset.blue = state.switches.filter(s => s.aggregates_for.length)
    .map(s => s.name).sort().join(",");
  document.body.dataset.switches = String(state.switches.length);
  document.body.dataset.hosts = String(state.hosts.length);
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "–" : String(text);
  row.appendChild(td);
}

// CASSINI's circle of one shared link: the perimeter is the jobs' common period, each
// job's communication phase an arc in its colour, rotated by its shift (0 at the top,
// clockwise); each job on a ring of its own, so arcs that overlap in time both show.
const SVG = "http://www.w3.org/2000/svg";

function arcPath(r, c, from, to) {
  const at = a => [c + r * Math.sin(a), c - r * Math.cos(a)];
  const [x1, y1] = at(from);
  const [x2, y2] = at(to);
  return `M ${x1.toFixed(2)} ${y1.toFixed(2)} A ${r} ${r} 0 ${to - from > Math.PI ? 1 : 0} 1 ` +
    `${x2.toFixed(2)} ${y2.toFixed(2)}`;
}

function circleSvg(circle) {
  const size = 48, c = size / 2, r = 19;
  const width = Math.max(2, Math.min(5, 12 / circle.jobs.length));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", size); svg.setAttribute("height", size);
  svg.setAttribute("class", "circle");
  svg.dataset.link = circle.link;
  const title = document.createElementNS(SVG, "title");
  title.textContent = `${circle.link}: ${circle.jobs.join(", ")} on a ${circle.period_ms} ms ` +
    "circle" + (circle.exact ? "" : " (approximate)");
  const ring = document.createElementNS(SVG, "circle");
  const inner = r - width * (circle.jobs.length - 0.5);
  ring.setAttribute("cx", c); ring.setAttribute("cy", c);
  ring.setAttribute("r", (r + width / 2 + inner) / 2);
  ring.setAttribute("fill", "none"); ring.setAttribute("stroke", "#eee");
  ring.setAttribute("stroke-width", r + width / 2 - inner);
  svg.append(title, ring);
  for (const a of circle.arcs) {
    const from = 2 * Math.PI * a.start_ms / circle.period_ms;
    const to = Math.min(from + 2 * Math.PI * (a.end_ms - a.start_ms) / circle.period_ms,
                        from + 2 * Math.PI - 1e-3);
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", arcPath(r - width * circle.jobs.indexOf(a.name), c, from, to));
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", jobColour(a.job));
    path.setAttribute("stroke-width", width);
    path.dataset.job = a.name;
    svg.appendChild(path);
  }
  return svg;
}

function circlesCell(row, circles) {
  const td = document.createElement("td");
  for (const c of circles || []) {
    const box = document.createElement("span");
    box.className = "shared-link";
    box.append(circleSvg(c), document.createTextNode(c.link));
    td.appendChild(box);
  }
  if (!td.childNodes.length) td.textContent = "–";
  row.appendChild(td);
}

function jobsTable(jobs, plan) {
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  const seen = new Set();
  for (const j of jobs) {
    const tr = document.createElement("tr");
    cell(tr, j.name); cell(tr, j.job); cell(tr, j.state); cell(tr, (j.blue || []).join(", "));
    cell(tr, `${j.iterations_done ?? 0} / ${j.iterations}`);
    cell(tr, j.mean_iteration_ms === null ? null : Number(j.mean_iteration_ms).toFixed(1));
    cell(tr, j.marks);
    circlesCell(tr, j.circles);
    if (j.job !== null) seen.add(j.job);
    body.appendChild(tr);
  }
  for (const p of plan) {  // a --workload plan: its jobs are not admitted ones
    if (seen.has(p.job)) continue;
    const tr = document.createElement("tr");
    cell(tr, `plan (${p.strategy}, k = ${p.k})`); cell(tr, p.job); cell(tr, "planned");
    cell(tr, p.blue.join(", ")); cell(tr, null); cell(tr, null); cell(tr, null); cell(tr, null);
    body.appendChild(tr);
  }
}

function eventLog(events) {
  const list = document.getElementById("events");
  list.replaceChildren();
  for (const e of events.slice(-50).reverse()) {
    const li = document.createElement("li");
    li.textContent = `${new Date(e.time * 1000).toLocaleTimeString()} ${e.text}`;
    list.appendChild(li);
  }
}

async function showSwitch(name) {
  selected = name;
  const box = document.getElementById("details");
  box.textContent = `reading ${name}…`;
  const r = await fetch(api(`/api/switch/${encodeURIComponent(name)}`));
  if (selected !== name) return;
  if (!r.ok) { box.textContent = `${name}: ${r.status}`; return; }
  const s = await r.json();
  box.replaceChildren();
  const head = document.createElement("p");
  head.textContent = `${s.name}: ${s.state}, generation ${s.synced}, restores ${s.restores}` +
    (s.error ? `, error: ${s.error}` : "") + (s.read_error ? ` (${s.read_error})` : "");
  if (s.error || s.read_error) head.className = "bad";
  const entries = document.createElement("pre");
  entries.textContent = s.entries.join("\n") || "(no entries)";
  const counters = document.createElement("pre");
  counters.textContent = s.counters.join("\n");
  box.append(head, entries, counters);
}

function connect() {
  const status = document.getElementById("status");
  const source = new EventSource(api("/api/events"));
  source.addEventListener("state", ev => {
    update(JSON.parse(ev.data));
    status.textContent = `live, ${new Date().toLocaleTimeString()}`;
    status.className = "";
  });
  source.onerror = () => { status.textContent = "disconnected (retrying)"; status.className = "bad"; };
}

// `innet view RUN_FOLDER`: a finished run's topology drawn as the live page draws it, one
// button per strategy, policy or arm of its results (blue switches, and on each link what
// the run counted there), its plots, summary and results beside, every file as a link.
function element(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

// A saved page (`innet view --html`) carries the folder and its files; a served one asks.
const SAVED = typeof INNET_FOLDER !== "undefined";

function fileUrl(name) {
  return SAVED ? INNET_FILES[name] : api(`/files/${encodeURIComponent(name)}`);
}

function showView(view, index) {
  const colour = new Map();
  view.jobs.forEach((j, i) => {
    for (const s of j.blue) if (!colour.has(s)) colour.set(s, jobColour(i + 1));
  });
  const loads = {};
  cy.batch(() => {
    for (const n of cy.nodes("[kind = 'switch']")) {
      const blue = view.blue.includes(n.id());
      n.toggleClass("blue", blue);
      n.data("colour", blue ? (colour.get(n.id()) || jobColour(1)) : "#888");
    }
    for (const e of cy.edges()) {
      e.removeClass("shared");
      e.data({width: 1.5, colour: "#bbb", label: "", load: null});
    }
    for (const l of view.loads || []) {
      const id = `${l.a}--${l.b}`;
      loads[id] = l.packets;
      cy.getElementById(id).data({width: rateWidth(l.packets), colour: "#555",
                                  label: `${l.packets} pkts`, load: l.packets});
    }
    for (const l of view.marks || []) {
      const e = cy.getElementById(`${l.a}--${l.b}`);
      const load = e.data("load");
      e.data({width: load === null ? 3 : e.data("width"), colour: "#e6550d",
              label: (load === null ? "" : `${load} pkts, `) + `${l.marks} CE`});
    }
    for (const l of view.shared || []) cy.getElementById(`${l.a}--${l.b}`).addClass("shared");
  });
  document.querySelectorAll("#views button").forEach((b, i) => {
    b.className = i === index ? "chosen" : "";
  });
  const info = document.getElementById("view-info");
  info.replaceChildren();
  for (const n of view.notes) info.appendChild(element("p", n, "note"));
  if (view.facts.length) info.appendChild(element("p", view.facts.join("; ")));
  if (view.jobs.length) {
    const table = element("table");
    const head = element("tr");
    for (const h of ["job", "hosts", "blue", "shift ms"]) head.appendChild(element("th", h));
    table.appendChild(head);
    for (const j of view.jobs) {
      const tr = element("tr");
      cell(tr, j.name); cell(tr, j.hosts.join(", ") || null); cell(tr, j.blue.join(", ") || null);
      cell(tr, j.shift_ms === null ? null : Number(j.shift_ms).toFixed(1));
      table.appendChild(tr);
    }
    info.appendChild(table);
  }
  document.body.dataset.view = view.label;
  document.body.dataset.blue = [...view.blue].sort().join(",");
  document.body.dataset.loads = JSON.stringify(loads);
}

function folderGraph(f) {
  const box = document.getElementById("details");
  if (f.graph === null) {
    box.replaceChildren(element("p", f.graph_note, "note"));
    return;
  }
  build(f.graph, false);
  document.body.dataset.nodes = String(cy.nodes().length);
  const buttons = element("div");
  buttons.id = "views";
  f.views.forEach((v, i) => {
    const b = element("button", v.label);
    b.addEventListener("click", () => showView(v, i));
    buttons.appendChild(b);
  });
  const info = element("div");
  info.id = "view-info";
  box.replaceChildren(buttons, info);
  if (f.views.length) showView(f.views[0], 0);
  else info.appendChild(element("p", f.views_note, "note"));
}

async function showFolder() {
  const f = SAVED ? INNET_FOLDER : await (await fetch(api("/api/folder"))).json();
  document.getElementById("topology").textContent = `run folder ${f.folder}`;
  document.getElementById("status").textContent =
    SAVED ? "finished run (saved page)" : "finished run (read-only)";
  document.getElementById("h-details").textContent = "Strategy, policy or arm";
  folderGraph(f);
  const plots = f.files.filter(x => x.kind.startsWith("image/") && fileUrl(x.name)).map(file => {
    const img = element("img");
    img.src = fileUrl(file.name);
    img.alt = file.name;
    img.style.maxWidth = "100%";
    return img;
  });
  if (f.graph === null) {  // nothing to draw: the plots where the graph would be
    const graph = document.getElementById("graph");
    graph.style.overflow = "auto";
    graph.replaceChildren(...plots);
  }
  const summary = element("pre", f.summary || "(no summary.md)");
  const results = element("pre", f.results === null ? "(no results.json)"
    : JSON.stringify(f.results, null, 1).slice(0, 20000));
  const jobs = document.querySelector("#jobs");
  const more = element("div");
  more.id = "folder-files";
  more.append(summary, ...(f.graph === null ? [] : plots), results);
  jobs.replaceWith(more);
  document.getElementById("h-jobs").textContent = "Summary, plots and results";
  document.getElementById("h-events").textContent = "Files";
  const list = document.getElementById("events");
  list.replaceChildren();
  for (const file of f.files) {
    const li = element("li");
    const url = fileUrl(file.name);
    if (url) {
      const a = element("a", `${file.name} (${file.bytes} B)`);
      a.href = url;
      if (SAVED) a.download = file.name;
      li.appendChild(a);
    } else {
      li.appendChild(element("span", `${file.name} (${file.bytes} B, too large for this page)`));
    }
    list.appendChild(li);
  }
  document.body.dataset.files = String(f.files.length);
}

if (SAVED) showFolder();
else fetch(api("/api/info")).then(r => r.json()).then(info => {
  if (info.mode === "folder") showFolder(); else connect();
});
