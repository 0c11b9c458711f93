// Draw every plotly figure the server embedded as JSON (div.chart[data-figure-id]), with
// dates and the toolbar in the page's language (plotly.js ships English only; the Chinese
// locale below is in plotly's own locale format).
(function () {
  var ZH = {
    moduleType: "locale",
    name: "zh-CN",
    dictionary: {
      "Autoscale": "自动缩放",
      "Box Select": "矩形框选",
      "Click to enter Colorscale title": "点击输入色阶标题",
      "Compare data on hover": "悬停时比较数据",
      "Double-click to zoom back out": "双击回到原始缩放",
      "Download plot": "下载图表",
      "Download plot as a png": "下载图表为 PNG",
      "Lasso Select": "套索选择",
      "Orbital rotation": "轨道旋转",
      "Pan": "平移",
      "Reset": "重置",
      "Reset axes": "重置坐标轴",
      "Reset view": "重置视图",
      "Show closest data on hover": "悬停时显示最近的数据",
      "Snapshot succeeded": "截图成功",
      "Sorry, there was a problem downloading your snapshot!": "抱歉，下载截图时出现问题！",
      "Taking snapshot - this may take a few seconds": "正在截图，可能需要几秒钟",
      "Toggle Spike Lines": "切换辅助线",
      "Toggle show closest data on hover": "切换悬停时显示最近的数据",
      "Zoom": "缩放",
      "Zoom in": "放大",
      "Zoom out": "缩小",
      "close:": "收盘：",
      "high:": "最高：",
      "low:": "最低：",
      "open:": "开盘：",
      "trace": "数据系列"
    },
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
