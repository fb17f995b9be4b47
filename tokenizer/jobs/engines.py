"""Where a data job's tasks run: in worker processes on this machine (``local``), or on a Ray cluster (``ray``).

A data job here is a list of independent *tasks* (encode one input shard; count the pre-tokens of one byte range
of a file), each a top-level function applied to one picklable argument. Both engines run the same functions on
the same arguments, so a job's result cannot depend on the engine, on the number of workers or on the order in
which tasks finish: callers put results back in task order themselves.

* ``local`` (the default) starts ``multiprocessing`` workers through :func:`tokenizer.jobs.workers.worker_pool` (or
  runs the tasks right here for one worker). It needs nothing beyond the standard library.
* ``ray`` submits the tasks to a Ray cluster: an existing one (``address="auto"``, or ``"ray://host:10001"``),
  or, without an address, a local one started for the job (``workers`` CPUs) and shut down after it. Ray
  retries a task whose worker process dies (up to :data:`RAY_TASK_RETRIES` times), which is safe because every
  task here writes its output atomically and computes it from its input alone. On a multi-machine cluster the
  inputs, the output folder and this package must be reachable from every machine (a shared file system and
  ``pip install`` on each node).

Progress: a task may call ``report(bytes_done)`` as it goes (bytes of *its own* input done so far). The driver
keeps the latest figure per task, so a task that is retried from the start cannot count its bytes twice, and
shows the total in one tqdm bar over the bytes of input, across the cluster.

:meth:`RayEngine.map_reduce` adds a *reduce* step: results are combined two at a time in a tree of Ray tasks,
so the driver receives one combined result, never all the partial ones at once.

Errors: ``ValueError`` and ``OSError`` raised by a task (bad input) reach the caller as the same exception with
the same message, whichever engine ran it. Ray is imported only when the ``ray`` engine is asked for; without
it, :func:`import_ray` raises an ``ImportError`` that says what to install.

What this module does not do: decide what a task computes, split work into tasks, or write any file.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence

from .workers import worker_pool

ENGINES = ("local", "ray")
RAY_TASK_RETRIES = 3  # a task whose worker process dies is started again, this many times at most
INSTALL_HINT = 'pip install "gpt2-numpy[distributed]"'
_POLL_SECONDS = 0.1  # how often the driver looks at progress while it waits for results


def import_ray():
    """The ``ray`` module, or an ``ImportError`` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"the ray engine needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


@contextmanager
def open_engine(engine: str = "local", *, address: str | None = None, workers: int | None = None):
    """``with open_engine("ray", workers=2) as e: ...``: the engine, ready to run tasks, cleaned up after.

    ``workers`` is the number of tasks run at once (default: all CPUs here, or all of the cluster's).
    ``address`` is only for ``ray``: an existing cluster to connect to (``"auto"``: the one this machine
    belongs to). A Ray session already open in this process (``ray.init`` by the caller) is used as it is
    and left open.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: pass one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if engine == "local":
        if address is not None:
            raise ValueError("address is the Ray cluster to use: pass it with engine='ray'")
        yield LocalEngine(workers or os.cpu_count() or 1)
        return
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        start_ray(address=address, num_cpus=workers)
    try:
        yield RayEngine(ray, workers)
    finally:
        if started_here:
            ray.shutdown()


def start_ray(*, address: str | None = None, num_cpus: int | None = None):
    """``ray.init`` for a data job: quiet, no dashboard; a new local cluster (``num_cpus`` CPUs) unless
    ``address`` names one. The workers of a new local cluster import this package from where it is here."""
    ray = import_ray()
    options = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    if address is not None:
        ray.init(address=address, **options)
        return ray
    # The cluster's processes inherit this environment as they start. Through it rather than a Ray
    # runtime_env, so that the workers Ray starts in advance can take the first tasks.
    package_root = str(Path(__file__).resolve().parents[1])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, saved) if p)
    try:
        ray.init(num_cpus=num_cpus, **options)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    return ray


class ProgressBar:
    """One tqdm bar over the bytes of input of every task; ``set(task, done)`` records a task's latest figure."""

    def __init__(self, sizes: Sequence[int], desc: str, enabled: bool):
        from tqdm import tqdm  # only when a job runs

        class Bar(tqdm):
            monitor_interval = 0  # no monitor thread: local workers may be forked while the bar is shown

        self.done = [0] * len(sizes)
        self.sizes = list(sizes)
        self.bar = Bar(total=round(sum(sizes) / 1e6, 2), unit="MB", desc=desc, disable=not enabled,
                       bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} MB [{elapsed}<{remaining}, {rate_fmt}]")

    def set(self, task: int, done: int) -> None:
        self.done[task] = min(done, self.sizes[task])
        self.bar.n = round(sum(self.done) / 1e6, 2)
        self.bar.refresh()

    def finish(self, task: int) -> None:
        self.set(task, self.sizes[task])

    def close(self) -> None:
        self.bar.close()


def _outcome(fn, task, report):
    """``fn(task, report)`` -> ``(True, result)``, or ``(False, exception)`` for bad input (the caller raises it)."""
    try:
        return True, fn(task, report)
    except (ValueError, OSError) as e:
        return False, e


def _unwrap(outcome):
    ok, value = outcome
    if not ok:
        raise value
    return value


# ---- local --------------------------------------------------------------------------------------------------

_progress_queue = None  # in a local worker process: where report() puts (task number, bytes done)


def _start_local_worker(progress_queue) -> None:
    global _progress_queue
    _progress_queue = progress_queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the pool


def _run_in_local_worker(args):
    fn, number, task = args
    return number, _outcome(fn, task, lambda done: _progress_queue.put((number, done)))


