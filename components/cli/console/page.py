"""The console's HTML: server-rendered from string templates, every value escaped (`html.escape`), no script but a
<meta refresh> on the views, so the page follows the local cloud by itself (not on Drift: each load is a scan)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from string import Template
from urllib.parse import urlencode

from ..inspection import Parked
from .views import DRIFT_MOST, SCHEDULER_METRICS, WINDOWS, Delivery, Drift, Metric, Upcoming, bound, fix, stamp

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
header{background:#233044;color:#fff;padding:10px 20px}header a{color:#cfe0ff;margin-right:14px}
main{padding:16px 20px;max-width:1100px}h1{font-size:18px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border:1px solid #d9dde3;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#eef1f5}.note{color:#5b6675;font-size:13px}
.timeline{position:relative;height:34px;background:#fff;border:1px solid #d9dde3;margin:6px 0}
.tick{position:absolute;top:4px;width:3px;height:24px;background:#2f6fde}.ok{color:#1b7f3b}.over{color:#b3261e}
.refused{background:#fff1f0;border:1px solid #b3261e;padding:10px}nav a{margin-right:12px}
.status{font-weight:600}button{font:inherit;padding:3px 10px}
pre{background:#fff;border:1px solid #d9dde3;padding:8px;white-space:pre-wrap;word-break:break-word}
.scale{display:flex;justify-content:space-between;color:#5b6675;font-size:12px}
tr.drift td:first-child{color:#b3261e;font-weight:600}td.number{text-align:right;white-space:nowrap}
"""

VIEWS = ("upcoming", "delivered", "parked", "drift")

