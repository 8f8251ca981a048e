"""The report in headless Chromium: leaderboard rows are there, the user submission's rows marked, no id twice,
every plot image loaded (the folded sections' too), and a link into a folded section opens it.

Runs Debian's `chromium` (apt-get install -y chromium). The page's own inline script marks each
<img> with data-loaded="1" once it has a natural width; --dump-dom prints the DOM after the load
event. A screenshot and its first screen (1,400 x 900) are kept under $NODEGROUND_ARTIFACTS (default: a
temporary directory).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def first_screen(shot: Path, out: Path, height: int = 900) -> Path:
    """The top ``height`` pixels of a screenshot: what a 1,400 x 900 window shows before any scrolling."""
    from PIL import Image

    with Image.open(shot) as im:
        im.crop((0, 0, im.width, min(height, im.height))).save(out)
    return out


class DomSummary(HTMLParser):
    """The rendered page: its images, every id, and per leaderboard its row count and the user submissions' rows
    (class "user")."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict] = []
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.marked: dict[str, int] = {}
        self._table: str | None = None
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "img":
            self.images.append(a)
        elif tag == "table" and (a.get("id") or "").startswith("leaderboard-"):
            self._table = a["id"]
            self.rows[self._table] = self.marked[self._table] = 0
        elif tag == "tbody" and self._table:
            self._in_body = True
        elif tag == "tr" and self._table and self._in_body:
            self.rows[self._table] += 1
            self.marked[self._table] += "user" in (a.get("class") or "").split()

    def repeated_ids(self) -> list[str]:
        return sorted({i for i in self.ids if self.ids.count(i) > 1})

    def handle_endtag(self, tag):
        if tag == "table":
            self._table, self._in_body = None, False


def test_report_renders_leaderboard_and_every_plot(built_report, tmp_path):
    res, out = built_report
    assert res.exit_code == 0, res.output
    url = (out / "index.html").resolve().as_uri()
    run = chromium(["--virtual-time-budget=15000", "--dump-dom", url], tmp_path / "profile1")
    assert run.returncode == 0, run.stderr[-2000:]
    dom = DomSummary()
    dom.feed(run.stdout)

    lb = pd.read_csv(out / "tables" / "leaderboard.csv")
    expected = lb.groupby("regime").size()
    native = pd.read_csv(out / "tables" / "leaderboard_native.csv").groupby("regime").size()
    assert dom.rows == {
        **{f"leaderboard-{r.replace('/', '-')}": n for r, n in expected.items()},
        **{f"leaderboard-native-{r.replace('/', '-')}": n for r, n in native.items()},
    }
    assert "graphpfn" in run.stdout and "gcn-Default" in run.stdout

    marked = {}  # the user submission's rows, marked on both views of every regime's leaderboard
    for name, prefix in (("leaderboard", "leaderboard-"), ("leaderboard_native", "leaderboard-native-")):
        board = pd.read_csv(out / "tables" / f"{name}.csv")
        mine = board[board["origin"].str.startswith("user:")].groupby("regime").size()
        marked |= {prefix + r.replace("/", "-"): n for r, n in mine.items()}
    assert sum(marked.values()) > 0 and dom.marked == marked
    assert not dom.repeated_ids()

    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    shown = sorted(Path(i["src"]).name for i in dom.images)
    assert shown == figures, "every figure appears on the page (the folded sections' too)"
    not_loaded = [i["src"] for i in dom.images if i.get("data-loaded") != "1"]
    assert not not_loaded, f"images that did not render: {not_loaded}"

    artifacts = Path(os.environ.get("NODEGROUND_ARTIFACTS") or tempfile.mkdtemp(prefix="nodeground-artifacts-"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report.png"
    run = chromium(
        ["--window-size=1400,2400", "--virtual-time-budget=15000", f"--screenshot={shot}", url], tmp_path / "profile2"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 50_000
    print(f"screenshot: {shot}, first screen: {first_screen(shot, artifacts / 'report-first-screen.png')}")


def test_findings_page_renders_every_sentence_with_a_working_figure_link(built_report, tmp_path):
    res, out = built_report
    assert res.exit_code == 0, res.output
    run = chromium(
        ["--virtual-time-budget=5000", "--dump-dom", (out / "findings.html").resolve().as_uri()], tmp_path / "profile"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    findings = pd.read_csv(out / "tables" / "findings.csv")
    assert run.stdout.count("<li data-topic=") == len(findings) > 0
    for fig in set(findings["figure"]):
        assert f'href="{fig}"' in run.stdout and (out / fig.split("#")[0]).is_file(), fig


def _body_attributes(dom: str) -> dict[str, str]:
    found: dict[str, str] = {}

    class Body(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "body":
                found.update({k: v or "" for k, v in attrs})

    Body().feed(dom)
    return found


#: Run after the page's own script: click a leaderboard heading, and note the widths the page lays out at.
_PROBE = """<script>
(function(){
  var t=document.querySelector('table[id^=leaderboard-]');
  var th=Array.from(t.tHead.rows[0].cells).find(function(c){return c.textContent.trim()==='Mean rank'});
  th.click();
  var col=th.cellIndex, vals=Array.from(t.tBodies[0].rows).map(function(r){return r.cells[col].dataset.v});
  var hidden=Array.from(t.tHead.rows[0].cells).filter(function(c){return c.offsetParent===null}).length;
  var b=document.body, w=t.parentElement;
  b.setAttribute('data-sorted', vals.join(' ')); b.setAttribute('data-aria', th.getAttribute('aria-sort'));
  b.setAttribute('data-page', document.documentElement.scrollWidth+' '+window.innerWidth);
  b.setAttribute('data-table', w.scrollWidth+' '+w.clientWidth); b.setAttribute('data-hidden', hidden);
  document.querySelector('button[data-columns]').click();
  var shown=Array.from(t.tHead.rows[0].cells).filter(function(c){return c.offsetParent===null});
  b.setAttribute('data-shown', shown.length);
})();
</script></body>"""


def test_the_leaderboard_fits_1400_pixels_and_sorts_by_a_column(built_report, tmp_path):
    res, out = built_report
    assert res.exit_code == 0, res.output
    probe = out / "probe.html"  # beside index.html, so its figures resolve
    probe.write_text((out / "index.html").read_text().replace("</body>", _PROBE))
    run = chromium(
        ["--window-size=1400,1000", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()], tmp_path / "p"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    attrs = _body_attributes(run.stdout)
    page, inner = map(int, attrs["data-page"].split())
    table, frame = map(int, attrs["data-table"].split())
    assert page <= inner and table <= frame, "no horizontal scroll at 1,400 pixels"
    ranks = [float(v) for v in attrs["data-sorted"].split()]
    assert ranks == sorted(ranks) and attrs["data-aria"] == "ascending"
    assert int(attrs["data-hidden"]) > 0 and int(attrs["data-shown"]) == 0  # the button shows every column


def test_a_link_into_a_folded_section_opens_it(built_report, tmp_path):
    res, out = built_report
    assert res.exit_code == 0, res.output
    url = (out / "index.html").resolve().as_uri() + "#pareto-10-10-80"  # a regime's heading inside the section
    run = chromium(["--virtual-time-budget=5000", "--dump-dom", url], tmp_path / "profile")
    assert run.returncode == 0, run.stderr[-2000:]
    opened = re.findall(r'<details class="fold" id="([^"]+)"( open="")?', run.stdout)
    assert ("pareto", ' open=""') in opened and all(not o for i, o in opened if i != "pareto"), opened
