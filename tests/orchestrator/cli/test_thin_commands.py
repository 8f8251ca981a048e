"""Commands stay thin over functions: no function of the CLI runs over 80 lines past its parameter list (a command's
flags may take as many lines as their help needs)."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[3] / "orchestrator" / "cli"
MAX_BODY_LINES = 80


def test_no_cli_function_body_is_over_80_lines():
    long = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
                if lines > MAX_BODY_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines; split it into named functions")
    assert not long, "\n".join(long)