LAYOUT = Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8">$refresh<title>$title · scheduled-table console</title>
<style>$style</style></head>
<body><header><strong>scheduled-table console</strong> &nbsp; <a href="/">stacks</a>$tabs</header>
<main><h1>$title</h1>$body</main></body></html>
""")


def layout(title: str, body: str, *, stack: str | None = None, refresh: int | None = None) -> str:
    tabs = ""
    if stack:
        tabs = "".join(f'<a href="/{view}?{urlencode({"stack": stack})}">{view.capitalize()}</a>' for view in VIEWS)
    return LAYOUT.substitute(
        title=escape(title),
        body=body,
        style=STYLE,
        tabs=tabs,
        refresh=f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else "",
    )


def refused(message: str) -> str:
    return layout("refused", f'<p class="refused">{escape(message)}</p>')


def index(stacks: dict[str, dict[str, object]], read_only: dict[str, str | None]) -> str:
    rows = []
    for function, config in sorted(stacks.items()):
        links = " ".join(f'<a href="/{view}?{urlencode({"stack": function})}">{view}</a>' for view in VIEWS)
        why = read_only.get(function)
        rows.append(
            f"<tr><td>{escape(str(config.get('table')))}</td><td>{escape(str(config.get('mode')))}</td>"
            f"<td>{escape(function)}</td><td>{links}</td><td>{'read-only: ' + escape(why) if why else 'redrive'}</td>"
            "</tr>"
        )
    body = (
        "<table><tr><th>table</th><th>mode</th><th>consumer function</th><th>views</th><th>actions</th></tr>"
        + "".join(rows)
        + "</table>"
        if rows
        else "<p>No ScheduledTable found here.</p>"
    )
    return layout("stacks", body)


def upcoming(
    function: str, table: str, found: list[Upcoming], now: datetime, window: str, limit: int, refresh: int
) -> str:
    seconds = WINDOWS[window]
    choices = " ".join(
        f'<a href="/upcoming?{urlencode({"stack": function, "window": name, "limit": limit})}">'
        + (f"<strong>next {name}</strong>" if name == window else f"next {name}")
        + "</a>"
        for name in WINDOWS
    )
    parts = [f'<nav>{choices}</nav><p class="note">from {stamp(now)}; up to {limit} read per page</p>']
    for store in found:
        ticks = "".join(
            f'<span class="tick" title="{escape(stamp(o.when))} {escape(o.what)}" '
            f'style="left:{max(0.0, min(99.5, (o.when - now).total_seconds() / seconds * 100)):.2f}%"></span>'
            for o in store.occurrences
            if o.when is not None
        )
        rows = "".join(
            f'<tr class="occurrence"><td>{escape(stamp(o.when) if o.when else "")}</td>'
            f"<td>{escape(o.what)}</td><td>{escape(o.label)}</td></tr>"
            for o in store.occurrences
        )
        more = ""
        if store.cursor:
            query = {"stack": function, "window": window, "limit": limit, "cursor": store.cursor}
            more = f'<p><a class="next" href="/upcoming?{urlencode(query)}">next page</a></p>'
        parts.append(
            f"<h2>{escape(store.source)}: {len(store.occurrences)} in the window</h2>"
            f'<p class="note">read: {escape(store.read)}</p>'
            + (
                f'<div class="timeline">{ticks}</div><div class="scale"><span>now</span><span>+{window}</span></div>'
                * bool(ticks)
            )
            + (f"<table><tr><th>due (UTC)</th><th>occurrence</th><th></th></tr>{rows}</table>" if rows else "")
            + more
        )
    return layout(f"Upcoming · {table}", "".join(parts), stack=function, refresh=refresh)


@dataclass
class Shown:
    """What the Delivered view read: the logged sends and what was read, the functions' published metrics and what
    was read, and Scheduler's counts (None: not an eventbridge or precise ttl stack; else its counts or None, and
    why)."""

    sent: list[Delivery]
    note: str
    metrics: list[Metric]
    metrics_note: str
    scheduler: tuple[dict[str, float] | None, str] | None


def number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def delivered(function: str, config: dict[str, object], shown: Shown, since: int, refresh: int) -> str:
    limit, words = bound(dict(config))
    rows = []
    for d in shown.sent:
        judged = ""
        if limit is not None:
            judged = '<span class="ok">within</span>' if d.late <= limit else '<span class="over">over</span>'
        rows.append(
            f'<tr class="delivery"><td>{escape(stamp(d.at))}</td><td>{escape(d.due)}</td><td>{escape(d.what)}</td>'
            f'<td class="late">{d.late:.1f} s {judged}</td><td>{escape(d.function)}</td></tr>'
        )
    scheduled = shown.scheduler is not None
    body = (
        f"<p>lateness bound of mode {escape(str(config.get('mode')))}: {escape(words)}</p>"
        + (
            '<p class="note scheduler-note">Shown: the sends the stack\'s functions log with their lateness. Not '
            "shown: the due events Scheduler delivers itself at their time, which pass through no function's log; "
            "Scheduler's own counts are below.</p>"
            if scheduled
            else ""
        )
        + f'<p class="note">read: {escape(shown.note)}. Sends the handlers log with their lateness (lateSeconds): '
        "polling's processor always; a past-due send by eventbridge's consumer or ttl's executor at LOG_LEVEL=DEBUG."
        "</p>"
        + (
            "<table><tr><th>sent (UTC)</th><th>due</th><th>occurrence</th><th>late</th><th>function</th></tr>"
            + "".join(rows)
            + "</table>"
            if rows
            else f"<p>No delivery logged in the last {since // 60} min.</p>"
        )
        + metrics_table(shown, since)
        + (scheduler_table(*shown.scheduler) if shown.scheduler is not None else "")
    )
    table = str(config.get("table"))
    return layout(f"Delivered · {table}", body, stack=function, refresh=refresh)


def metrics_table(shown: Shown, since: int) -> str:
    """The functions' published metrics over the window, summed (a name ending in Max: the largest)."""
    rows = "".join(
        f'<tr class="metric"><td>{escape(m.name)}</td><td class="number">{number(m.total)}</td>'
        f"<td>{'metric' if m.published else 'logged beside them'}{' (the largest)' if m.largest else ''}</td>"
        f"<td>{escape(', '.join(f'{f}: {number(v)}' for f, v in sorted(m.by_function.items())))}</td></tr>"
        for m in shown.metrics
    )
    head = f"<h2>Published by the functions, last {since // 60} min</h2>"
    note = f'<p class="note">read: {escape(shown.metrics_note)}</p>'
    if not rows:
        return head + note + "<p>No embedded-metric line in the window.</p>"
    return (
        head + note + "<table><tr><th>name</th><th>total</th><th>kind</th><th>by function</th></tr>" + rows + "</table>"
    )


def scheduler_table(counts: dict[str, float] | None, note: str) -> str:
    head = f'<h2>Scheduler\'s own deliveries</h2><p class="note scheduler-counts">{escape(note)}</p>'
    if counts is None:
        return head
    rows = "".join(
        f'<tr class="scheduler-metric"><td>{escape(name)}</td><td class="number">{number(counts[name])}</td></tr>'
        for name in SCHEDULER_METRICS
    )
    return head + f"<table><tr><th>AWS/Scheduler metric</th><th>sum</th></tr>{rows}</table>"


SOURCES = {"poison queue": "poison", "stream DLQ": "stream", "target DLQ": "target"}


