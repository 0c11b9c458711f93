"""Accessibility checks for a page open in the browser tests: axe-core's rules, served from
tests/vendor/axe-core (nothing is fetched at test time), and a keyboard walk that presses
Tab from the top of the page (or of its <main>) and fails where focus is trapped or does
not show."""

from __future__ import annotations

from pathlib import Path

AXE_JS = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("serious", "critical")
TAB_MARGIN = 10  # presses beyond the expected number before focus counts as trapped
TAB_CHUNK = 5  # presses between two looks at how far focus got, past the expected number

# Only the rules whose violations are of these impacts run (the moderate and minor ones,
# such as "region", are the slow ones); the rules axe leaves off by default stay off.
_AXE_RUN = """async (impacts) => {
  const rules = axe._audit.rules.filter(r => impacts.includes(r.impact) && r.enabled !== false
    && !r.tags.includes("experimental") && !r.tags.includes("deprecated")).map(r => r.id);
  const options = {resultTypes: ["violations"], runOnly: {type: "rule", values: rules}};
  const result = await axe.run(document, options);
  return result.violations.filter(v => impacts.includes(v.impact)).map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    targets: v.nodes.slice(0, 3).map(n => n.target.join(" ")), count: v.nodes.length,
  }));
}"""


def install_axe(context) -> None:
    """Load axe-core into every page the browser context opens from now on (cheaper than a
    script tag per page: the browser keeps it compiled)."""
    context.add_init_script(path=str(AXE_JS))


def axe_violations(page, impacts: tuple[str, ...] = FAILING_IMPACTS) -> list[str]:
    """axe-core's violations of these impacts on the page as it stands, one line each:
    rule id, impact, help, how many elements and the first three."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    found = page.evaluate(_AXE_RUN, list(impacts))
    return [
        f"{v['id']} ({v['impact']}): {v['help']} - {v['count']} element(s), e.g. {v['targets']}"
        for v in found
    ]


# Marks the start of the walk (the first thing in `start`), lists the elements Tab should
# reach after it in DOM order, and logs each element focus lands on and whether it shows.
_KEYS_INSTALL = """(startSelector) => {
  const selector = 'a[href], area[href], button, input, select, textarea, summary, iframe, '
    + '[tabindex], [contenteditable=""], [contenteditable="true"]';
  const from = document.querySelector(startSelector) || document.body;
  const tabbable = [...from.querySelectorAll(selector)].filter(e =>
    !e.disabled && e.tabIndex >= 0 && e.type !== "hidden" && !e.closest("[inert]")
    && e.checkVisibility({visibilityProperty: true}));
  // Tab also stops on each part of a date or time field (day, month, year, hour, ...).
  const parts = {"date": 3, "datetime-local": 6, "time": 3, "month": 2, "week": 2};
  const stops = tabbable.reduce((n, e) => n + (e.tagName === "INPUT" && parts[e.type] || 1), 0);
  const describe = e => {
    const text = (e.textContent || e.value || e.getAttribute("aria-label") || e.name || "").trim();
    const classes = typeof e.className === "string" ? e.className.trim().split(/\\s+/).filter(Boolean) : [];
    return e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + classes.map(c => "." + c).join("")
      + (text ? ` "${text.replace(/\\s+/g, " ").slice(0, 40)}"` : "");
  };
  const shows = e => {
    const s = getComputedStyle(e);
    return (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== "none";
  };
  const last = tabbable[tabbable.length - 1];
  const isEnd = e => e === last || (last && last.type === "radio" && e.type === "radio"
    && e.name === last.name && e.form === last.form);
  const start = document.createElement("span");
  start.tabIndex = -1;
  from.prepend(start);
  start.focus();
  const walk = {log: [], reachedEnd: false, unseen: [], start, listening: true};
  document.addEventListener("focusin", ev => {
    const e = ev.target;
    if (e === start || !walk.listening) return;
    walk.log.push(describe(e));
    if (isEnd(e)) walk.reachedEnd = true;
    if (!shows(e)) walk.unseen.push(describe(e));
  }, true);
  window.__keyboardWalk = walk;
  return {count: tabbable.length, stops, last: last ? describe(last) : null};
}"""

_KEYS_STATE = """() => {
  const w = window.__keyboardWalk;
  return {reachedEnd: w.reachedEnd, moves: w.log.length, tail: w.log.slice(-6)};
}"""

_KEYS_FINISH = """() => {
  const w = window.__keyboardWalk;
  w.listening = false;
  w.start.remove();
  document.activeElement && document.activeElement.blur();
  return [...new Set(w.unseen)];
}"""


def keyboard_problems(page, start: str = "body") -> list[str]:
    """Tab from the first thing in `start` (a CSS selector): focus must reach the last
    tabbable element after it (in DOM order) within as many presses as there are stops
    plus a margin, without stopping or circling on the way, and each element it lands on
    must show it (an outline or a box shadow)."""
    plan = page.evaluate(_KEYS_INSTALL, start)
    problems = []
    if plan["count"]:
        limit = plan["stops"] + TAB_MARGIN
        pressed, moves_before = 0, 0
        batch = plan["stops"]  # the presses the last element should take; then a few more at a time
        state = page.evaluate(_KEYS_STATE)
        while not state["reachedEnd"] and pressed < limit:
            moves_before = state["moves"]
            for _ in range(batch):
                page.keyboard.press("Tab")
            pressed += batch
            batch = min(TAB_CHUNK, limit - pressed)
            state = page.evaluate(_KEYS_STATE)
        if not state["reachedEnd"]:
            how = "stopped moving" if state["moves"] == moves_before else f"circled for {pressed} presses"
            problems.append(
                f"keyboard trap: Tab never reached the last of {plan['count']} tabbable elements "
                f"({plan['last']}); focus {how}, last on {state['tail']}"
            )
    unseen = page.evaluate(_KEYS_FINISH)
    if unseen:
        problems.append(f"focus not visible (no outline or box shadow) on {unseen[:5]}")
    return problems


def accessibility_problems(page, start: str = "body") -> list[str]:
    """axe's serious and critical violations, then the keyboard walk's problems."""
    return axe_violations(page) + keyboard_problems(page, start)
