// The heatmap page's code: decodes the embedded cells, draws the heatmap, and draws the
// flamegraph of the selected range. No network, no libraries.
"use strict";
(function () {
  const body = document.body;
  let errors = 0;
  window.addEventListener("error", () => { errors += 1; body.dataset.errors = String(errors); });
  body.dataset.errors = "0";
  const meta = JSON.parse(document.getElementById("devprof-data").textContent);
  const ROWS = meta.rows, CELL_MS = meta.cellMs, CELL_PX = 8, FRAME_H = 16;
  const nodes = meta.parent.length;
  const parent = Int32Array.from(meta.parent), frame = Int32Array.from(meta.frame);
  const children = Array.from({ length: nodes }, () => []);
  for (let i = 1; i < nodes; i++) children[parent[i]].push(i);
  for (const list of children) list.sort((a, b) => (meta.frames[frame[a]] < meta.frames[frame[b]] ? -1 : 1));
  let cell, segment, thread, node, weight, count = 0, cellCount = 0;
  let thread_filter = -1, selection = null, zoom = 0, searchRe = null, totals = null;
  const heat = document.getElementById("heatmap"), flame = document.getElementById("flame");
  const status = document.getElementById("status"), rangeText = document.getElementById("range");
  const details = document.getElementById("details"), flameBox = document.getElementById("flame-box");

  async function decode() {
    const bin = atob(meta.packed);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const raw = new Uint8Array(await new Response(stream).arrayBuffer());
    // Five varints per entry; at most raw.length / 5 entries.
    const cap = Math.ceil(raw.length / 5);
    cell = new Uint32Array(cap); segment = new Uint32Array(cap); thread = new Uint32Array(cap);
    node = new Uint32Array(cap); weight = new Float64Array(cap);
    let at = 0, c = 0;
    function varint() {
      let v = 0, scale = 1, b;
      do { b = raw[at++]; v += (b & 0x7f) * scale; scale *= 128; } while (b & 0x80);
      return v;
    }
    while (at < raw.length) {
      c += varint();
      cell[count] = c; segment[count] = varint(); thread[count] = varint(); node[count] = varint(); weight[count] = varint();
      count++;
    }
    cellCount = count ? cell[count - 1] + 1 : 0;
  }

  function cellWeights() {
    const w = new Float64Array(cellCount);
    for (let i = 0; i < count; i++) if (thread_filter < 0 || thread[i] === thread_filter) w[cell[i]] += weight[i];
    return w;
  }

  function drawHeatmap() {
    const w = cellWeights();
    const cols = Math.max(1, Math.ceil(cellCount / ROWS));
    heat.width = cols * CELL_PX; heat.height = ROWS * CELL_PX;
    const g = heat.getContext("2d");
    g.fillStyle = "#fff"; g.fillRect(0, 0, heat.width, heat.height);
    let max = 0, coloured = 0;
    for (const v of w) if (v > max) max = v;
    for (let i = 0; i < cellCount; i++) {
      if (w[i] <= 0) continue;
      coloured++;
      const f = Math.sqrt(w[i] / max);
      g.fillStyle = `rgb(255,${Math.round(230 - 200 * f)},${Math.round(220 - 210 * f)})`;
      g.fillRect(Math.floor(i / ROWS) * CELL_PX, (i % ROWS) * CELL_PX, CELL_PX - 1, CELL_PX - 1);
    }
    if (selection) {
      g.fillStyle = "rgba(40,90,220,0.35)";
      for (let i = selection[0]; i < selection[1] && i < cellCount; i++)
        g.fillRect(Math.floor(i / ROWS) * CELL_PX, (i % ROWS) * CELL_PX, CELL_PX, CELL_PX);
    }
    heat.dataset.cells = String(coloured);
    heat.dataset.max = String(max);
  }

  function cellAt(ev) {
    const r = heat.getBoundingClientRect();
    const col = Math.floor((ev.clientX - r.left) / CELL_PX), row = Math.floor((ev.clientY - r.top) / CELL_PX);
    return Math.max(0, col * ROWS + Math.min(ROWS - 1, Math.max(0, row)));
  }

  let dragFrom = null;
  heat.addEventListener("mousedown", (ev) => { dragFrom = cellAt(ev); });
  window.addEventListener("mouseup", (ev) => {
    if (dragFrom === null) return;
    const to = cellAt(ev), a = Math.min(dragFrom, to), b = Math.max(dragFrom, to) + 1;
    dragFrom = null;
    select(a, b, true);
  });

  const secs = (c) => (c * CELL_MS / 1000).toFixed(2).replace(/0$/, "");

  // A marker's selection: its segments, and the cells it covers for the highlight.
  let markerSel = null;

  function selectMarker(i, updateUrl) {
    const m = meta.markers[i];
    if (!m) return;
    const started = performance.now();
    markerSel = i;
    selection = [Math.max(0, Math.floor(m.start / CELL_MS)), Math.max(1, Math.ceil(m.t / CELL_MS))];
    zoom = 0;
    if (updateUrl) history.replaceState(null, "", `#m=${i}`);
    for (const el of markersRow.children) el.classList.toggle("selected", Number(el.dataset.i) === i);
    details.textContent = m.line;
    drawHeatmap();
    computeTotals();
    drawFlame();
    body.dataset.selectMs = (performance.now() - started).toFixed(1);
  }

  function select(a, b, updateUrl) {
    const started = performance.now();
    selection = [a, b]; zoom = 0; markerSel = null;
    for (const el of markersRow.children) el.classList.remove("selected");
    if (updateUrl) history.replaceState(null, "", `#t=${secs(a)}-${secs(b)}`);
    drawHeatmap();
    computeTotals();
    drawFlame();
    // For the benchmark: how long the last selection took to draw.
    body.dataset.selectMs = (performance.now() - started).toFixed(1);
  }

  function computeTotals() {
    totals = new Float64Array(nodes);
    const [a, b] = selection;
    const m = markerSel === null ? null : meta.markers[markerSel];
    for (let i = 0; i < count; i++) {
      if (m) { if (segment[i] < m.seg[0] || segment[i] > m.seg[1]) continue; }
      else if (cell[i] < a || cell[i] >= b) continue;
      if (thread_filter >= 0 && thread[i] !== thread_filter) continue;
      totals[node[i]] += weight[i];
    }
    // Parents come before children: one backward pass sums every subtree.
    for (let i = nodes - 1; i > 0; i--) totals[parent[i]] += totals[i];
    const total = totals[0];
    flameBox.dataset.total = String(total);
    if (m) {
      flameBox.dataset.range = `m${markerSel}`;
      rangeText.textContent = `${m.label}: ${(m.start / 1000).toFixed(3)}–${(m.t / 1000).toFixed(3)} s, ${total} ${meta.unit}`;
    } else {
      flameBox.dataset.range = `${secs(a)}-${secs(b)}`;
      rangeText.textContent = `range ${secs(a)}–${secs(b)} s: ${total} ${meta.unit}`;
    }
  }

  // The markers row: one tick per marker at its time, as wide as the heatmap.
  const markersRow = document.getElementById("markers");
  function drawMarkers() {
    markersRow.textContent = "";
    markersRow.style.width = `${heat.width}px`;
    (meta.markers || []).forEach((m, i) => {
      const tick = document.createElement("span");
      tick.className = "marker";
      tick.dataset.i = String(i);
      tick.style.left = `${Math.max(0, (m.t / 1000) * CELL_PX - 1)}px`;
      tick.title = m.line;
      tick.addEventListener("mouseenter", () => { details.textContent = `${m.label}\n${m.line}`; });
      tick.addEventListener("click", (ev) => { ev.stopPropagation(); selectMarker(i, true); });
      markersRow.appendChild(tick);
    });
    markersRow.dataset.count = String((meta.markers || []).length);
    if (meta.markerNote) document.getElementById("marker-note").textContent = meta.markerNote;
  }

  function colour(name, matched) {
    if (matched) return "rgb(230,0,230)";
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return `rgb(${205 + (h % 50)},${(h >> 8) % 180 + 40},${(h >> 16) % 55})`;
  }

  let boxes = [];
  function drawFlame() {
    if (!totals) return;
    const width = Math.max(400, flame.parentElement.clientWidth || 1000);
    const rootTotal = totals[zoom] || 0;
    let depth = 0;
    const stack = [[zoom, 0]];
    while (stack.length) {
      const [n, d] = stack.pop();
      if (totals[n] <= 0) continue;
      depth = Math.max(depth, d);
      for (const c of children[n]) stack.push([c, d + 1]);
    }
    // Ancestors of the zoomed node span the whole width, below it.
    const lineage = [];
    for (let n = zoom; n !== 0; n = parent[n]) lineage.unshift(n);
    const base = lineage.length;
    flame.width = width; flame.height = (depth + 1 + base) * FRAME_H;
    const g = flame.getContext("2d");
    g.clearRect(0, 0, flame.width, flame.height);
    g.font = "11px sans-serif";
    boxes = [];
    let matched = 0;
    const visit = (n, x, d) => {
      const w = rootTotal > 0 ? (totals[n] / rootTotal) * width : 0;
      if (w < 0.5) return;
      const name = n === 0 ? "all" : meta.frames[frame[n]];
      const hit = searchRe !== null && n !== 0 && searchRe.test(name);
      if (hit) matched += totals[n];
      const y = flame.height - (d + 1) * FRAME_H;
      g.fillStyle = n === 0 ? "#ddd" : colour(name, hit);
      g.fillRect(x, y, w - 1, FRAME_H - 1);
      if (w > 30) { g.fillStyle = "#000"; g.fillText(name.slice(0, Math.floor(w / 6.5)), x + 3, y + 12); }
      boxes.push([x, y, w, n]);
      let cx = x;
      for (const c of children[n]) { if (totals[c] > 0) { visit(c, cx, d + 1); cx += (totals[c] / rootTotal) * width; } }
    };
    let d0 = 0;
    for (const n of base ? [0, ...lineage.slice(0, -1)] : []) {
      const y = flame.height - (d0 + 1) * FRAME_H;
      g.fillStyle = "#eee"; g.fillRect(0, y, width - 1, FRAME_H - 1);
      g.fillStyle = "#000"; g.fillText(n === 0 ? "all" : meta.frames[frame[n]], 3, y + 12);
      boxes.push([0, y, width, n]);
      d0++;
    }
    visit(zoom, 0, base);
    status.textContent = searchRe ? `search: ${(100 * matched / (rootTotal || 1)).toFixed(1)}% matched` : "ready";
    body.dataset.ready = "1";
  }

  flame.addEventListener("click", (ev) => {
    const r = flame.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const hit = boxes.find(([bx, by, bw]) => x >= bx && x < bx + bw && y >= by && y < by + FRAME_H);
    if (hit) { zoom = hit[3]; drawFlame(); }
  });
  flame.addEventListener("mousemove", (ev) => {
    const r = flame.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const hit = boxes.find(([bx, by, bw]) => x >= bx && x < bx + bw && y >= by && y < by + FRAME_H);
    if (hit && totals) {
      const n = hit[3];
      details.textContent = `${n === 0 ? "all" : meta.frames[frame[n]]}: ${totals[n]} ${meta.unit} (${(100 * totals[n] / (totals[0] || 1)).toFixed(2)}%)`;
    }
  });
  document.getElementById("reset").addEventListener("click", () => { zoom = 0; drawFlame(); });
  document.getElementById("search").addEventListener("input", (ev) => {
    try { searchRe = ev.target.value ? new RegExp(ev.target.value) : null; } catch (e) { searchRe = null; }
    drawFlame();
  });
  const threadSelect = document.getElementById("thread");
  meta.threads.forEach((t, i) => {
    const o = document.createElement("option");
    o.value = String(i); o.textContent = `${t.name} (${t.tid})`;
    threadSelect.appendChild(o);
  });
  threadSelect.addEventListener("change", () => {
    thread_filter = Number(threadSelect.value);
    drawHeatmap();
    if (selection) { computeTotals(); drawFlame(); }
  });

  function fromHash() {
    const mk = /^#m=([0-9]+)$/.exec(location.hash);
    if (mk && meta.markers && meta.markers[Number(mk[1])]) { selectMarker(Number(mk[1]), false); return true; }
    const m = /^#t=([0-9.]+)-([0-9.]+)$/.exec(location.hash);
    if (!m) return false;
    const a = Math.round(parseFloat(m[1]) * 1000 / CELL_MS), b = Math.round(parseFloat(m[2]) * 1000 / CELL_MS);
    if (!(b > a)) return false;
    select(a, b, false);
    return true;
  }
  window.addEventListener("hashchange", fromHash);

  decode().then(() => {
    drawHeatmap();
    drawMarkers();
    if (!fromHash()) select(0, cellCount, false);
    // For the benchmark: from navigation start to the first heatmap and flamegraph.
    body.dataset.loadMs = performance.now().toFixed(1);
  }).catch((e) => { errors += 1; body.dataset.errors = String(errors); status.textContent = "could not read the data: " + e; });
})();
