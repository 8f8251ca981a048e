"""The report's pages carry no markup from the data: every name is escaped at one place (``pages.text``).

Finding 5: a method named ``<img src=x onerror=alert(1)>`` whose cell failed was written unescaped into index.html
by the failed-cells sentence. Here hostile names go through every table, figure caption and sentence the site
writes (methods, a user submission, datasets, a note, the title), and the pages are parsed back: only the site's
own tags and attributes are there, and no name's raw markup.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis.pages import markup, text
from orchestrator.analysis.site import SECTIONS, build_report
from tests.synthetic_trials import synthetic_dataset_stats, synthetic_trials

IMG = "<img src=x onerror=alert(1)>"
QUOTES = "q\"uo'te & <b>amp</b>"
SCRIPT = "<script>alert(2)</script>"
HOSTILE = (IMG, QUOTES, SCRIPT, "a&b", "x' onmouseover='alert(3)")
#: The tags the site writes, and the attributes it gives them.
TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "nav", "a", "main", "script",
    "table", "thead", "tbody", "tr", "th", "td", "div", "details", "summary", "ul", "li", "b", "span", "figure",
    "img", "figcaption", "button",
}  # fmt: skip
ATTRIBUTES = {"lang", "charset", "class", "id", "href", "src", "alt", "loading", "title", "data-v", "data-columns",
              "data-topic"}  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.data: list[str] = []
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if not self._in or self._in[-1] not in ("script", "style"):
            self.data.append(data)


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Path:
    supervised = ("mlp", "gcn", IMG, QUOTES)
    trials = synthetic_trials(
        supervised=supervised, gfms=("graphpfn",), n_datasets=5, n_trials=6, gfm_trials=2, user_methods=(SCRIPT,)
    )
    names = ["cora", "a&b", SCRIPT, "x' onmouseover='alert(3)", "plain"]
    trials["dataset"] = trials["dataset"].cat.rename_categories(names)
    failed = (trials["method"] == IMG) & (trials["dataset"] == "plain") & (trials["split"] == 0)
    trials.loc[failed, "status"] = "failed"  # a cell of IMG holds trials but none selectable: the sentence names it
    stats = synthetic_dataset_stats(5).assign(dataset=names)
    out = tmp_path_factory.mktemp("site")
    entries = pd.DataFrame(
        {"method": [SCRIPT], "status": [QUOTES], "hardware": [IMG], "cells": [1], "cells_expected": [2],
         "missing": [IMG]}
    )  # fmt: skip
    build_report(trials, out, dataset_stats=stats, rounds=20, title=IMG, notes=[f"note about {IMG}"], entries=entries)
    return out


@pytest.mark.parametrize("page", ["index.html", "datasets.html", "findings.html", "tables.html"])
def test_no_name_brings_markup_into_a_page(hostile_site, page):
    source = (hostile_site / page).read_text()
    parsed = _Tags()
    parsed.feed(source)
    assert {tag for tag, _ in parsed.tags} <= TAGS
    for tag, attrs in parsed.tags:
        assert {name for name, _ in attrs} <= ATTRIBUTES, (tag, attrs)
        if tag == "img":
            assert dict(attrs)["src"].startswith("figures/"), attrs
    assert sum(tag == "script" for tag, _ in parsed.tags) == 1  # the site's own sorting script only
    for name in HOSTILE:
        assert name not in source, name
    stray = [d for d in parsed.data if "<" in d or ">" in d or "&" in d]  # text holds entities, never raw < > &
    assert not stray, stray[:3]


def test_the_hostile_names_are_shown_escaped(hostile_site):
    index = (hostile_site / "index.html").read_text()
    assert text(IMG) in index and text(QUOTES) in index and text(SCRIPT) in index
    assert re.search(re.escape(text(IMG)) + r" 1: \d+ failed", index)  # the failed-cells sentence, escaped
    datasets = (hostile_site / "datasets.html").read_text()
    assert text(SCRIPT) in datasets and "a&amp;b" in datasets


def test_markup_escapes_every_value_it_is_given():
    assert markup("<b>{0}</b> {n:.2f} {m}", IMG, n=np.float64(1.5), m=markup("<i>{0}</i>", "&")) == (
        "<b>&lt;img src=x onerror=alert(1)&gt;</b> 1.50 <i>&amp;</i>"
    )


class _Page(HTMLParser):
    """Every id and in-page link of a page, and each leaderboard row's class and method."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.rows: dict[str, list[tuple[str, str]]] = {}  # table id -> (row class, Method cell)
        self._table: str | None = None
        self._head = False
        self._row: str | None = None
        self._cell = -1
        self._method = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "#" in a.get("href", ""):
            self.links.append(a["href"])
        if tag == "table" and a.get("id", "").startswith("leaderboard-"):
            self._table = a["id"]
            self.rows[self._table] = []
        elif self._table is None:
            return
        elif tag == "thead":
            self._head, self._cell = True, -1
        elif tag == "tr" and not self._head:
            self._row, self._cell = a.get("class", ""), -1
        elif tag in ("th", "td"):
            self._cell += 1

    def handle_data(self, data: str) -> None:
        if self._table is None or not data.strip():
            return
        if self._head and data.strip() == "Method":
            self._method = self._cell
        elif self._row is not None and self._cell == self._method:
            self.rows[self._table].append((self._row, data.strip()))

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self._head = False
        elif tag == "tr":
            self._row = None
        elif tag == "table":
            self._table = None


