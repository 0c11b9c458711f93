// Draw every plotly figure the server embedded as JSON (div.chart[data-figure-id]), with
// dates and numbers in the page's language (plotly.js ships English only; the Chinese
// locale below is plotly's own format for it).
(function () {
  var ZH = {
    moduleType: "locale",
    name: "zh-CN",
    dictionary: {},
    format: {
      days: ["星期日", "星期一", "星期二", "星期三", "星期四", "星期五", "星期六"],
      shortDays: ["周日", "周一", "周二", "周三", "周四", "周五", "周六"],
      months: ["一月", "二月", "三月", "四月", "五月", "六月", "七月", "八月", "九月", "十月", "十一月", "十二月"],
      shortMonths: ["1月", "2月", "3月", "4月", "5月", "6月", "7月", "8月", "9月", "10月", "11月", "12月"],
      date: "%Y-%m-%d",
      year: "%Y年",
      month: "%Y年%-m月",
      dayMonth: "%-m月%-d日",
      dayMonthYear: "%Y年%-m月%-d日"
    }
  };
  var registered = false;

  window.consoleChartConfig = function () {
    var chinese = (document.documentElement.lang || "").indexOf("zh") === 0;
    if (chinese && !registered && window.Plotly) {
      Plotly.register(ZH);
      registered = true;
    }
    return {displaylogo: false, responsive: true, locale: chinese ? "zh-CN" : "en"};
  };

  function draw(root) {
    root.querySelectorAll("div.chart[data-figure-id]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figureId);
      if (!source || !window.Plotly) return;
      var figure = JSON.parse(source.textContent);
      Plotly.react(el, figure.data, figure.layout, window.consoleChartConfig());
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (e) { draw(e.target); });
})();
