// The heatmap page's code: decodes the embedded cells, draws the heatmap, and draws the
// flamegraph of the selected range.
// The columns are as wide as the box allows; markers are ticks above the cells and a list
// beside them, picked by a click or stepped through with ArrowLeft/ArrowRight (k/j), each
// selecting its interval exactly. No network, no libraries.
"use strict";
(function () {
  const body = document.body;
  let errors = 0;
  window.addEventListener("error", () => { errors += 1; body.dataset.errors = String(errors); });
  body.dataset.errors = "0";
  const meta = JSON.parse(document.getElementById("devprof-data").textContent);
  const markers = meta.markers || [];
  // A column is ROWS cells of CELL_MS; its width in px is fitted to the box (ROW_PX tall).
  const ROWS = meta.rows, CELL_MS = meta.cellMs, STEP_MS = ROWS * CELL_MS;
  const ROW_PX = 8, MAX_COL_PX = 8, MIN_COL_PX = 2, FRAME_H = 16, LIST_ROW_PX = 18;
  let colPx = MAX_COL_PX;
  const nodes = meta.parent.length;
  const parent = Int32Array.from(meta.parent), frame = Int32Array.from(meta.frame);
  const children = Array.from({ length: nodes }, () => []);
  for (let i = 1; i < nodes; i++) children[parent[i]].push(i);
  for (const list of children) list.sort((a, b) => (meta.frames[frame[a]] < meta.frames[frame[b]] ? -1 : 1));
  let cell, segment, thread, node, weight, count = 0, cellCount = 0, columns = 1;
  let thread_filter = -1, selection = null, zoom = 0, searchRe = null, totals = null, selections = 0;
  const heat = document.getElementById("heatmap"), flame = document.getElementById("flame");
  const wrap = document.getElementById("heatmap-wrap"), axis = document.getElementById("axis");
  const status = document.getElementById("status"), rangeText = document.getElementById("range");
  const details = document.getElementById("details"), flameBox = document.getElementById("flame-box");
  const markersRow = document.getElementById("markers"), side = document.getElementById("side");
  const list = document.getElementById("marker-list"), listRows = document.getElementById("marker-rows");

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
    columns = Math.max(1, meta.columns || 0, Math.ceil(cellCount / ROWS));
  }

  // Time in seconds as a range bound: precise to the cell (two decimals for 10 ms cells).
  const DECIMALS = Math.max(2, Math.ceil(-Math.log10(CELL_MS / 1000) - 1e-9));
  const secs = (c) => (c * CELL_MS / 1000).toFixed(DECIMALS).replace(/0$/, "");
  const stepText = STEP_MS >= 1000 ? `${STEP_MS / 1000} s` : `${STEP_MS} ms`;

  // The columns' width: as many as fit the box, between MIN_COL_PX and MAX_COL_PX each.
  function layout() {
    const room = (wrap.clientWidth || 800) - 2;
    colPx = Math.max(MIN_COL_PX, Math.min(MAX_COL_PX, Math.floor(room / columns)));
    heat.width = columns * colPx; heat.height = ROWS * ROW_PX;
    heat.dataset.columns = String(columns);
    heat.dataset.colPx = String(colPx);
    heat.dataset.stepMs = String(STEP_MS);
    markersRow.style.width = axis.style.width = `${heat.width}px`;
    // The list as tall as the heatmap's box beside it.
    const head = document.getElementById("side-head");
    list.style.height = `${Math.max(120, wrap.offsetHeight - head.offsetHeight - 2)}px`;
    document.getElementById("axis-text").textContent =
      `Columns of ${stepText} (${columns}), rows of ${+(CELL_MS.toFixed(3))} ms, the first at the top; drag over cells to select.`;
  }

  // Second marks under the cells, at least ~70 px apart.
  function drawAxis() {
    axis.textContent = "";
    const pxPerS = (1000 / STEP_MS) * colPx;
    const every = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600]
      .find((s) => s * pxPerS >= 70) || 7200;
    const end = (columns * STEP_MS) / 1000;
    for (let k = 0; k * every <= end; k++) {
      const label = document.createElement("span");
      label.style.left = `${Math.round(k * every * pxPerS)}px`;
      label.textContent = `${+(k * every).toFixed(2)} s`;
      axis.appendChild(label);
    }
  }

  function cellWeights() {
    const w = new Float64Array(cellCount);
    for (let i = 0; i < count; i++) if (thread_filter < 0 || thread[i] === thread_filter) w[cell[i]] += weight[i];
    return w;
  }

  function drawHeatmap() {
    const w = cellWeights();
    const g = heat.getContext("2d");
    g.fillStyle = "#fff"; g.fillRect(0, 0, heat.width, heat.height);
    const gap = colPx >= 5 ? 1 : 0;
    let max = 0, coloured = 0;
    for (const v of w) if (v > max) max = v;
    for (let i = 0; i < cellCount; i++) {
      if (w[i] <= 0) continue;
      coloured++;
      const f = Math.sqrt(w[i] / max);
      g.fillStyle = `rgb(255,${Math.round(230 - 200 * f)},${Math.round(220 - 210 * f)})`;
      g.fillRect(Math.floor(i / ROWS) * colPx, (i % ROWS) * ROW_PX, colPx - gap, ROW_PX - 1);
    }
    // The selection shaded, unless it is the whole capture (the page opens on that).
    if (selection && !(selection[0] === 0 && selection[1] >= cellCount)) {
      g.fillStyle = "rgba(40,90,220,0.35)";
      for (let i = selection[0]; i < selection[1] && i < cellCount; i++)
        g.fillRect(Math.floor(i / ROWS) * colPx, (i % ROWS) * ROW_PX, colPx, ROW_PX);
    }
    heat.dataset.cells = String(coloured);
    heat.dataset.max = String(max);
  }

  function cellAt(ev) {
    const r = heat.getBoundingClientRect();
    const col = Math.floor((ev.clientX - r.left) / colPx), row = Math.floor((ev.clientY - r.top) / ROW_PX);
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

  // The marker selected (its index), or null for a range of cells.
  let markerSel = null;

  function selectMarker(i, updateUrl) {
    const m = markers[i];
    if (!m) return;
    const started = performance.now();
    markerSel = i;
    selection = [Math.max(0, Math.floor(m.start / CELL_MS)), Math.max(1, Math.ceil(m.t / CELL_MS))];
    zoom = 0;
    if (updateUrl) history.replaceState(null, "", `#m=${i}`);
    for (const el of markersRow.children) el.classList.toggle("selected", Number(el.dataset.i) === i);
    showInList(i);
    details.textContent = m.line;
    drawHeatmap();
    computeTotals();
    drawFlame();
    selected(started);
  }

  function select(a, b, updateUrl) {
    const started = performance.now();
    selection = [a, b]; zoom = 0; markerSel = null;
    for (const el of markersRow.querySelectorAll(".selected")) el.classList.remove("selected");
    renderList();
    if (updateUrl) history.replaceState(null, "", `#t=${secs(a)}-${secs(b)}`);
    drawHeatmap();
    computeTotals();
    drawFlame();
    selected(started);
  }

  // For tests and the benchmark: how many selections were drawn, and how long the last took.
  function selected(started) {
    selections += 1;
    body.dataset.selections = String(selections);
    body.dataset.selectMs = (performance.now() - started).toFixed(1);
  }

  function computeTotals() {
    totals = new Float64Array(nodes);
    const [a, b] = selection;
    const m = markerSel === null ? null : markers[markerSel];
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
    flameBox.dataset.marker = m ? String(markerSel) : "";
    flameBox.dataset.number = m && m.number !== null && m.number !== undefined ? String(m.number) : "";
    if (m) {
      flameBox.dataset.range = `m${markerSel}`;
      rangeText.textContent = `${m.label}: ${(m.start / 1000).toFixed(3)}–${(m.t / 1000).toFixed(3)} s, ${total} ${meta.unit}`;
    } else {
      flameBox.dataset.range = `${secs(a)}-${secs(b)}`;
      rangeText.textContent = `range ${secs(a)}–${secs(b)} s: ${total} ${meta.unit}`;
    }
  }

  // Each marker's samples (its segments' weight, of the thread shown), for the list.
  let markerTotals = new Float64Array(markers.length);
  function computeMarkerTotals() {
    let segments = 1;
    for (const m of markers) segments = Math.max(segments, m.seg[1] + 1);
    const per = new Float64Array(segments + 1);
    for (let i = 0; i < count; i++) {
      if (thread_filter >= 0 && thread[i] !== thread_filter) continue;
      if (segment[i] < segments) per[segment[i] + 1] += weight[i];
    }
    for (let s = 1; s <= segments; s++) per[s] += per[s - 1];
    markerTotals = Float64Array.from(markers, (m) => (m.seg[1] >= m.seg[0] ? per[m.seg[1] + 1] - per[m.seg[0]] : 0));
  }

  // The ticks: one per marker at its time, as wide as the heatmap. A click between ticks
  // picks the nearest.
  function drawMarkers() {
    markersRow.textContent = "";
    markers.forEach((m, i) => {
      const tick = document.createElement("span");
      tick.className = "marker";
      if (i === markerSel) tick.classList.add("selected");
      tick.dataset.i = String(i);
      tick.style.left = `${Math.max(0, (m.t / STEP_MS) * colPx - 1)}px`;
      tick.title = m.line;
      tick.addEventListener("mouseenter", () => { details.textContent = `${m.label}\n${m.line}`; });
      tick.addEventListener("click", (ev) => { ev.stopPropagation(); selectMarker(i, true); });
      markersRow.appendChild(tick);
    });
    markersRow.dataset.count = String(markers.length);
  }
  markersRow.addEventListener("click", (ev) => {
    if (!markers.length) return;
    const t = ((ev.clientX - markersRow.getBoundingClientRect().left) / colPx) * STEP_MS;
    let best = 0;
    markers.forEach((m, i) => { if (Math.abs(m.t - t) < Math.abs(markers[best].t - t)) best = i; });
    selectMarker(best, true);
  });

  // The list beside the heatmap: only the rows in view are in the document, so a capture's
  // many thousand markers cost nothing to show.
  function renderList() {
    if (!markers.length) return;
    const first = Math.max(0, Math.floor(list.scrollTop / LIST_ROW_PX) - 5);
    const last = Math.min(markers.length, first + Math.ceil((list.clientHeight || 400) / LIST_ROW_PX) + 10);
    listRows.textContent = "";
    for (let i = first; i < last; i++) {
      const m = markers[i];
      const row = document.createElement("div");
      row.className = i === markerSel ? "row selected" : "row";
      row.setAttribute("role", "option");
      row.setAttribute("aria-selected", String(i === markerSel));
      row.dataset.i = String(i);
      row.style.top = `${i * LIST_ROW_PX}px`;
      row.title = m.line;
      const n = document.createElement("span");
      n.className = "n";
      n.textContent = `${Math.abs(m.start) < 5 ? "0.00" : (m.start / 1000).toFixed(2)} s `;
      row.appendChild(n);
      const c = document.createElement("span");
      c.className = "c";
      c.textContent = String(markerTotals[i]);
      row.appendChild(c);
      row.appendChild(document.createTextNode(m.label));
      listRows.appendChild(row);
    }
  }
  function showInList(i) {
    const top = i * LIST_ROW_PX, view = list.clientHeight;
    if (top < list.scrollTop || top + LIST_ROW_PX > list.scrollTop + view)
      list.scrollTop = Math.max(0, top - Math.floor(view / 2));
    renderList();
  }
  list.addEventListener("scroll", renderList);
  listRows.addEventListener("click", (ev) => {
    const row = ev.target.closest(".row");
    if (row) { list.focus({ preventScroll: true }); selectMarker(Number(row.dataset.i), true); }
  });

  // The next (step 1) or previous (-1) marker: from the one selected, else from the range.
  function stepMarker(step) {
    if (!markers.length) return;
    let i;
    if (markerSel !== null) i = markerSel + step;
    else if (step > 0) {
      const from = selection ? selection[0] * CELL_MS : 0;
      i = markers.findIndex((m) => m.t > from);
      if (i < 0) i = markers.length - 1;
    } else {
      const to = selection ? selection[1] * CELL_MS : Infinity;
      i = markers.length - 1;
      while (i > 0 && markers[i].t > to) i--;
    }
    selectMarker(Math.max(0, Math.min(markers.length - 1, i)), true);
  }
  document.addEventListener("keydown", (ev) => {
    if (ev.altKey || ev.ctrlKey || ev.metaKey || !markers.length) return;
    const tag = ev.target && ev.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    const step = { ArrowRight: 1, j: 1, ArrowLeft: -1, k: -1 }[ev.key];
    if (!step) return;
    ev.preventDefault();
    stepMarker(step);
  });

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
    computeMarkerTotals();
    renderList();
    if (selection) { computeTotals(); drawFlame(); }
  });

  function fromHash() {
    const mk = /^#m=([0-9]+)$/.exec(location.hash);
    if (mk && markers[Number(mk[1])]) { selectMarker(Number(mk[1]), false); return true; }
    const m = /^#t=([0-9.]+)-([0-9.]+)$/.exec(location.hash);
    if (!m) return false;
    const a = Math.round(parseFloat(m[1]) * 1000 / CELL_MS), b = Math.round(parseFloat(m[2]) * 1000 / CELL_MS);
    if (!(b > a)) return false;
    select(a, b, false);
    return true;
  }
  window.addEventListener("hashchange", fromHash);

  // A new width (the window resized): the columns refitted, the selection kept.
  let lastWidth = 0;
  window.addEventListener("resize", () => {
    if (count === 0 && cellCount === 0) return;
    if (wrap.clientWidth === lastWidth) return;
    lastWidth = wrap.clientWidth;
    layout(); drawAxis(); drawHeatmap(); drawMarkers();
    if (totals) drawFlame();
  });

  decode().then(() => {
    if (markers.length) {
      side.hidden = false;
      document.getElementById("marker-count").textContent = `${markers.length} marker${markers.length === 1 ? "" : "s"}`;
      listRows.style.height = `${markers.length * LIST_ROW_PX}px`;
    }
    if (meta.markerNote) document.getElementById("marker-note").textContent = meta.markerNote;
    layout();
    lastWidth = wrap.clientWidth;
    drawAxis();
    drawHeatmap();
    computeMarkerTotals();
    drawMarkers();
    renderList();
    if (!fromHash()) select(0, cellCount, false);
    // For the benchmark: from navigation start to the first heatmap and flamegraph.
    body.dataset.loadMs = performance.now().toFixed(1);
  }).catch((e) => { errors += 1; body.dataset.errors = String(errors); status.textContent = "could not read the data: " + e; });
})();
