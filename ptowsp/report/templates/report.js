// The timeline report's page: draws the run embedded in #wsp-data on one <canvas>, with zoom,
// pan and hover. ptowsp/report/timeline.py says what the data holds; docs/tools.md ("The
// timeline report") what the page shows.
//
// Built to stay fast at 100,000 tasks and more: no DOM node per task; each lane's tasks are
// columns sorted by start, so the visible window is found by binary search; tasks narrower
// than a pixel are merged into one block per run of them (level of detail). The page writes
// its own check into #wsp-selfcheck (tasks and lanes drawn, any error caught), which the tests
// read from the DOM; `window.wspReport` exposes the functions the tests call.
"use strict";

(function () {
  const check = { ok: false, error: null, tasks: 0, lanes: 0, rects: 0, blocks: 0,
                  critical: 0, load_ms: null };
  const checkNode = document.getElementById("wsp-selfcheck");
  const publish = () => { checkNode.textContent = JSON.stringify(check); };
  window.addEventListener("error", (e) => {
    check.ok = false;
    check.error = String(e.message || e);
    publish();
  });
  const began = performance.now();
  try {
    window.wspReport = makeReport(JSON.parse(document.getElementById("wsp-data").textContent));
    const drawn = window.wspReport.draw();
    Object.assign(check, { ok: true, tasks: drawn.tasks, lanes: drawn.lanes, rects: drawn.rects,
                           blocks: drawn.blocks, critical: window.wspReport.critical.length });
  } catch (e) {
    check.error = String((e && e.stack) || e);
  }
  check.load_ms = performance.now() - began;
  publish();
})();

