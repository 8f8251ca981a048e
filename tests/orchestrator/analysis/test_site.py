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
from orchestrator.analysis.site import build_report
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
