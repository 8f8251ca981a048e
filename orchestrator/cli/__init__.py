"""Typer command groups; `main.app` is the `orchestrator` entry point."""
