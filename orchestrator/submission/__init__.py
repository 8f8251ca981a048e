"""A contributed image benchmarked under the protocol, and the bundle that carries its results.

``run``: the sandboxed service as a sweep's directory, a store that stamps every row as the submission's, and
``benchmark``, the whole run that ``orchestrator submit`` (``orchestrator.cli.submit``) is a thin command over.
``bundle``: the bundle format (files, checksums, verification, merging into a report).
"""
