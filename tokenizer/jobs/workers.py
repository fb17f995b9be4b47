"""A pool of worker processes that Ctrl-C always stops: the one way the file commands start their workers.

``multiprocessing``'s ``Pool()`` stops the workers it has already started only when an ``Exception`` interrupts
it. Ctrl-C raises ``KeyboardInterrupt``, which is not one, so a Ctrl-C while the pool is starting leaves those
workers waiting for tasks forever (and the command waiting for them at exit). :func:`worker_pool` holds Ctrl-C
back while the pool starts and lets it through once a ``with`` block owns the pool, whose exit terminates every
worker.

What this module does not do: decide what the workers run, or make them ignore Ctrl-C (their initializer does
that, so that only the parent reports it).
"""

from __future__ import annotations

import signal
from contextlib import contextmanager


@contextmanager
def worker_pool(context, processes: int, initializer=None, initargs=()):
    """``context.Pool(processes, initializer, initargs)`` as a ``with`` block that Ctrl-C cannot leave half-started.

    ``context`` is a ``multiprocessing`` context (``multiprocessing.get_context(...)``). Where the platform
    cannot block signals (Windows), this is the plain pool.
    """
    held = _hold_ctrl_c()
    try:
        pool = context.Pool(processes, initializer=initializer, initargs=initargs)
    except BaseException:
        _release_ctrl_c(held)
        raise
    with pool:
        _release_ctrl_c(held)  # a Ctrl-C pressed meanwhile is raised here, inside `with`
        yield pool


def _hold_ctrl_c():
    if hasattr(signal, "pthread_sigmask"):
        return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    return None


def _release_ctrl_c(held) -> None:
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
