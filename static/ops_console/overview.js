// The fleet overview's pages by keyboard: ← and → follow the pager's previous and next
// links (they load the page into #tiles with htmx, like a click).
document.addEventListener("keydown", (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const rel = { ArrowLeft: "prev", ArrowRight: "next" }[event.key];
  const target = event.target;
  if (!rel || (target instanceof Element && target.closest("input, textarea, select, [contenteditable]"))) return;
  const link = document.querySelector(`#tiles .pagination a[rel="${rel}"]`);
  if (link) {
    event.preventDefault();
    link.click();
  }
});
