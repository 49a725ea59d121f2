// devprof view: the list's live filter and the diff button, and flamegraph frames sized to
// their content. The pages work without it (the forms submit to the server).
"use strict";

function filterRows() {
  const form = document.getElementById("filter");
  const rows = document.querySelectorAll("#capture-rows tr");
  if (!form || rows.length === 0) return;
  const container = form.elements.container.value;
  const kind = form.elements.kind.value;
  const since = form.elements.since.value;
  const until = form.elements.until.value;
  let shown = 0;
  rows.forEach((row) => {
    // data-created and the inputs are both local times in one format: text order is time order.
    const created = row.dataset.created;
    const visible = (!container || row.dataset.container === container)
      && (!kind || row.dataset.kind === kind)
      && (!since || created >= since.padEnd(19, ":00").slice(0, 19))
      && (!until || created <= until.padEnd(19, ":00").slice(0, 19));
    row.hidden = !visible;
    if (visible) shown += 1;
    else {
      const box = row.querySelector("input[type=checkbox]");
      if (box) box.checked = false;
    }
  });
  const count = document.getElementById("shown-count");
  if (count) count.textContent = String(shown);
  updateDiffButton();
}

function updateDiffButton() {
  const button = document.getElementById("diff-button");
  if (!button) return;
  const ticked = document.querySelectorAll("#capture-rows input[type=checkbox]:checked").length;
  button.disabled = ticked !== 2;
  const hint = document.getElementById("diff-hint");
  if (hint) {
    hint.textContent = ticked === 2
      ? "compare them (before: the older)"
      : `tick two captures with stacks (${ticked} ticked)`;
  }
}

// A flamegraph's frame as tall as the drawing inside it. The frame is sandboxed (an origin
// of its own), so its document cannot be read: the page gives the SVG's declared height.
function fitFrame(frame) {
  const height = Number(frame.dataset.height);
  if (height > 50) frame.style.height = `${height + 4}px`;
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("filter");
  if (form) {
    form.addEventListener("input", filterRows);
    form.addEventListener("change", filterRows);
  }
  document.querySelectorAll("#capture-rows input[type=checkbox]").forEach((box) => {
    box.addEventListener("change", updateDiffButton);
  });
  updateDiffButton();
  document.querySelectorAll("iframe.autosize").forEach(fitFrame);
});
