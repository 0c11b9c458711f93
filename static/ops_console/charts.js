// Draw every plotly figure the server embedded as JSON (div.chart[data-figure-id]).
(function () {
  function draw(root) {
    root.querySelectorAll("div.chart[data-figure-id]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figureId);
      if (!source || !window.Plotly) return;
      var figure = JSON.parse(source.textContent);
      Plotly.react(el, figure.data, figure.layout, {displaylogo: false, responsive: true});
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (e) { draw(e.target); });
})();
