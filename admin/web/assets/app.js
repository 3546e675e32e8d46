// The status page's script: it polls the read-only API once a second and
// redraws the page from what it gets, so the page follows sluice without a
// reload. It builds the DOM with textContent only: addresses, digests and
// event details are data, never markup.
"use strict";

const refreshMs = 1000;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function get(path) {
  const r = await fetch(path, { cache: "no-store", credentials: "same-origin" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

// node draws one backend: its address, role, state and figures. Pool use
// is the connections in use out of the pool's size.
function node(b, pool) {
  const n = el("div", "node state-" + b.state);
  n.dataset.address = b.address;
  n.dataset.role = b.role;
  n.dataset.state = b.state;
  n.append(el("div", "addr", b.address), el("div", "role", b.role.replace("_", " ")), el("span", "state", b.state));
  const dl = el("dl");
  const add = (k, v) => { dl.append(el("dt", "", k), el("dd", "k-" + k, v === "" ? "–" : v)); };
  if (b.role === "replica") add("lag", b.lag);
  add("load", b.load);
  add("weight", b.weight);
  const size = pool ? pool.size : "";
  add("pool", b.conn_in_use + " in use / " + (b.conn_open || "0") + " open" + (size ? " of " + size : ""));
  add("queries", b.queries);
  n.append(dl);
  if (size) {
    const bar = el("div", "pool"), fill = el("div");
    fill.style.width = Math.min(100, 100 * Number(b.conn_in_use) / Number(size)) + "%";
    bar.append(fill);
    n.append(bar);
  }
  if (b.last_error && b.state !== "up") n.append(el("div", "lasterr", b.last_error));
  return n;
}

function drawClusters(data) {
  const pools = new Map(data.pools.map(p => [p.address, p]));
  const box = document.getElementById("clusters");
  const out = [];
  for (const c of data.clusters) {
    const d = el("div", "cluster");
    d.dataset.cluster = c.cluster;
    d.append(el("h3", "", c.cluster));
    const meta = el("div", "meta", "balance " + (c.balance || "round-robin") + " · epoch " + c.epoch);
    if (c.writes_refused) meta.append(" · ", el("span", "refused", "writes refused: " + c.writes_refused));
    d.append(meta);
    const mine = data.backends.filter(b => b.cluster === c.cluster);
    const tiers = [["master", mine.filter(b => b.role === "master")],
      ["replicas", mine.filter(b => b.role === "replica")],
      ["fenced", mine.filter(b => b.role !== "master" && b.role !== "replica")]];
    for (const [name, bs] of tiers) {
      if (bs.length === 0) continue;
      const t = el("div", "tier " + name);
      for (const b of bs) t.append(node(b, pools.get(b.address)));
      d.append(t);
    }
    out.push(d);
  }
  box.replaceChildren(...out);
}

function drawTable(id, rows, cols) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows.map(r => {
    const tr = el("tr");
    for (const c of cols) tr.append(el("td", "", r[c]));
    return tr;
  }));
}

function drawEvents(events) {
  const list = document.getElementById("events");
  // Newest first: the last failover is what a DBA looks for.
  list.replaceChildren(...events.slice().reverse().map(e => {
    const li = el("li");
    li.append(el("span", "when", e.time + " UTC"), el("span", "kind kind-" + e.kind, e.kind));
    const where = [e.cluster, e.backend].filter(Boolean).join(" ");
    if (where) li.append(el("span", "where", where + " "));
    li.append(el("span", "detail", e.detail + (e.epoch !== "0" ? " (epoch " + e.epoch + ")" : "")));
    return li;
  }));
}

async function refresh() {
  const err = document.getElementById("error");
  try {
    const [clusters, sessions, digests, events] = await Promise.all([
      get("api/v1/clusters"), get("api/v1/sessions"), get("api/v1/digests?limit=10"), get("api/v1/events")]);
    drawClusters(clusters);
    drawTable("sessions", sessions.sessions, ["id", "user", "client", "schema", "backend", "state", "time", "digest", "pinned"]);
    document.getElementById("session-count").textContent = "(" + sessions.sessions.length + ")";
    drawTable("digests", digests.digests, ["digest", "count", "total_ms", "avg_ms", "max_ms", "rows", "errors", "route", "digest_id"]);
    drawEvents(events.events);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    err.hidden = true;
  } catch (e) {
    // sluice is down or restarting: say so and keep the last picture.
    err.textContent = "cannot reach sluice: " + e.message;
    err.hidden = false;
  } finally {
    setTimeout(refresh, refreshMs);
  }
}

refresh();
