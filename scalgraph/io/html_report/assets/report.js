// scalgraph report: draws each plot (with the plotly.js embedded before this script) when it becomes
// visible, sorts tables, and filters the program tree.  The page's content is built (and escaped) by
// Python; this script never turns data into markup: it only reads text and toggles elements.
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("sg-figures").textContent);
  var pending = 0;

  function loadPlotly() {
    return window.Plotly ? Promise.resolve(window.Plotly)
                         : Promise.reject(new Error("plotly.js did not load in this browser"));
  }

  function hidden(el) {
    for (var e = el.parentElement; e; e = e.parentElement) {
      if (e.tagName === "DETAILS" && !e.open) return true;
      if (e.hidden) return true;
    }
    return false;
  }

  function draw(div) {
    if (div.dataset.state) return;
    var fig = figures[div.dataset.fig];
    if (!fig) return;
    div.dataset.state = "drawing";
    pending++;
    loadPlotly().then(function (Plotly) {
      var config = {displaylogo: false, responsive: true,
                    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"]};
      return Plotly.newPlot(div, fig.data, fig.layout, config);
    }).then(function () {
      div.dataset.state = "drawn";
      div.classList.add("rendered");
    }, function (err) {
      div.dataset.state = "failed";
      div.classList.add("plot-error");
      div.textContent = "plot not shown: " + err.message;
    }).then(function () {
      pending--;
      if (pending === 0) document.body.dataset.plots = "ready";
    });
  }

  function drawVisible(root) {
    var divs = root.querySelectorAll("div[data-fig]");
    for (var i = 0; i < divs.length; i++) if (!hidden(divs[i])) draw(divs[i]);
    if (pending === 0) document.body.dataset.plots = "ready";
  }

  // plots inside a closed <details> are drawn when it opens (plotly needs the width it will have)
  document.addEventListener("toggle", function (ev) {
    if (ev.target.open) drawVisible(ev.target);
  }, true);

  // sortable tables: click a column head; numbers sort by data-v, text by its content
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var dir = th.dataset.dir === "desc" ? "asc" : "desc";
    var heads = table.tHead.rows[0].cells;
    for (var k = 0; k < heads.length; k++) heads[k].removeAttribute("data-dir");
    th.dataset.dir = dir;
    rows.sort(function (a, b) {
      var x = a.cells[col], y = b.cells[col];
      var vx = x.dataset.v, vy = y.dataset.v, c;
      if (vx !== undefined && vy !== undefined) c = parseFloat(vx) - parseFloat(vy);
      else c = x.textContent.localeCompare(y.textContent);
      return dir === "asc" ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortBy(table, col, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(table, col, th); });
    });
  });

  // the program tree: search shows matching vertices and their ancestors, opened
  var search = document.getElementById("tree-search");
  var tree = document.getElementById("psg-tree");
  function filterTree() {
    var q = search.value.trim().toLowerCase();
    var items = tree.querySelectorAll("li");
    var shown = 0;
    for (var i = items.length - 1; i >= 0; i--) {     // children before their parents
      var li = items[i];
      var self = q === "" || li.dataset.text.indexOf(q) >= 0;
      var kid = li.querySelector(":scope > details > ul > li.match, :scope > details > ul > li.via");
      li.classList.toggle("match", q !== "" && self);
      li.classList.toggle("via", q !== "" && !self && kid !== null);
      li.hidden = q !== "" && !self && kid === null;
      if (q !== "" && kid !== null) li.querySelector(":scope > details").open = true;
      if (q !== "" && self) shown++;
    }
    var count = document.getElementById("tree-count");
    if (count) count.textContent = q === "" ? "" : shown + " matching";
  }
  if (search && tree) {
    var timer = null;
    search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(filterTree, 120); });
  }
  document.querySelectorAll("button[data-open]").forEach(function (b) {
    b.addEventListener("click", function () {
      var scope = document.getElementById(b.dataset.scope);
      var open = b.dataset.open === "1";
      scope.querySelectorAll("details").forEach(function (d) { d.open = open; });
    });
  });

  drawVisible(document);
})();
