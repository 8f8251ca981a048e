"""Benchmarks that print numbers (`make bench`); never run as unit tests."""
