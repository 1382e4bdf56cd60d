// sluice's live page: polls GET /v1/rules every second and runs bursts
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

// sum5 adds per-second counts up into 5-second buckets.
function sum5(a) {
  const out = [];
  for (let i = 0; i < a.length; i += 5) out.push(a.slice(i, i + 5).reduce((x, y) => x + y, 0));
  return out;
}

// spark draws counts per 5 seconds as bars: all decisions grey, refusals
// red, shadow would-be refusals purple.
function spark(perSecond) {
  const series = {
    decisions: sum5(perSecond.decisions),
    refused: sum5(perSecond.refused),
    shadow_refused: sum5(perSecond.shadow_refused),
  };
  const n = series.decisions.length, w = 240, h = 40;
  const peak = Math.max(1, ...series.decisions);
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const bw = w / n;
  const bar = (i, v, color) => {
    if (!v) return;
    const r = document.createElementNS(SVGNS, "rect");
    const bh = Math.max(1, h * v / peak);
    r.setAttribute("x", (i * bw).toFixed(2));
    r.setAttribute("y", (h - bh).toFixed(2));
    r.setAttribute("width", Math.max(bw - 1, 1).toFixed(2));
    r.setAttribute("height", bh.toFixed(2));
    r.setAttribute("fill", color);
    svg.append(r);
  };
  for (let i = 0; i < n; i++) {
    bar(i, series.decisions[i], "#bdbdbd");
    bar(i, series.refused[i], "#c62828");
    bar(i, series.shadow_refused[i], "#7e57c2");
  }
  const base = document.createElementNS(SVGNS, "line");
  base.setAttribute("x1", 0); base.setAttribute("x2", w);
  base.setAttribute("y1", h - .5); base.setAttribute("y2", h - .5);
  base.setAttribute("stroke", "#999");
  svg.append(base);
  const t = document.createElementNS(SVGNS, "title");
  t.textContent = `peak ${peak} per 5 s`;
  svg.append(t);
  return svg;
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
        el("td", {}, r.name ? `${r.rule} (${r.name})` : r.rule),
        el("td", {}, policyText(r)),
        tags,
        el("td", { class: "num decisions" }, String(r.decisions)),
        el("td", { class: "num refused" }, String(r.refused)),
        el("td", { class: "num" }, String(r.shadow_refused)),
        el("td", { class: "num" }, `${last(r.series.decisions)} / ${last(r.series.refused) + last(r.series.shadow_refused)}`),
        el("td", {}, spark(r.series)),
        el("td", {}, nearList(r.near_limit))));
    }
    const table = el("table", {},
      el("thead", {}, el("tr", {}, ...["rule", "policy", "mode", "decisions", "refused", "shadow refused", "last min (all / refused)", "per 5 s, last 5 min", "keys nearest the limit"].map((h) => el("th", {}, h)))),
      tbody);
    frag.append(el("div", { class: "domain" }, el("h3", {}, `domain ${domain}`), table));
  }
  root.replaceChildren(frag);
  renderUnmatched(data);

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
    const resp = await fetch("v1/rules", { cache: "no-store" });
    if (resp.ok) render(await resp.json());
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
