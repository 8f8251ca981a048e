"""The HTML of the report's pages: style, sorting script, tables, figures, and the files behind them.

Pages use relative links, inline CSS and a few lines of inline JavaScript (table sorting, and a
mark on each image once it has loaded), so the site opens from disk with no server and no network.

Every value from the data (a method, a dataset, a regime, a note, a title) is escaped at one place, ``text``:
the site builds its HTML with ``markup``, which escapes each value it fills in unless it is ``Html`` (markup this
code wrote), and the tables, captions and pages here escape theirs the same way. A method named
``<img src=x onerror=alert(1)>`` reads as that text, never as markup.
"""

from __future__ import annotations

import html
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
header{background:#0d1b2a;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d4e0;font-size:13px}nav{padding:6px 24px;background:#e8eef5;font-size:13px}
nav a{margin-right:14px;color:#0b4f9c;text-decoration:none}main{padding:8px 24px 40px}
h2{border-bottom:2px solid #d0d7de;padding-bottom:4px;margin-top:34px}h3{margin-top:22px}
table{border-collapse:collapse;font-size:12px;background:#fff;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f0f3f6;cursor:pointer;position:sticky;top:0}td.l,th.l{text-align:left}
tr.gfm td.l{color:#b3203a;font-weight:600}tr.default td.l{color:#57606a}
.imp{color:#b35900}.note{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;font-size:13px}
figure{display:inline-block;margin:10px 12px 10px 0;vertical-align:top;background:#fff;border:1px solid #d0d7de;
  padding:6px;max-width:100%;box-sizing:border-box}
figcaption{font-size:12px;color:#57606a;width:0;min-width:100%}
figure img{max-width:100%;height:auto;display:block}
.small{font-size:12px;color:#57606a}.wrap{overflow-x:auto}
.warn{background:#ffebe9;border:1px solid #cf222e;padding:6px 10px;font-size:13px;margin:6px 0}
.note ul,.glance ul{margin:0;padding-left:18px}.note{margin:6px 0}.note details{margin-top:4px}
.glance{background:#fff;border:1px solid #d0d7de;border-left:4px solid #0b4f9c;padding:8px 12px;font-size:15px;
  margin:12px 0}.glance li{margin:3px 0}.glance a,.warn a{font-size:12px;margin-left:4px}
tr.user td{background:#f3effc}tr.user td.l{color:#6639ba;font-weight:600}th.user,.glance .user{color:#6639ba}
details.fold>summary{cursor:pointer;list-style:none;border-bottom:2px solid #d0d7de;margin-top:26px}
details.fold>summary::-webkit-details-marker{display:none}details.fold>summary h2{display:inline;border:0}
details.fold>summary::before{content:"\\25B8  ";font-size:20px}details.fold[open]>summary::before{content:"\\25BE  "}
table.compact .sec{display:none}th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}button{font-size:12px;margin-left:6px}
"""

_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
    var b=t.tBodies[0],rows=Array.from(b.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
    t.querySelectorAll('th').forEach(function(o){o.removeAttribute('aria-sort')});
    th.setAttribute('aria-sort',asc?'ascending':'descending');
    rows.sort(function(x,y){var a=x.cells[i].dataset.v||x.cells[i].textContent,
        c=y.cells[i].dataset.v||y.cells[i].textContent;
      var na=parseFloat(a),nc=parseFloat(c);if(!isNaN(na)&&!isNaN(nc))return asc?na-nc:nc-na;
      return asc?a.localeCompare(c):c.localeCompare(a)});
    rows.forEach(function(r){b.appendChild(r)})})})});
document.querySelectorAll('button[data-columns]').forEach(function(b){b.addEventListener('click',function(){
  var c=document.getElementById(b.dataset.columns).classList.toggle('compact');
  b.textContent=c?'Show all columns':'Fewer columns'})});
function reveal(){var t=location.hash&&document.getElementById(decodeURIComponent(location.hash.slice(1)));
  for(var e=t;e;e=e.parentElement){if(e.tagName==='DETAILS'){e.open=true}}if(t){t.scrollIntoView()}}
window.addEventListener('hashchange',reveal);reveal();
document.querySelectorAll('img').forEach(function(img){
  function mark(){img.setAttribute('data-loaded', img.naturalWidth>0?'1':'0')}
  if(img.complete){mark()}else{img.addEventListener('load',mark);img.addEventListener('error',mark)}});
"""


class Html(str):
    """Markup this code wrote (a page's own tags): ``markup`` and ``text`` insert it as it is."""


def text(value: object) -> Html:
    """``value`` as HTML text: the one place a name from the data is escaped (``&``, ``<``, ``>`` and quotes)."""
    return value if isinstance(value, Html) else Html(html.escape(str(value), quote=True))


class _Escaping(string.Formatter):
    """``str.format`` that escapes every value it fills in (after its format spec) unless it is ``Html``."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Html) and not format_spec:
            return value
        return text(format(value, format_spec))


_ESCAPING = _Escaping()


def markup(template: str, *args: Any, **kwargs: Any) -> Html:
    """``template`` (HTML this code wrote, with ``str.format`` fields) filled with values escaped by ``text``."""
    return Html(_ESCAPING.format(template, *args, **kwargs))


def join(parts: Any, separator: str = "") -> Html:
    """Markup joined: ``Html`` parts as they are, any other value escaped."""
    return Html(separator.join(text(part) for part in parts))


def write_table(df: pd.DataFrame, base: Path, index: bool = False) -> None:
    """``df`` as ``<base>.csv`` and ``<base>.parquet`` (``index``: the index becomes the first columns)."""
    base.parent.mkdir(parents=True, exist_ok=True)
    d = df.reset_index() if index else df
    d.to_csv(base.with_suffix(".csv"), index=False)
    d2 = d.copy()
    for c in d2.columns:
        if d2[c].dtype == object:
            d2[c] = d2[c].astype(str)
    d2.columns = [str(c) for c in d2.columns]
    d2.to_parquet(base.with_suffix(".parquet"), index=False)


def _fmt(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else ""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{v:.{digits}f}"
    return text(v)


def html_table(
    df: pd.DataFrame,
    cols: list[tuple[str, str, int]],
    row_class: Callable[[pd.Series], str] | None = None,
    table_id: str = "",
    secondary: frozenset[str] = frozenset(),
    sort_keys: dict[str, str] | None = None,
    titles: dict[str, str] | None = None,
) -> str:
    """A sortable table of ``cols`` (column, header, digits; negative digits: left-aligned text).

    ``secondary`` columns are hidden until the reader asks for them (a button above the table toggles
    them; it needs ``table_id``); ``sort_keys`` sorts a column by another's values (a text interval
    by its lower end); ``titles`` are header tooltips.
    """
    sort_keys, titles = sort_keys or {}, titles or {}

    def cls(c: str, d: int) -> str:
        return " ".join(x for x in ("l" if d < 0 else "", "sec" if c in secondary else "") if x)

    head = join(
        markup(
            '<th class="{0}"{1}>{2}</th>', cls(c, d), markup(' title="{0}"', titles[c]) if c in titles else Html(), h
        )
        for c, h, d in cols
    )
    body = []
    for _, r in df.iterrows():
        rc = row_class(r) if row_class else ""
        cells = []
        for c, _h, d in cols:
            v = r[c]
            key = r[sort_keys[c]] if c in sort_keys else v
            sv = "" if key is None or (isinstance(key, float) and not np.isfinite(key)) else str(key)
            cells.append(markup('<td class="{0}" data-v="{1}">{2}</td>', cls(c, d), sv, Html(_fmt(v, max(d, 0)))))
        body.append(markup('<tr class="{0}">{1}</tr>', rc, join(cells)))
    tid = markup(' id="{0}"', table_id) if table_id else ""
    compact = ' class="sortable compact"' if secondary else ' class="sortable"'
    toggle = ""
    if secondary and table_id:
        toggle = markup(
            '<p class="small">Click a heading to sort. <button data-columns="{0}">Show all columns</button></p>',
            table_id,
        )
    return markup(
        '{0}<div class="wrap"><table{1}{2}><thead><tr>{3}</tr></thead><tbody>{4}</tbody></table></div>',
        Html(toggle),
        Html(compact),
        Html(tid),
        head,
        join(body),
    )


def figure(rel: str, caption: str) -> str:
    """A figure with its caption and links to the data it plots (CSV and Parquet beside the PNG).

    Shown at its own pixel size (``plots`` sizes each figure for the page at 1,400 pixels), never wider than the
    page; the caption wraps to the image's width.
    """
    stem = rel.rsplit(".", 1)[0]
    return markup(
        '<figure><img src="{rel}" alt="{caption}" loading="eager"><figcaption>{caption} '
        'Data: <a href="{stem}.csv">CSV</a> · <a href="{stem}.parquet">Parquet</a></figcaption></figure>',
        rel=rel,
        caption=caption,
        stem=stem,
    )


def page(title: str, body: str, subtitle: str) -> str:
    """A whole page: header, navigation, ``body``."""
    nav = (
        '<nav><a href="index.html">Leaderboard</a><a href="findings.html">Findings</a>'
        '<a href="index.html#pareto">Pareto</a>'
        '<a href="index.html#budgets">Tuning budgets</a><a href="index.html#tuning">Tuning requirements</a>'
        '<a href="index.html#metrics">Task types and metrics</a><a href="index.html#subgroups">Subgroups</a>'
        '<a href="index.html#robustness">Robustness</a><a href="index.html#overlap">Pretraining overlap</a>'
        '<a href="datasets.html">Per dataset</a><a href="tables.html">Data files</a></nav>'
    )
    return markup(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{css}</style></head>'
        "<body><header><h1>{title}</h1><p>{subtitle}</p></header>{nav}<main>{body}</main><script>{js}</script>"
        "</body></html>",
        title=title,
        subtitle=subtitle,
        css=Html(_CSS),
        nav=Html(nav),
        body=Html(body),
        js=Html(_JS),
    )