def parked(function: str, table: str, found: list[Parked], token: str, read_only: str | None, refresh: int) -> str:
    parts = []
    for queue in found:
        rows = "".join(
            f'<tr class="parked"><td>{escape(message_id)}</td><td>{escape(keys)}</td>'
            f'<td class="reason">{escape(reason)}</td><td class="fix">{escape(fix(queue.label, reason))}</td></tr>'
            for message_id, reason, keys in queue.sample
        )
        action = ""
        if queue.visible and read_only is None:
            action = form(function, SOURCES[queue.label], token, "dry-run", f"Redrive {queue.label}: dry run first")
        parts.append(
            f"<h2>{escape(queue.label)}: {queue.visible} visible, {queue.in_flight} in flight</h2>"
            + (f"<table><tr><th>message</th><th>keys</th><th>reason</th><th>fix</th></tr>{rows}</table>" * bool(rows))
            + action
        )
    if read_only is not None:
        parts.insert(0, f'<p class="note read-only">read-only: {escape(read_only)}</p>')
    return layout(f"Parked · {table}", "".join(parts), stack=function, refresh=refresh)


def form(function: str, source: str, token: str, step: str, label: str, confirm: str = "") -> str:
    fields = {"stack": function, "source": source, "token": token, "step": step, "confirm": confirm}
    hidden = "".join(f'<input type="hidden" name="{k}" value="{escape(v)}">' for k, v in fields.items() if v)
    return f'<form method="post" action="/redrive">{hidden}<button type="submit">{escape(label)}</button></form>'


def status_words(status: int, dry_run: bool) -> str:
    """The command's exit status, as the page says it."""
    if status == 2:
        return "nothing could start (exit status 2): see the reason above"
    if dry_run:
        return (
            "dry run, nothing changed: all of it can be redriven (exit status 0)"
            if status == 0
            else "dry run, nothing changed: some of it cannot be redriven as it is (exit status 1)"
        )
    return (
        "done: everything in scope was redriven (exit status 0)"
        if status == 0
        else "something could not be redriven (exit status 1): it stays in its queue"
    )


def redrive(
    function: str, table: str, source: str, lines: list[str], status: int, dry_run: bool, confirm_form: str
) -> str:
    body = (
        f"<p>redrive {escape(source)}" + (" (dry run)" if dry_run else "") + "</p>"
        f"<pre>{escape(chr(10).join(lines))}</pre>"
        f'<p class="status">{escape(status_words(status, dry_run))}</p>'
        + confirm_form
        + f'<p><a href="/parked?{urlencode({"stack": function})}">back to Parked</a></p>'
    )
    return layout(f"Redrive · {table}", body, stack=function)


def drift(function: str, table: str, found: Drift, items: int) -> str:
    """`reconcile --dry-run`'s findings on a sample: what was read, how long it took, each kind with its count and
    examples (what a repair would do first), and what stopped it early. No refresh: each load is a scan."""
    sizes = sorted({100, 1000, DRIFT_MOST, items})
    choices = " ".join(
        f'<a href="/drift?{urlencode({"stack": function, "items": n})}">'
        + (f"<strong>{n:,} items</strong>" if n == items else f"{n:,} items")
        + "</a>"
        for n in sizes
    )
    scope = (
        "the whole table (so the schedules no item asks for, and aggregate's totals, were checked too)"
        if found.whole
        else f"a sample: the first {found.tally.scanned:,} items a scan returns (in DynamoDB's order, by key hash); "
        "schedules no item asks for and aggregate's totals are checked only when the whole table is read: "
        f"scheduled-table reconcile --dry-run --table {table} reads all of it"
    )
    rows = "".join(
        f'<tr class="{"drift" if kind.startswith("would ") else "kind"}"><td>{escape(kind)}</td>'
        f'<td class="number">{count:,}</td><td>{escape("; ".join(examples))}</td></tr>'
        for kind, count, examples in found.kinds
    )
    would = sum(count for kind, count, _ in found.kinds if kind.startswith("would "))
    problems = "".join(f'<p class="refused">{escape(line)}</p>' for line in found.problems)
    body = (
        f"<nav>{choices}</nav>"
        f'<p class="note">read: {escape(scope)}; took {found.seconds:.1f} s. The same code as '
        "scheduled-table reconcile --dry-run: nothing was changed. "
        f'<a href="/drift?{urlencode({"stack": function, "items": items})}">check again</a></p>'
        + problems
        + f'<p class="status">{escape(found.headline)}</p>'
        + (
            f"<p>{would:,} to repair: scheduled-table reconcile --table {escape(table)} repairs them.</p>"
            if would
            else ""
        )
        + (
            "<p>The check stopped before the end of its sample: the counts are of what it read before.</p>"
            if found.problems
            else "<p>No drift in what was read.</p>" * (not would)
        )
        + (f"<table><tr><th>kind</th><th>count</th><th>examples</th></tr>{rows}</table>" if rows else "")
    )
    return layout(f"Drift · {table}", body, stack=function)
