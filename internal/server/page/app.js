// sluice's live page: polls GET /v1/rules and GET /v1/status every second and runs bursts
// through POST /v1/simulate. No external assets; works offline.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

// sum5 adds per-second counts up into 5-second buckets aligned to
// multiples of 5 s since the Unix epoch, so a bar keeps its height from
// one poll to the next. a[i] counts the second now − (a.length − 1) + i.
function sum5(a, now) {
  const out = [];
  const first = now - a.length + 1;
  const lead = ((first % 5) + 5) % 5; // seconds of the first bucket before first
  for (let i = -lead; i < a.length; i += 5) {
    let t = 0;
    for (let j = Math.max(i, 0); j < Math.min(i + 5, a.length); j++) t += a[j];
    out.push(t);
  }
  return out;
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// spark draws per-second layers as bars per 5 seconds, each layer a
// {values, color} drawn over the one before, with a scale: the y axis from
// 0 to the peak of the first layer (per 5 s), the x axis from the history's
// start to now.
function spark(layers, now, seconds) {
  const series = layers.map((l) => ({ values: sum5(l.values, now), color: l.color }));
  const n = series[0].values.length;
  const left = 34, top = 6, pw = 240, ph = 40, w = left + pw + 6, h = top + ph + 14;
  const peak = Math.max(0, ...series[0].values);
  const scale = Math.max(1, peak);
  const svg = svgEl("svg", { class: "spark", width: w, height: h, viewBox: `0 0 ${w} ${h}` });
  const bw = pw / n;
  for (const l of series) {
    l.values.forEach((v, i) => {
      if (!v) return;
      const bh = Math.max(1, ph * v / scale);
      svg.append(svgEl("rect", {
        x: (left + i * bw).toFixed(2), y: (top + ph - bh).toFixed(2),
        width: Math.max(bw - 1, 1).toFixed(2), height: bh.toFixed(2), fill: l.color,
      }));
    });
  }
  svg.append(svgEl("line", { x1: left, x2: left + pw, y1: top + ph - .5, y2: top + ph - .5, stroke: "#999" }));
  svg.append(svgEl("line", { x1: left - .5, x2: left - .5, y1: top, y2: top + ph, stroke: "#999" }));
  svg.append(svgEl("text", { class: "axis peak", x: left - 3, y: top + 7, "text-anchor": "end" }, String(peak)));
  svg.append(svgEl("text", { class: "axis", x: left - 3, y: top + ph, "text-anchor": "end" }, "0"));
  const mins = Math.round(seconds / 60);
  svg.append(svgEl("text", { class: "axis", x: left, y: h - 2, "text-anchor": "start" }, `−${mins} min`));
  svg.append(svgEl("text", { class: "axis", x: left + pw, y: h - 2, "text-anchor": "end" }, "now"));
  svg.append(svgEl("text", { class: "axis", x: left + pw / 2, y: h - 2, "text-anchor": "middle" }, "per 5 s"));
  svg.append(svgEl("title", {}, `peak ${peak} per 5 s over the last ${mins} min`));
  return svg;
}

function ruleSpark(r, data) {
  return spark([
    { values: r.series.decisions, color: "#bdbdbd" },
    { values: r.series.refused, color: "#c62828" },
    { values: r.series.shadow_refused, color: "#7e57c2" },
  ], data.now, data.history_seconds);
}

function fmtPeriod(s) {
  if (s >= 3600 && s % 3600 === 0) return `${s / 3600}h`;
  if (s >= 60 && s % 60 === 0) return `${s / 60}m`;
  return `${s}s`;
}

function policyText(r) {
  if (r.unlimited) return "unlimited";
  if (r.deny) return "deny (0)";
  let t = `${r.algorithm} ${r.limit}/${fmtPeriod(r.period)}`;
  if (r.burst) t += ` burst ${r.burst}`;
  return t;
}

function nearList(keys) {
  const ul = el("ul", { class: "near" });
  for (const k of keys.slice(0, 5)) {
    const pct = Math.min(100, Math.round(k.used * 100));
    const b = el("span", { class: k.used >= 1 ? "bar over" : "bar" });
    b.style.width = `${Math.max(2, pct * 0.6)}px`;
    const extra = k.refused ? `, ${k.refused} refused` : "";
    ul.append(el("li", {}, b, `${k.key} ${pct}%${extra}`));
  }
  if (!keys.length) ul.append(el("li", {}, "—"));
  return ul;
}

// renderUnmatched lists, per domain, the requests that matched no rule.
function renderUnmatched(data) {
  const box = document.getElementById("unmatched");
  const list = data.unmatched || [];
  if (!list.length) {
    box.replaceChildren(el("p", { class: "status" }, "none since start"));
    return;
  }
  const tbody = el("tbody");
  for (const u of list) {
    const ago = Math.max(0, data.now - u.last_at);
    tbody.append(el("tr", { "data-domain": u.domain },
      el("td", {}, u.domain),
      el("td", { class: "num requests" }, String(u.requests)),
      el("td", {}, u.last_domain),
      el("td", { class: "keys" }, u.last_keys),
      el("td", { class: "num" }, `${ago} s ago`)));
  }
  box.replaceChildren(el("table", { class: "bad" },
    el("thead", {}, el("tr", {}, ...["domain", "requests", "last: domain sent", "last: descriptor keys", "last seen"].map((h) => el("th", {}, h)))),
    tbody));
}

// renderRLQS shows, per rule and bucket, how its limit is divided among
// the RLQS streams (Envoys) that report it.
function renderRLQS(data) {
  const box = document.getElementById("rlqs");
  const tbody = el("tbody");
  for (const r of data.rules) {
    for (const d of r.rlqs || []) {
      const per = fmtPeriod(d.fill_seconds);
      const streams = el("ul", { class: "streams" });
      for (const s of d.streams) {
        const demand = s.demand === null ? "demand not yet known" : `demand ${s.demand.toFixed(1)}/s`;
        streams.append(el("li", { "data-stream": s.stream }, `${s.stream}: ${demand}, assigned ${s.grant}/${per}`));
      }
      tbody.append(el("tr", { "data-rule": r.rule, "data-bucket": d.bucket },
        el("td", {}, r.name),
        el("td", { class: "bucket" }, d.bucket),
        el("td", { class: "num" }, `${d.budget}/${per}`),
        el("td", { class: "num" }, `${d.fleet_demand.toFixed(1)}/s`),
        el("td", { class: "num grant" }, `${d.fleet_grant}/${per}`),
        el("td", { class: "num" }, String(d.replicas)),
        el("td", { class: d.failing ? "bad" : "" }, d.failing ? "store failing: the rule's failure mode decides" : "dividing"),
        el("td", {}, streams)));
    }
  }
  if (!tbody.children.length) {
    box.replaceChildren(el("p", { class: "status" }, "no RLQS streams report a bucket"));
    return;
  }
  box.replaceChildren(el("table", { class: "rlqs" },
    el("thead", {}, el("tr", {}, ...["rule", "bucket", "limit", "fleet demand", "fleet assigned", "replicas", "state", "this replica's streams"].map((h) => el("th", {}, h)))),
    tbody));
}

function fmtUptime(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return `${d}d ${h}h ${m}m`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

const stateText = { ok: "ok", failing: "FAILING", breaker_open: "FAILING: circuit breaker open" };

// renderStatus shows the build, the uptime, the store and its health, and
// the replica count (GET /v1/status).
function renderStatus(st) {
  document.getElementById("svc-version").textContent = `sluice ${st.version} ${st.go_version}`;
  document.getElementById("svc-uptime").textContent = `up ${fmtUptime(st.uptime_seconds)} (since ${new Date(st.started_at).toLocaleString()})`;
  const s = st.store;
  const state = el("span", { id: "store-state", "data-state": s.state, class: s.state === "ok" ? "tag ok" : "tag closed" }, stateText[s.state] || s.state);
  const rows = [
    ["store", el("span", {}, el("span", { id: "store-name" }, `${s.name} (${s.kind})`), " ", state)],
    ["failed decisions", el("span", { id: "store-failures" }, `${s.failures_last_minute} in the last minute, ${s.failures} since start`)],
    ["failed per 5 s", spark([{ values: s.failure_series, color: "#c62828" }], st.now, s.failure_series.length)],
  ];
  if (s.last_error) {
    const ago = Math.max(0, Math.round(st.now - Date.parse(s.last_error_at) / 1000));
    rows.push(["last error", el("span", { id: "store-last-error" }, `${s.last_error} (${ago} s ago)`)]);
  }
  if (s.redis) {
    const r = s.redis;
    const tbl = el("table", { class: "counters" });
    const counters = [["calls", "calls"], ["errors", "errors"], ["timeouts", "timeouts"], ["caller_timeouts", "caller timeouts"],
      ["heartbeat_timeouts", "heartbeat timeouts"], ["short_circuited", "short-circuited"], ["breaker_opens", "breaker opens"],
      ["dial_errors", "dial errors"]];
    tbl.append(el("tr", {}, ...counters.map(([, label]) => el("th", {}, label))));
    tbl.append(el("tr", {}, ...counters.map(([k]) => el("td", { class: "num", "data-counter": k }, String(r[k])))));
    rows.push(["circuit breaker", el("span", { id: "redis-breaker", class: r.breaker_open ? "bad" : "" }, r.breaker_open ? "open: calls fail at once" : "closed")]);
    rows.push(["sluice_redis_*", tbl]);
  }
  const rp = st.replicas;
  rows.push(["replicas", el("span", { id: "replicas" },
    `${rp.count} (${rp.counted_by === "heartbeats" ? "counted by heartbeats in the store" : rp.counted_by}); ` +
    `${rp.fail_local_rules} rules fail local: while the store fails each replica decides on 1/${rp.count} of their limits`)]);
  const tbody = el("tbody");
  for (const [k, v] of rows) tbody.append(el("tr", {}, el("th", {}, k), el("td", {}, v)));
  document.getElementById("service").replaceChildren(el("table", { class: "service" }, tbody));
}

let simRulesKey = "";

function render(data) {
  const st = document.getElementById("config-status");
  const c = data.config;
  const when = c.loaded_at ? new Date(c.loaded_at).toLocaleTimeString() : "never";
  let text = `config version ${c.version}, loaded ${when}: ${c.summary}`;
  st.className = "status";
  if (c.last_reload && !c.last_reload.ok && c.last_reload.error) {
    text += ` — last reload FAILED (${c.last_reload.error}); the configuration in force stays`;
    st.className = "status bad";
  }
  st.textContent = text;

  const root = document.getElementById("rules");
  const byDomain = new Map();
  for (const r of data.rules) {
    if (!byDomain.has(r.domain)) byDomain.set(r.domain, []);
    byDomain.get(r.domain).push(r);
  }
  const frag = document.createDocumentFragment();
  for (const [domain, rules] of byDomain) {
    const tbody = el("tbody");
    for (const r of rules) {
      const tags = el("td");
      if (r.shadow_mode) tags.append(el("span", { class: "tag shadow" }, "shadow"), " ");
      tags.append(el("span", { class: r.failure_mode === "closed" ? "tag closed" : "tag" }, `fail ${r.failure_mode}`));
      const last = (a) => a.slice(-60).reduce((x, y) => x + y, 0);
      tbody.append(el("tr", { "data-rule": r.rule },
        el("td", { class: "name" }, r.name && r.name !== r.rule ? `${r.name} (${r.rule})` : r.rule),
        el("td", {}, policyText(r)),
        tags,
        el("td", { class: "num decisions" }, String(r.decisions)),
        el("td", { class: "num refused" }, String(r.refused)),
        el("td", { class: "num" }, String(r.shadow_refused)),
        el("td", { class: "num" }, `${last(r.series.decisions)} / ${last(r.series.refused) + last(r.series.shadow_refused)}`),
        el("td", {}, ruleSpark(r, data)),
        el("td", {}, nearList(r.near_limit))));
    }
    const table = el("table", {},
      el("thead", {}, el("tr", {}, ...["rule", "policy", "mode", "decisions", "refused", "shadow refused", "last min (all / refused)", "per 5 s, last 5 min", "keys nearest the limit"].map((h) => el("th", {}, h)))),
      tbody);
    frag.append(el("div", { class: "domain" }, el("h3", {}, `domain ${domain}`), table));
  }
  root.replaceChildren(frag);
  renderUnmatched(data);
  renderRLQS(data);

  // The simulation panel's rule list, rebuilt only when the rules change.
  const sim = data.rules.filter((r) => !r.unlimited && !r.deny);
  const key = sim.map((r) => r.domain + "/" + r.rule + "/" + policyText(r)).join("|");
  if (key !== simRulesKey) {
    simRulesKey = key;
    const sel = document.getElementById("sim-rule");
    const prev = sel.value;
    sel.replaceChildren(...sim.map((r) => el("option", { value: JSON.stringify([r.domain, r.rule]) }, `${r.domain} ${r.rule}: ${policyText(r)}`)));
    if (prev) sel.value = prev;
  }
}

async function poll() {
  try {
    const [rules, status] = await Promise.all([
      fetch("v1/rules", { cache: "no-store" }),
      fetch("v1/status", { cache: "no-store" }),
    ]);
    if (rules.ok) render(await rules.json());
    if (status.ok) renderStatus(await status.json());
  } catch (e) {
    document.getElementById("config-status").textContent = "cannot reach the server";
  }
  setTimeout(poll, 1000);
}

async function runSim(ev) {
  ev.preventDefault();
  const sel = document.getElementById("sim-rule");
  const [domain, rule] = JSON.parse(sel.value);
  const pattern = document.getElementById("sim-pattern").value;
  const summary = document.getElementById("sim-summary");
  const out = document.getElementById("sim-result");
  summary.className = "status";
  summary.textContent = "running…";
  const resp = await fetch("v1/simulate", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ domain, rule, pattern }),
  });
  const body = await resp.json();
  if (!resp.ok) {
    summary.className = "status bad";
    summary.textContent = body.error;
    out.replaceChildren();
    return;
  }
  summary.textContent = `${body.policy}: ${body.admitted} admitted, ${body.delayed} delayed, ${body.refused} refused`;
  const doc = new DOMParser().parseFromString(body.svg, "image/svg+xml");
  out.replaceChildren(document.importNode(doc.documentElement, true));
}

document.getElementById("sim-form").addEventListener("submit", runSim);
poll();