function makeReport(data) {
  const ROW = 18, GROUP = 22, COUNTER = 44, AXIS = 24, LABEL = 170, MIN_SPAN = 1000;  // px; ps
  const canvas = document.getElementById("wsp-canvas");
  const tip = document.getElementById("wsp-tip");
  const ctx = canvas.getContext("2d");

  // -- the data as typed arrays --------------------------------------------------------------
  const lanes = data.lanes.map((l) => {
    const n = l.start.length;
    const start = Float64Array.from(l.start), dur = Float64Array.from(l.dur);
    const coordAt = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) coordAt[i + 1] = coordAt[i] + l.nc[i];
    let maxDur = 0;
    for (let i = 0; i < n; i++) if (dur[i] > maxDur) maxDur = dur[i];
    return { name: l.name, group: l.group, n, start, dur, maxDur, coordAt,
             kernel: Int32Array.from(l.kernel), task: Int32Array.from(l.task),
             coords: Int32Array.from(l.coords), crit: new Uint8Array(n) };
  });
  const groups = data.groups;
  const counters = data.counters.map((c) => ({ group: c.group, name: c.name,
    t: Float64Array.from(c.t), v: Float64Array.from(c.v),
    max: c.v.reduce((m, v) => Math.max(m, v), 1) }));
  const critical = [];
  for (const p of data.critical) {
    for (let k = 0; k < p.lane.length; k++) {
      critical.push({ lane: p.lane[k], index: p.index[k], next: k + 1 < p.lane.length });
      lanes[p.lane[k]].crit[p.index[k]] = 1;
    }
  }
  // per group, each task index's (lane, index): hover shows the task on the other timelines
  const where = groups.map(() => new Map());
  lanes.forEach((l, li) => {
    for (let i = 0; i < l.n; i++) if (l.task[i] >= 0) where[l.group].set(l.task[i], [li, i]);
  });

  // -- layout: a header row per group, then its lanes, then its counters ---------------------
  const rows = [];  // {kind, y, h, lane | counter | group}
  let y = AXIS;
  groups.forEach((g, gi) => {
    rows.push({ kind: "group", y, h: GROUP, group: gi });
    y += GROUP;
    const idle = [];
    for (const li of g.lanes) {
      if (!lanes[li].n) { idle.push(lanes[li].name); continue; }
      rows.push({ kind: "lane", y, h: ROW, lane: li });
      lanes[li].y = y;
      y += ROW;
    }
    // lanes without a task (idle cores) share one row: 72 empty rows would hide the busy ones
    if (idle.length) { rows.push({ kind: "idle", y, h: ROW, names: idle }); y += ROW; }
    counters.forEach((c, ci) => {
      if (c.group === gi) { rows.push({ kind: "counter", y, h: COUNTER, counter: ci }); y += COUNTER; }
    });
  });
  const height = y + 4;

  let lo = Infinity, hi = -Infinity;
  for (const l of lanes) {
    if (!l.n) continue;
    lo = Math.min(lo, l.start[0]);
    for (let i = 0; i < l.n; i++) hi = Math.max(hi, l.start[i] + l.dur[i]);
  }
  for (const c of counters) if (c.t.length) { lo = Math.min(lo, c.t[0]); hi = Math.max(hi, c.t[c.t.length - 1]); }
  if (!isFinite(lo)) { lo = 0; hi = MIN_SPAN; }
  if (hi - lo < MIN_SPAN) hi = lo + MIN_SPAN;
  const full = { t0: lo - (hi - lo) * 0.01, t1: hi + (hi - lo) * 0.01 };
  const view = { t0: full.t0, t1: full.t1 };

  function width() { return Math.max(300, canvas.clientWidth || window.innerWidth || 1200); }
  function plotWidth() { return width() - LABEL; }
  function xOf(t) { return LABEL + (t - view.t0) / (view.t1 - view.t0) * plotWidth(); }
  function tOf(x) { return view.t0 + (x - LABEL) / plotWidth() * (view.t1 - view.t0); }

  // the first index whose start is >= t (lane columns are sorted by start)
  function lowerBound(a, t) {
    let l = 0, h = a.length;
    while (l < h) { const m = (l + h) >> 1; if (a[m] < t) l = m + 1; else h = m; }
    return l;
  }

  function color(k) { return `hsl(${(k * 137.508) % 360}, 55%, 62%)`; }

  // -- drawing -------------------------------------------------------------------------------
  function draw() {
    const w = width(), dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.height = height + "px";
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, height);
    const stats = { tasks: 0, lanes: 0, rects: 0, blocks: 0 };
    drawAxis(w);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL, 0, w - LABEL, height);
    ctx.clip();
    for (const r of rows) {
      if (r.kind === "lane") { drawLane(lanes[r.lane], r.y, stats); stats.lanes++; }
      else if (r.kind === "idle") stats.lanes += r.names.length;
      else if (r.kind === "counter") drawCounter(counters[r.counter], r.y);
    }
    if (showCritical) drawCriticalLinks();
    ctx.restore();
    drawLabels();
    document.getElementById("wsp-view").textContent =
      `${fmtUs(view.t0)} – ${fmtUs(view.t1)} µs`;
    return stats;
  }

  function drawAxis(w) {
    const span = view.t1 - view.t0, target = span / Math.max(1, (w - LABEL) / 110);
    let step = Math.pow(10, Math.floor(Math.log10(target)));
    if (target / step > 5) step *= 5; else if (target / step > 2) step *= 2;
    ctx.fillStyle = "#5b6472";
    ctx.strokeStyle = "#e3e6eb";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const x = Math.round(xOf(t)) + 0.5;
      if (x < LABEL) continue;
      ctx.beginPath(); ctx.moveTo(x, AXIS - 6); ctx.lineTo(x, height); ctx.stroke();
      ctx.fillText(fmtUs(t), x + 3, AXIS / 2);
    }
  }

  function drawLane(l, top, stats) {
    const y0 = top + 2, h = ROW - 4;
    const from = lowerBound(l.start, view.t0 - l.maxDur), scale = plotWidth() / (view.t1 - view.t0);
    let blockX0 = -1, blockX1 = -1, blockN = 0, blockK = -1;  // blockK: its kernel, -1 mixed
    const flush = () => {
      if (blockN) {
        ctx.fillStyle = blockK >= 0 ? color(blockK) : "#8d95a3";
        ctx.fillRect(blockX0, y0, Math.max(1, blockX1 - blockX0), h);
        stats.blocks++;
      }
      blockN = 0;
    };
    const crit = [];
    for (let i = from; i < l.n && l.start[i] <= view.t1; i++) {
      const s = l.start[i], e = s + l.dur[i];
      if (e < view.t0) continue;
      stats.tasks++;
      const x0 = LABEL + (s - view.t0) * scale, x1 = LABEL + (e - view.t0) * scale;
      if (showCritical && l.crit[i]) crit.push([x0, x1]);
      if (x1 - x0 < 1) {  // sub-pixel: merged with its neighbours into one block
        if (blockN && x0 <= blockX1 + 1) {
          blockX1 = Math.max(blockX1, x1);
          blockN++;
          if (blockK !== l.kernel[i]) blockK = -1;
          continue;
        }
        flush();
        blockX0 = x0; blockX1 = x1; blockN = 1; blockK = l.kernel[i];
        continue;
      }
      flush();
      ctx.fillStyle = color(l.kernel[i]);
      ctx.fillRect(x0, y0, x1 - x0, h);
      stats.rects++;
      if (x1 - x0 > 40) {
        ctx.fillStyle = "#1d2430";
        ctx.font = "10px system-ui, sans-serif";
        ctx.textBaseline = "middle";
        ctx.fillText(taskName(l, i), Math.max(x0, LABEL) + 3, top + ROW / 2, x1 - Math.max(x0, LABEL) - 5);
      }
    }
    flush();
    // the critical path's tasks: an outline each, or, where they are narrower than a few
    // pixels, one red bar over each run of them (thousands of outlines would paint it all red)
    ctx.strokeStyle = ctx.fillStyle = "#d7263d";
    ctx.lineWidth = 2;
    let run = null;
    const mark = () => { if (run) ctx.fillRect(run[0], y0 - 1, Math.max(2, run[1] - run[0]), 4); };
    for (const [x0, x1] of crit) {
      if (x1 - x0 >= 4) { ctx.strokeRect(x0, y0 + 1, x1 - x0, h - 2); continue; }
      if (run && x0 <= run[1] + 2) { run[1] = Math.max(run[1], x1); continue; }
      mark();
      run = [x0, x1];
    }
    mark();
    ctx.lineWidth = 1;
  }

  // the arrows between consecutive tasks of the critical path, when few enough are in view to
  // be told apart (zoomed out, the red bars on the lanes say where the path runs)
  const MAX_LINKS = 400;
  function drawCriticalLinks() {
    const links = [];
    for (let k = 0; k + 1 < critical.length && links.length <= MAX_LINKS; k++) {
      const a = critical[k], b = critical[k + 1];
      if (!a.next) continue;
      const la = lanes[a.lane], lb = lanes[b.lane];
      const ea = la.start[a.index] + la.dur[a.index], sb = lb.start[b.index];
      if (Math.max(ea, sb) < view.t0 || Math.min(ea, sb) > view.t1) continue;
      links.push([xOf(ea), la.y + ROW / 2, xOf(sb), lb.y + ROW / 2]);
    }
    if (links.length > MAX_LINKS) return;
    ctx.strokeStyle = "rgba(215, 38, 61, 0.7)";
    ctx.beginPath();
    for (const [x0, y0, x1, y1] of links) { ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); }
    ctx.stroke();
  }

  function drawCounter(c, top) {
    const h = COUNTER - 8, base = top + COUNTER - 4;
    ctx.fillStyle = "rgba(91, 139, 217, 0.35)";
    ctx.strokeStyle = "#3d6fc2";
    ctx.beginPath();
    ctx.moveTo(LABEL, base);
    let v = 0, x = LABEL;
    const from = Math.max(0, lowerBound(c.t, view.t0) - 1);
    if (from < c.t.length && c.t[from] < view.t0) v = c.v[from];
    ctx.lineTo(LABEL, base - v / c.max * h);
    for (let i = from; i < c.t.length && c.t[i] <= view.t1; i++) {
      if (c.t[i] < view.t0) continue;
      x = xOf(c.t[i]);
      ctx.lineTo(x, base - v / c.max * h);
      v = c.v[i];
      ctx.lineTo(x, base - v / c.max * h);
    }
    ctx.lineTo(width(), base - v / c.max * h);
    ctx.lineTo(width(), base);
    ctx.closePath();
    ctx.fill();
    ctx.stroke();
  }

  function drawLabels() {
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, LABEL, height);
    ctx.textBaseline = "middle";
    for (const r of rows) {
      if (r.kind === "group") {
        ctx.fillStyle = "#eef1f5";
        ctx.fillRect(0, r.y, width(), 1);
        ctx.fillStyle = "#1d2430";
        ctx.font = "600 12px system-ui, sans-serif";
        ctx.fillText(groups[r.group].name, 6, r.y + GROUP / 2, width() - 12);
      } else {
        ctx.fillStyle = "#3a4250";
        ctx.font = "11px system-ui, sans-serif";
        const c = r.kind === "counter" ? counters[r.counter] : null;
        if (r.kind === "idle") {
          ctx.fillStyle = "#7a8290";
          ctx.fillText(`${r.names.length} idle: ${idleNames(r.names)}`, 14, r.y + ROW / 2,
                       width() - 20);
          continue;
        }
        const text = c ? `${c.name} (max ${c.max})` : lanes[r.lane].name;
        ctx.fillText(text, 14, r.y + (c ? COUNTER / 2 : ROW / 2), LABEL - 18);
      }
    }
  }

  // "cube 0–23, vector 3–47": runs of names that differ only in a trailing number
  function idleNames(names) {
    const out = [];
    let run = null;
    for (const name of names) {
      const m = /^(.*?)(\d+)$/.exec(name);
      if (m && run && run.stem === m[1] && +m[2] === run.last + 1) { run.last = +m[2]; continue; }
      if (run) out.push(run.text());
      run = m ? { stem: m[1], first: +m[2], last: +m[2],
                  text() { return this.first === this.last ? this.stem + this.first
                                  : `${this.stem}${this.first}–${this.last}`; } }
              : { text: () => name };
    }
    if (run) out.push(run.text());
    return out.join(", ");
  }

  // -- what a task is ----------------------------------------------------------------------
  function taskName(l, i) {
    const k = data.kernels[l.kernel[i]];
    const a = l.coordAt[i], b = l.coordAt[i + 1];
    return b > a ? `${k}[${Array.from(l.coords.subarray(a, b)).join(", ")}]` : k;
  }

  function fmtUs(ps) {
    const us = Math.abs(ps) < 0.5 ? 0 : ps / 1e6, span = (view.t1 - view.t0) / 1e6;  // no -0
    const digits = Math.max(0, Math.min(6, 2 - Math.floor(Math.log10(Math.max(span, 1e-6)))));
    return us.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  function timesOf(l, i) {
    const g = groups[l.group], s = l.start[i], d = l.dur[i];
    const us = (t) => (t / 1e6).toFixed(3);
    let text = `${g.name}, ${l.name}\n  start ${us(s)} µs, end ${us(s + d)} µs, ` +
               `${(d / 1e6).toFixed(3)} µs`;
    if (g.ghz) text += ` (${Math.round(d / 1000 * g.ghz).toLocaleString("en-US")} cycles)`;
    // where Perfetto would show it: the trace's own time
    text += `; ${(s / 1e6 + g.origin_us).toFixed(3)} µs in the trace`;
    return text;
  }

  // the task under (x, y) in CSS pixels of the canvas, or null: {lane, index, ...}
  function hitTest(x, y) {
    const r = rows.find((row) => row.kind === "lane" && y >= row.y && y < row.y + row.h);
    if (!r || x < LABEL) return null;
    const l = lanes[r.lane], t = tOf(x), slack = 3 * (view.t1 - view.t0) / plotWidth();
    let best = null, gap = Infinity;
    for (let i = lowerBound(l.start, t - l.maxDur - slack); i < l.n && l.start[i] <= t + slack; i++) {
      const s = l.start[i], e = s + l.dur[i];
      const g = t < s ? s - t : t > e ? t - e : 0;
      if (g <= slack && g < gap) { best = i; gap = g; }
    }
    if (best === null) return null;
    return { lane: r.lane, index: best, task: l.task[best], name: taskName(l, best),
             kernel: data.kernels[l.kernel[best]],
             coords: Array.from(l.coords.subarray(l.coordAt[best], l.coordAt[best + 1])),
             start: l.start[best], dur: l.dur[best], critical: !!l.crit[best] };
  }

  function tooltip(x, y) {
    const h = hitTest(x, y);
    if (!h) return null;
    const l = lanes[h.lane];
    let text = `${h.name}` + (h.task >= 0 ? `  (task ${h.task})` : "") +
               `\nkernel ${h.kernel}` + (h.coords.length ? `, coordinates [${h.coords.join(", ")}]` : "") +
               `\n${timesOf(l, h.index)}`;
    if (h.task >= 0) {
      where.forEach((m, gi) => {
        const other = gi !== l.group && m.get(h.task);
        if (other) text += `\n${timesOf(lanes[other[0]], other[1])}`;
      });
    }
    if (h.critical) text += "\non the critical path";
    return text;
  }

  // -- interaction --------------------------------------------------------------------------
  let showCritical = true;
  function setView(t0, t1) {
    const span = Math.max(MIN_SPAN, t1 - t0), fullSpan = full.t1 - full.t0;
    if (span >= fullSpan) { view.t0 = full.t0; view.t1 = full.t1; }
    else {
      view.t0 = Math.min(Math.max(t0, full.t0), full.t1 - span);
      view.t1 = view.t0 + span;
    }
    return draw();
  }
  function zoomAt(x, factor) {  // factor < 1 zooms in, about the time under x
    const t = tOf(x);
    return setView(t - (t - view.t0) * factor, t + (view.t1 - t) * factor);
  }
  function panBy(dx) {
    const dt = dx / plotWidth() * (view.t1 - view.t0);
    return setView(view.t0 - dt, view.t1 - dt);
  }
  const reset = () => setView(full.t0, full.t1);

  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    zoomAt(e.offsetX, Math.exp(Math.max(-300, Math.min(300, e.deltaY)) * 0.002));
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = e.offsetX; canvas.style.cursor = "grabbing"; });
  window.addEventListener("mouseup", () => { drag = null; canvas.style.cursor = "grab"; });
  canvas.addEventListener("mousemove", (e) => {
    if (drag !== null) { panBy(e.offsetX - drag); drag = e.offsetX; tip.hidden = true; return; }
    const text = tooltip(e.offsetX, e.offsetY);
    tip.hidden = !text;
    if (text) {
      tip.textContent = text;
      const box = canvas.clientWidth;
      tip.style.left = Math.min(e.offsetX + 14, Math.max(0, box - tip.offsetWidth - 4)) + "px";
      tip.style.top = (e.offsetY + 16) + "px";
    }
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("dblclick", reset);
  document.getElementById("wsp-zoom-in").addEventListener("click", () => zoomAt(LABEL + plotWidth() / 2, 0.5));
  document.getElementById("wsp-zoom-out").addEventListener("click", () => zoomAt(LABEL + plotWidth() / 2, 2));
  document.getElementById("wsp-reset").addEventListener("click", reset);
  document.getElementById("wsp-critical").addEventListener("change", (e) => {
    showCritical = e.target.checked;
    draw();
  });
  window.addEventListener("keydown", (e) => {
    if (e.key === "+" || e.key === "=") zoomAt(LABEL + plotWidth() / 2, 0.5);
    else if (e.key === "-") zoomAt(LABEL + plotWidth() / 2, 2);
    else if (e.key === "0") reset();
    else if (e.key === "ArrowLeft") panBy(plotWidth() / 4);
    else if (e.key === "ArrowRight") panBy(-plotWidth() / 4);
  });
  window.addEventListener("resize", () => draw());

  return { data, lanes, critical, draw, setView, zoomAt, panBy, reset, hitTest, tooltip, xOf, tOf,
           view: () => ({ t0: view.t0, t1: view.t1 }), full: () => ({ t0: full.t0, t1: full.t1 }),
           laneY: (li) => lanes[li].y, rowHeight: ROW };
}
