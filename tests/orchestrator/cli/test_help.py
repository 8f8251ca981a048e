"""Every command's `--help` rewraps cleanly at 80 columns: no line ends where the next line's first word would fit.

Rich wraps greedily, so a line that could have taken the next word was broken by the source, not by the width: a
docstring's hard line break inside a paragraph (issue 52: "summary of what" / "failed and why) ..."). The check runs
over the description and over each options panel's help column.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import COMMANDS, app, load_command

WIDTH = 80
PANEL_ROW = re.compile(r"^│(.*)│$")
NAMES_INDENT = 8  # an option's names start within this many columns of the border; its help column far beyond


def _commands() -> list[list[str]]:
    """Every command line that has a help screen: each command, and each sub-command of a group."""
    found = [[]]
    for name in COMMANDS:
        found.append([name])
        found += [[name, sub] for sub in getattr(load_command(name), "commands", {})]
    return found


def _early_breaks(lines: list[str]) -> list[str]:
    """Consecutive lines of one wrapped text where the first could have taken the second's first word."""
    width = max((len(line) for line in lines), default=0)
    return [
        f"{before!r} / {after!r}"
        for before, after in zip(lines, lines[1:], strict=False)
        if before and after and not after.startswith("[") and len(before) + 1 + len(after.split()[0]) <= width
    ]


def _help_columns(panel: list[str]) -> list[list[str]]:
    """The help texts of a panel's options, each as its wrapped lines (continuation rows are blank before it)."""
    rows = [PANEL_ROW.match(line)[1].rstrip() for line in panel if PANEL_ROW.match(line)]
    indents = [len(row) - len(row.lstrip()) for row in rows if row.strip()]
    continued = [indent for indent in indents if indent > NAMES_INDENT]  # names start near the left border
    if not continued:
        return []
    start = max(set(continued), key=continued.count)  # the help column's (a long type wraps under its own column)
    texts: list[list[str]] = []
    for row in rows:
        if row[:start].strip():  # an option's first row: its names, then its help
            texts.append([row[start:].strip()])
        elif texts and row.strip():
            texts[-1].append(row[start:].strip())
    return texts


def problems(screen: str) -> list[str]:
    """The early breaks of one help screen: in its description, and in each options panel's help column."""
    lines = screen.splitlines()
    first_panel = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
    paragraphs: list[list[str]] = [[]]
    for line in lines[:first_panel]:
        if line.strip():
            paragraphs[-1].append(line.strip())
        else:
            paragraphs.append([])
    found = [b for p in paragraphs if not p or not p[0].startswith("Usage:") for b in _early_breaks(p)]
    panels, current = [], []
    for line in lines[first_panel:]:
        current.append(line)
        if line.startswith("╰"):
            panels.append(current)
            current = []
    for panel in panels:
        for text in _help_columns(panel):
            found += _early_breaks(text)
    return found


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "orchestrator")
def test_every_help_screen_rewraps_at_80_columns_without_breaks_from_the_source(command):
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= WIDTH, result.output
    assert not problems(result.output), "\n".join(problems(result.output)) + "\n\n" + result.output


def test_the_check_finds_a_hard_break_inside_a_paragraph_and_a_help_column():
    """The check can fail: `run`'s help as it was rendered before its paragraphs were unwrapped."""
    before = """
 Usage: orchestrator run [OPTIONS]

 Exits 0 when every trial of this run ended ok, oom or timeout; 1 (after a
 summary of what
 failed and why) when any ended failed, nonfinite or unavailable.

╭─ Options ────────────────────────────────────────────────────────────────────╮
│ *  --methods                      <str>        Comma-separated method names, │
│                                                e.g.                          │
│                                                mlp,gcn; all = every method.  │
│                                                [required]                    │
╰──────────────────────────────────────────────────────────────────────────────╯
"""
    assert problems(before) == [
        "'summary of what' / 'failed and why) when any ended failed, nonfinite or unavailable.'",
        "'e.g.' / 'mlp,gcn; all = every method.'",
    ]
