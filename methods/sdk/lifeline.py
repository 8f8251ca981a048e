"""Exit with the launcher: a service started by a parent that may be killed must not outlive it.

A launcher that starts a service as a child sets ``NODEGROUND_PARENT_PID`` (``contract.handshake``) to its own
pid in the child's environment. ``watch_parent`` then polls the service's parent pid; once it changes (the
launcher died, even by SIGKILL, and the child was re-parented) it calls ``on_orphaned``, which by
default sends the service SIGTERM so it shuts down the way it does on ``docker stop``.
Polling is used rather than PR_SET_PDEATHSIG because that signal fires when the *thread* that
forked the child exits, and launchers start services from worker threads.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from contract.settings import PARENT_PID

POLL_SECONDS = 0.5


def _terminate_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def watch_parent(
    parent_pid: int | None = None, on_orphaned: Callable[[], None] = _terminate_self, poll_seconds: float = POLL_SECONDS
) -> threading.Thread | None:
    """Start a daemon thread that calls ``on_orphaned`` once this process's parent is gone.

    ``parent_pid`` defaults to ``$NODEGROUND_PARENT_PID`` (checked at the service's start: ``contract.settings``);
    without either, nothing is watched.
    """
    if parent_pid is None:
        value = PARENT_PID.read()
        if value is None:
            return None
        parent_pid = int(value)

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(poll_seconds):
            if os.getppid() != parent_pid:
                on_orphaned()
                return

    if os.getppid() != parent_pid:  # already orphaned (or started by someone else)
        on_orphaned()
        return None
    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
