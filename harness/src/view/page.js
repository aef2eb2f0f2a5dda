(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("trace-data").textContent);
  var panel = document.getElementById("fields");
  var selected = null;
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; });
  }
  function show(i) {
    var e = data[i];
    if (!e) return;
    var rows = "<tr><td>#</td><td>" + i + "</td></tr><tr><td>at_ms</td><td>" + e.at_ms + "</td></tr>" +
      "<tr><td>host</td><td>" + esc(e.host) + "</td></tr><tr><td>kind</td><td>" + esc(e.kind) + "</td></tr>";
    Object.keys(e.fields).forEach(function (k) {
      var v = e.fields[k];
      rows += "<tr><td>" + esc(k) + "</td><td>" + esc(typeof v === "string" ? v : JSON.stringify(v)) + "</td></tr>";
    });
    panel.innerHTML = "<table>" + rows + "</table>";
  }
  function eventOf(target) {
    var g = target.closest ? target.closest(".ev") : null;
    return g ? g : null;
  }
  var svg = document.getElementById("seq");
  svg.addEventListener("mouseover", function (ev) {
    var g = eventOf(ev.target);
    if (g && !selected) show(+g.dataset.i);
  });
  svg.addEventListener("click", function (ev) {
    var g = eventOf(ev.target);
    if (!g) {
      var m = ev.target.closest && ev.target.closest("[data-ev]");
      if (m) select(+m.dataset.ev);
      return;
    }
    select(+g.dataset.i);
  });
  function select(i) {
    if (selected) selected.classList.remove("sel");
    selected = document.getElementById("ev-" + i);
    if (selected) selected.classList.add("sel");
    show(i);
  }
  document.querySelectorAll("a.jump").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      ev.preventDefault();
      var i = +a.dataset.ev;
      var target = document.getElementById("ev-" + i);
      if (target) target.scrollIntoView({block: "center"});
      select(i);
      document.querySelectorAll('.violation-marker[data-ev="' + i + '"]').forEach(function (m) {
        m.classList.add("flash");
        setTimeout(function () { m.classList.remove("flash"); }, 1200);
      });
    });
  });
  var filter = document.getElementById("filter");
  var count = document.getElementById("filter-count");
  var tagged = Array.prototype.slice.call(document.querySelectorAll("#seq [data-rid]"));
  filter.addEventListener("input", function () {
    var want = filter.value.trim();
    var hits = 0;
    tagged.forEach(function (el) {
      var on = !want || el.dataset.rid === want;
      if (on && want) hits++;
      el.classList.toggle("dim", !on);
    });
    count.textContent = want ? hits + " elements about request " + want : "";
  });
  // A link can carry a filter or a selection: page.html#filter=1, page.html#event=21.
  var hash = decodeURIComponent(location.hash.slice(1));
  if (hash.indexOf("filter=") === 0) {
    filter.value = hash.slice(7);
    filter.dispatchEvent(new Event("input"));
  } else if (hash.indexOf("event=") === 0) {
    select(+hash.slice(6));
  }
  document.body.dataset.ready = "1";
  // When the document was parsed and this script ran; the first frame after it, below.
  document.body.dataset.scriptMs = performance.now().toFixed(0);
  requestAnimationFrame(function () {
    requestAnimationFrame(function () {
      document.body.dataset.renderMs = performance.now().toFixed(0);
    });
  });
})();