def _page(site: Path, name: str) -> _Page:
    parsed = _Page()
    parsed.feed((site / name).read_text())
    return parsed


@pytest.mark.parametrize("site", ["hostile_site", "built_report"])
def test_no_html_id_repeats_and_every_link_to_the_index_lands_on_one(site, request):
    out = request.getfixturevalue(site)
    out = out[1] if isinstance(out, tuple) else out
    index_ids = set(_page(out, "index.html").ids)
    for name in ("index.html", "datasets.html", "findings.html", "tables.html"):
        parsed = _page(out, name)
        repeated = sorted({i for i in parsed.ids if parsed.ids.count(i) > 1})
        assert not repeated, (name, repeated)
        for href in parsed.links:
            target, anchor = href.split("#", 1)
            if target in ("", "index.html"):
                assert anchor in (index_ids if target or name == "index.html" else set(parsed.ids)), (name, href)


def test_the_user_submission_is_marked_on_every_leaderboard_and_ranked_on_the_first_screen(built_report):
    _, out = built_report
    lb = pd.read_csv(out / "tables" / "leaderboard.csv")
    mine = lb[lb["origin"].str.startswith("user:")]
    assert len(mine) and set(mine["view"]) == {"mynet", "mynet-Default"}
    parsed = _page(out, "index.html")
    assert {t.removeprefix("leaderboard-native-").removeprefix("leaderboard-") for t in parsed.rows} == {
        r.replace("/", "-") for r in lb["regime"].unique()
    }
    for table, rows in parsed.rows.items():
        assert rows, table
        marked = {view for cls, view in rows if "user" in cls.split()}
        assert marked == set(mine["view"]), table
    index = (out / "index.html").read_text()
    glance = index[index.index('id="glance"') : index.index('id="coverage"')]  # the first screen, above coverage
    for r in mine.itertuples():
        n = int((lb["regime"] == r.regime).sum())
        assert f"{r.view} ranks {r.rank} of {n} (Elo {r.elo:.0f}" in glance, r.view
    said = pd.read_csv(out / "tables" / "findings.csv")
    said = said[said["topic"] == "submitted"]
    assert sorted(said["regime"]) == sorted(lb["regime"].unique())
    assert all("mynet ranks" in s and "mynet-Default ranks" in s for s in said["sentence"])


def test_the_first_screen_says_who_leads_and_how_sure_and_the_long_sections_fold(built_report):
    _, out = built_report
    index = (out / "index.html").read_text()
    said = pd.read_csv(out / "tables" / "findings.csv")
    glance = index[index.index('id="glance"') : index.index('id="coverage"')]
    for r in said[said["topic"] == "elo"].itertuples():  # each regime's lead, and how sure it is
        assert text(f"{r.regime}</b>: ") in glance or f"{r.regime}</b>: " in glance
        assert text(r.sentence.removeprefix(f"In {r.regime}, ")) in glance and "interval" in r.sentence
    folded = re.findall(r'<details class="fold" id="([^"]+)">', index)
    assert folded == [s.id for s in SECTIONS if s.fold and not s.per_regime_heading and s.id in folded]
    assert {"pareto", "budgets", "subgroups", "tuning", "metrics", "robustness"} <= set(folded)
    assert index.index('id="lb-') < index.index('<details class="fold"')  # the leaderboards stay open, first
