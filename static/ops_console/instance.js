// The instance page's charts refresh in place. When #charts polls itself and the answer
// has the same plots, each new figure is drawn into the plot already on the page
// (Plotly.react keeps the element, its zoom and hidden traces), instead of swapping the
// partial, which would blank every chart until charts.js drew it again. A range change,
// or plots that came or went, swap the partial as usual.
(function () {
  function figureIds(root) {
    return Array.prototype.map.call(
      root.querySelectorAll("div.chart[data-figure-id]"),
      function (el) { return el.dataset.figureId; }
    ).join(" ");
  }

  function redraw(current, fresh) {
    current.querySelectorAll("div.chart[data-figure-id]").forEach(function (el) {
      var id = el.dataset.figureId;
      var source = fresh.querySelector("script[id='" + id + "']");
      var shown = document.getElementById(id);
      if (!source || !shown) return;
      shown.textContent = source.textContent;
      var figure = JSON.parse(source.textContent);
      Plotly.react(el, figure.data, figure.layout, window.consoleChartConfig());
    });
    current.dataset.refreshedAt = new Date().toISOString();
  }

  document.addEventListener("htmx:beforeSwap", function (e) {
    var target = e.detail.target;
    if (!window.Plotly || !target || target.id !== "charts" || e.detail.elt !== target) return;
    if (e.detail.xhr.status !== 200) return;
    var fresh = new DOMParser().parseFromString(e.detail.serverResponse, "text/html").getElementById("charts");
    var ids = figureIds(target);
    if (!fresh || !ids || figureIds(fresh) !== ids || fresh.dataset.range !== target.dataset.range) return;
    redraw(target, fresh);
    e.detail.shouldSwap = false;
  });
})();