class LocalEngine:
    """Tasks in ``workers`` processes of this machine (here, in this process, for one worker)."""

    name = "local"

    def __init__(self, workers: int):
        self.workers = workers

    def run(self, fn: Callable, tasks: Sequence, bar: ProgressBar, *, name: str | None = None):
        """``(task number, fn(task, report))`` for every task, in the order they finish (``name`` is for Ray)."""
        workers = min(self.workers, len(tasks))
        if workers <= 1:
            for number, task in enumerate(tasks):
                result = _unwrap(_outcome(fn, task, lambda done, n=number: bar.set(n, done)))
                bar.finish(number)
                yield number, result
            return
        context = multiprocessing.get_context()
        progress = context.Queue()
        with worker_pool(context, workers, _start_local_worker, (progress,)) as pool:
            results = pool.imap_unordered(_run_in_local_worker, [(fn, n, t) for n, t in enumerate(tasks)])
            for _ in tasks:
                while True:
                    self._show(progress, bar)
                    try:
                        number, outcome = results.next(timeout=_POLL_SECONDS)
                        break
                    except multiprocessing.TimeoutError:
                        continue
                self._show(progress, bar)
                bar.finish(number)
                yield number, _unwrap(outcome)

    @staticmethod
    def _show(progress, bar: ProgressBar) -> None:
        while True:
            try:
                number, done = progress.get_nowait()
            except queue.Empty:
                return
            bar.set(number, done)


# ---- Ray ----------------------------------------------------------------------------------------------------


class _ProgressBoard:
    """A Ray actor: the latest bytes-done figure of each running task, read by the driver."""

    def __init__(self):
        self.done: dict[int, int] = {}

    def set(self, number: int, done: int) -> None:
        self.done[number] = done

    def read(self) -> dict[int, int]:
        return self.done


def _run_on_ray(fn, number, task, board):
    report = (lambda done: board.set.remote(number, done)) if board is not None else (lambda done: None)
    return _outcome(fn, task, report)


def _map_on_ray(fn, task):
    return fn(task, lambda done: None)


def _reduce_on_ray(fn, left, right):
    return fn(left, right)


class RayEngine:
    """Tasks on the Ray cluster this process is connected to, at most ``workers`` at once (default: its CPUs)."""

    name = "ray"

    def __init__(self, ray, workers: int | None):
        self.ray = ray
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.run_task = ray.remote(max_retries=RAY_TASK_RETRIES)(_run_on_ray)
        self.map_task = ray.remote(max_retries=RAY_TASK_RETRIES)(_map_on_ray)
        self.reduce_task = ray.remote(max_retries=RAY_TASK_RETRIES)(_reduce_on_ray)

    def run(self, fn: Callable, tasks: Sequence, bar: ProgressBar, *, name: str | None = None):
        """``(task number, fn(task, report))`` for every task, in the order they finish; ``name`` is the tasks'
        name in Ray (and in the title of the worker process running one)."""
        ray = self.ray
        # The board is an actor (a process): started only when someone watches the bar.
        board = ray.remote(num_cpus=0)(_ProgressBoard).remote() if not bar.bar.disable else None
        fn_ref = ray.put(fn)
        submit = self.run_task.options(name=name or getattr(fn, "__name__", "task"))
        waiting = list(enumerate(tasks))[::-1]
        running: dict = {}  # object ref -> task number
        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    number, task = waiting.pop()
                    running[submit.remote(fn_ref, number, task, board)] = number
                finished, _ = ray.wait(list(running), num_returns=1, timeout=_POLL_SECONDS)
                if board is not None:
                    for number, done in ray.get(board.read.remote()).items():
                        bar.set(number, done)
                for ref in finished:
                    number = running.pop(ref)
                    outcome = ray.get(ref)
                    bar.finish(number)
                    yield number, _unwrap(outcome)
        finally:  # an error or Ctrl-C here: the tasks still running are stopped, not left to finish unseen
            for ref in running:
                ray.cancel(ref, force=True)
            if board is not None:
                ray.kill(board)

    def map_reduce(self, map_fn: Callable, tasks: Sequence, reduce_fn: Callable, bar: ProgressBar, *,
                   name: str | None = None):
        """``reduce_fn`` over ``map_fn(task, report)`` of every task, combined two at a time in a balanced tree of
        Ray tasks as the map results arrive; only the final result comes back to this process."""
        ray = self.ray
        fn_ref, reduce_ref = ray.put(map_fn), ray.put(reduce_fn)
        submit = self.map_task.options(name=name or getattr(map_fn, "__name__", "map"))
        reduce = self.reduce_task.options(name=f"{name or 'map'}_reduce")
        maps = {submit.remote(fn_ref, task): number for number, task in enumerate(tasks)}
        # levels[k]: a result combining 2**k map results, waiting for a partner (like the digits of a binary
        # counter), so at most log2(len(tasks)) partial results wait at any time and the tree stays balanced.
        levels: list = []
        while maps:
            finished, _ = ray.wait(list(maps), num_returns=1, timeout=_POLL_SECONDS)
            for ref in finished:
                bar.finish(maps.pop(ref))
                k = 0
                while k < len(levels) and levels[k] is not None:
                    ref = reduce.remote(reduce_ref, levels[k], ref)
                    levels[k] = None
                    k += 1
                levels[k:k + 1] = [ref]
        partial = [ref for ref in levels if ref is not None]
        while len(partial) > 1:
            partial = [reduce.remote(reduce_ref, partial[0], partial[1])] + partial[2:]
        if not partial:
            return None
        try:
            return ray.get(partial[0])
        except ray.exceptions.RayTaskError as e:  # bad input: the task's own exception, as the local engine
            if isinstance(e.cause, (ValueError, OSError)):
                raise e.cause from None
            raise
