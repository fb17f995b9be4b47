"""Where a data job's tasks run: in worker processes on this machine (``local``), or on a Ray cluster (``ray``).
Every parallel job of the package runs here.

A data job is a list of independent *tasks* (encode one input shard; encode one chunk of a file; count the
pre-tokens of one byte range), each ``fn(task, report)`` for one picklable ``fn`` (a top-level function, or an
object holding what every task needs, such as an encoding) and one picklable ``task``. Three shapes:

* :meth:`run`: ``(task number, result)`` as the tasks finish (``encode-dataset``: one task per shard). Callers
  put results back in task order themselves, so a job's result cannot depend on the engine, the number of
  workers or the order in which tasks finish.
* :meth:`map_reduce`: one result, the tasks' results combined by a ``reduce`` function (``train``'s counts).
* :meth:`LocalEngine.map_ordered`: results in task order, from a lazy stream of tasks with a bounded number in
  flight (``encode-file``: the chunks of one file, written as they come back). Local only.

* ``local`` (the default) starts ``multiprocessing`` workers through :func:`tokenizer.jobs.workers.worker_pool`
  (so Ctrl-C stops every one of them), each receiving ``fn`` once as it starts, or runs the tasks right here
  for one worker. It needs nothing beyond the standard library.
* ``ray`` submits the tasks to a Ray cluster: an existing one (``address="auto"``, or ``"ray://host:10001"``),
  or, without an address, a local one started for the job (``workers`` CPUs) and shut down after it (unless
  the environment variable ``RAY_ADDRESS`` names a cluster: Ray itself then connects to that one). Ray
  retries a task whose worker process dies (up to :data:`RAY_TASK_RETRIES` times), which is safe because every
  task here writes its output atomically and computes it from its input alone. On a multi-machine cluster the
  inputs, the output folder and this package must be reachable from every machine (a shared file system and
  ``pip install`` on each node).

Progress: a task may call ``report(bytes_done)`` as it goes (bytes of *its own* input done so far). The driver
keeps the latest figure per task, so a task that is retried from the start cannot count its bytes twice, and
shows the total in one tqdm bar over the bytes of input (:class:`ProgressBar`), across the cluster.

Errors: ``ValueError`` and ``OSError`` raised by a task (bad input) reach the caller as the same exception with
the same message, whichever engine ran it. Ray is imported only when the ``ray`` engine is asked for; without
it, :func:`import_ray` raises an ``ImportError`` that says what to install. A cluster's address where nothing
answers as Ray does is a :class:`RayAddressError` (a ``ValueError``) within seconds (:func:`check_ray_address`),
not ``ray.init``'s minutes of retrying.

What this module does not do: decide what a task computes, split work into tasks, or write any file.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import signal
import socket
import sys
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..extras import install_hint
from .workers import worker_pool

ENGINES = ("local", "ray")
RAY_TASK_RETRIES = 3  # a task whose worker process dies is started again, this many times at most
INSTALL_HINT = install_hint("distributed")
_POLL_SECONDS = 0.1  # how often the driver looks at progress while it waits for results
RAY_AUTH_MODE = "RAY_AUTH_MODE"  # Ray's switch of token authentication for a cluster it starts (token, disabled)
RAY_ADDRESS = "RAY_ADDRESS"  # the environment variable Ray reads for the cluster to join, when given none or "auto"
# How long a Ray address may take to answer each step of the check before ray.init (connect, then its reply):
# ray.init itself retries an address without a cluster for minutes, deaf to Ctrl-C.
RAY_ANSWER_SECONDS = 5.0
# What an HTTP/2 client sends first (RFC 9113 3.4): the preface, then its SETTINGS frame, empty. Ray's cluster
# (and Ray Client's server) speak gRPC, over HTTP/2, so they answer with a SETTINGS frame of their own.
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_FRAME_HEADER_BYTES = 9
_HTTP2_SETTINGS = 4  # a frame's type, the fourth byte of its header


def import_ray():
    """The ``ray`` module, or an ``ImportError`` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"the ray engine needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


class RayAddressError(ValueError):
    """A Ray address where no Ray cluster answers: ``said(flag)`` is the message, the address named as ``flag``
    names it (the command line's ``--address``; the library's ``address``), or as ``RAY_ADDRESS`` when it came
    from there (``from_environment``)."""

    def __init__(self, address: str, reason: str, *, from_environment: bool = False):
        self.address, self.reason, self.from_environment = address, reason, from_environment
        super().__init__(self.said("address"))

    def said(self, flag: str) -> str:
        named, instead = (RAY_ADDRESS, f"unset {RAY_ADDRESS}") if self.from_environment else (flag, f"leave {flag} out")
        return (f"{named} {self.address}: no Ray cluster answers there ({self.reason}); start one with "
                f"`ray start --head` and pass the address it prints, or {instead} to start a local cluster for "
                "the job")


def ray_address_used(address: str | None) -> tuple[str | None, bool]:
    """The cluster ``ray.init(address=address)`` joins, as Ray reads it, and whether it comes from the environment:
    ``RAY_ADDRESS`` when ``address`` is None or ``"auto"``; None: a new local cluster."""
    from_environment = os.environ.get(RAY_ADDRESS) or None
    if address in (None, "auto") and from_environment is not None:
        return from_environment, True
    return address, False


def check_ray_address(address: str, *, timeout: float = RAY_ANSWER_SECONDS, from_environment: bool = False) -> None:
    """Raise :class:`RayAddressError` unless ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) answers as Ray
    does, within ``timeout`` seconds for each step: it accepts a connection, and replies to an HTTP/2 hello as a
    gRPC server does. ``"auto"`` is Ray's own to find, and is not checked. ``from_environment``: the address is
    ``RAY_ADDRESS``'s, and the error names it so. A cluster that speaks TLS (``RAY_USE_TLS``, as Ray reads it)
    would take a plain hello for a failed handshake: there, accepting a connection is the whole check.

    Why here: given an address with nothing behind it (or a web server), ``ray.init`` tries again and again for
    minutes, and Ctrl-C does not stop it. This check is plain sockets, so Ctrl-C stops it too.
    """
    if address == "auto":
        return

    def refused(reason: str) -> RayAddressError:
        return RayAddressError(address, reason, from_environment=from_environment)

    host, colon, port = address.removeprefix("ray://").rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # an IPv6 address is written [::1]:6379
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise refused("not HOST:PORT, e.g. 192.168.1.5:6379 or ray://192.168.1.5:10001")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as connection:
            if _ray_uses_tls():
                return
            connection.sendall(_HTTP2_HELLO)
            reply = b""
            while len(reply) < _HTTP2_FRAME_HEADER_BYTES:
                received = connection.recv(_HTTP2_FRAME_HEADER_BYTES - len(reply))
                if not received:  # closed by the other side
                    break
                reply += received
    except socket.gaierror as e:
        raise refused(f"no machine is known by the name {host}: {e.strerror}") from None
    except TimeoutError:
        raise refused(f"no answer within {timeout:g} s") from None
    except OSError as e:
        raise refused(e.strerror or str(e)) from None
    if len(reply) < _HTTP2_FRAME_HEADER_BYTES or reply[3] != _HTTP2_SETTINGS:
        raise refused("something answers, but not as Ray does (gRPC)")


def _ray_uses_tls() -> bool:
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")  # Ray's own reading of it


@contextmanager
def open_engine(engine: str = "local", *, address: str | None = None, workers: int | None = None,
                start_method: str | None = None):
    """``with open_engine("ray", workers=2) as e: ...``: the engine, ready to run tasks, cleaned up after.

    ``workers`` is the number of tasks run at once (default: all CPUs here, or all of the cluster's).
    ``address`` is only for ``ray``: an existing cluster to connect to (``"auto"``: the one this machine
    belongs to). A Ray session already open in this process (``ray.init`` by the caller) is used as it is
    and left open. ``start_method`` is only for ``local``: how its worker processes start (see
    :class:`LocalEngine`).
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: pass one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if engine == "local":
        if address is not None:
            raise ValueError("address is the Ray cluster to use: pass it with engine='ray'")
        yield LocalEngine(workers or os.cpu_count() or 1, start_method)
        return
    # (ray looked up, not imported, first: a cluster this job starts needs Ray imported by start_ray, see there)
    started_here = "ray" not in sys.modules or not import_ray().is_initialized()
    ray = start_ray(address=address, num_cpus=workers) if started_here else import_ray()
    try:
        yield RayEngine(ray, workers)
    finally:
        if started_here:
            ray.shutdown()


def start_ray(*, address: str | None = None, num_cpus: int | None = None):
    """``ray.init`` for a data job: quiet, no dashboard; a new local cluster (``num_cpus`` CPUs) unless
    ``address`` (or, as Ray reads it, ``RAY_ADDRESS``) names one, checked first (:func:`check_ray_address`). The
    workers of a new local cluster import this package from where it is here."""
    options = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    joined, from_environment = ray_address_used(address)
    if joined is not None:
        ray = import_ray()
        check_ray_address(joined, from_environment=from_environment)
        ray.init(address=joined, **options)  # (no num_cpus: an existing cluster's CPUs are its own)
        return ray
    # The cluster's processes inherit this environment as they start. Through it rather than a Ray
    # runtime_env, so that the workers Ray starts in advance can take the first tasks.
    package_root = str(Path(__file__).resolve().parents[1])
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", RAY_AUTH_MODE)}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, saved["PYTHONPATH"]) if p)
    # Token authentication, which Ray turns on for a cluster it starts, asked for by name: left to Ray's default
    # (RAY_AUTH_MODE unset), every run printed Ray's WARNING that it is on, and an error was two lines. Ray reads
    # the variable as it is imported and again in ray.init, so it is set only where Ray is not imported yet (a
    # caller's own import of ray keeps Ray's default, notice and all), and a user's own RAY_AUTH_MODE is kept.
    if "ray" not in sys.modules and saved[RAY_AUTH_MODE] is None:
        os.environ[RAY_AUTH_MODE] = "token"
    try:
        ray = import_ray()
        ray.init(num_cpus=num_cpus, **options)
    finally:
        for name, value in saved.items():  # this process's environment as it was; the cluster keeps its own
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return ray


class ProgressBar:
    """One tqdm bar over the bytes of input of every task; ``set(task, done)`` records a task's latest figure.

    The bar counts bytes, shown in the unit that suits the figure (B, kB, MB, GB: tqdm's scaling by 1000), so that
    a small input reads "12.3kB/30.0kB", not "0.0/0.0 MB". A size of None (standard input) is not known until the
    task ends: the bar then shows the bytes done, no total.
    """

    def __init__(self, sizes: Sequence[int | None], desc: str, enabled: bool):
        from tqdm import tqdm  # only when a job runs

        class Bar(tqdm):
            monitor_interval = 0  # no monitor thread: local workers may be forked while the bar is shown

        self.done = [0] * len(sizes)
        self.total = 0  # sum(self.done), kept as it changes: a job may have many thousands of tasks
        self.sizes = list(sizes)
        known = None not in self.sizes
        total = sum(self.sizes) if known else None
        shape = "{l_bar}{bar}| {n_fmt}B/{total_fmt}B [{elapsed}<{remaining}, {rate_fmt}]" if known else \
            "{desc}: {n_fmt}B [{elapsed}, {rate_fmt}]"
        self.bar = Bar(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc=desc, disable=not enabled,
                       bar_format=shape)

    def set(self, task: int, done: int) -> None:
        size = self.sizes[task]
        done = done if size is None else min(done, size)
        self.total += done - self.done[task]
        self.done[task] = done
        self.bar.update(self.total - self.bar.n)  # tqdm redraws at most every 0.1 s

    def finish(self, task: int) -> None:
        if self.sizes[task] is not None:
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

# In a local worker process: the job its tasks run (sent once, as the worker starts, not with every task: a
# trained encoding is megabytes of tables), and where report() puts (task number, bytes done).
_worker_job = None
_progress_queue = None


def _start_local_worker(job, progress_queue) -> None:
    global _worker_job, _progress_queue
    _worker_job, _progress_queue = job, progress_queue
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the pool


def _report_from_worker(number: int):
    return lambda done: _progress_queue.put((number, done))


def _run_in_local_worker(numbered):
    number, task = numbered
    return number, _outcome(_worker_job, task, _report_from_worker(number))


def _run_quietly_in_local_worker(task):
    return _outcome(_worker_job, task, _ignore)


def _map_reduce_in_local_worker(share):
    """A worker's share of a map-reduce: ``(None, its tasks' results reduced)``, or ``(task number, error)`` for
    its first task that met bad input. Its tasks after the earliest that any worker found bad are not run: the
    job fails with that one's error (or an earlier one's), and their results would be thrown away."""
    map_fn, reduce_fn, first_bad = _worker_job
    total = None
    for number, task in share:
        if number > first_bad.value:  # (a share is in task order: so are the rest of it)
            return None, total
        ok, value = _outcome(map_fn, task, _report_from_worker(number))
        if not ok:
            with first_bad.get_lock():
                first_bad.value = min(first_bad.value, number)
            return number, value
        total = value if total is None else reduce_fn(total, value)
    return None, total


class LocalEngine:
    """Tasks in ``workers`` processes of this machine (here, in this process, for one worker).

    ``start_method`` is multiprocessing's ("fork", "spawn", ...; None: the platform's default). Workers need
    only top-level functions and picklable jobs, so every start method gives the same results.
    """

    name = "local"

    def __init__(self, workers: int, start_method: str | None = None):
        self.workers = workers
        self.context = multiprocessing.get_context(start_method)
        # the most worker processes started at once so far: fewer than `workers` when there were fewer tasks
        # (0: every task ran in this process), which is what a summary of the work should say
        self.started_workers = 0

    @contextmanager
    def _pool(self, job, workers: int):
        self.started_workers = max(self.started_workers, workers)
        progress = self.context.Queue()
        with worker_pool(self.context, workers, _start_local_worker, (job, progress)) as pool:  # Ctrl-C-safe
            yield pool, progress

    def run(self, fn: Callable, tasks: Sequence, bar: ProgressBar, *, name: str | None = None):
        """``(task number, fn(task, report))`` for every task, in the order they finish (``name`` is for Ray)."""
        workers = min(self.workers, len(tasks))
        if workers <= 1:
            for number, task in enumerate(tasks):
                result = _unwrap(_outcome(fn, task, lambda done, n=number: bar.set(n, done)))
                bar.finish(number)
                yield number, result
            return
        with self._pool(fn, workers) as (pool, progress):
            results = pool.imap_unordered(_run_in_local_worker, list(enumerate(tasks)))
            for _ in tasks:
                while True:
                    _show(progress, bar)
                    try:
                        number, outcome = results.next(timeout=_POLL_SECONDS)
                        break
                    except multiprocessing.TimeoutError:
                        continue
                _show(progress, bar)
                bar.finish(number)
                yield number, _unwrap(outcome)

    def map_ordered(self, fn: Callable, tasks: Iterable, *, first_here: bool = True):
        """``fn(task, report)`` of every task, in task order, as they are computed; ``tasks`` may be a lazy
        iterator (a file read chunk by chunk): at most two tasks per worker are in flight, so memory stays
        bounded however many there are. ``report`` does nothing here: the caller knows each task's size.

        With ``first_here`` the first task is computed in this process before the workers start: forked
        workers then inherit whatever it warmed up (an encoder's piece cache that already knows the text's
        common words), instead of each one computing it again.
        """
        tasks = iter(tasks)
        if self.workers <= 1:
            for task in tasks:
                yield _unwrap(_outcome(fn, task, _ignore))
            return
        for task in itertools.islice(tasks, 1 if first_here else 0):
            yield _unwrap(_outcome(fn, task, _ignore))
        # No more processes than tasks: the next few are read first (as many as there are workers; up to twice
        # that are in flight anyway), so a short stream of unknown length (stdin) starts only the workers it needs.
        ahead = list(itertools.islice(tasks, self.workers))
        if not ahead:  # all done here: no worker is started for nothing
            return
        workers = min(self.workers, len(ahead))
        tasks = itertools.chain(ahead, tasks)
        with self._pool(fn, workers) as (pool, _):
            in_flight: deque = deque()  # oldest first: results come back in task order
            for task in tasks:
                in_flight.append(pool.apply_async(_run_quietly_in_local_worker, (task,)))
                if len(in_flight) >= 2 * workers:
                    yield _unwrap(in_flight.popleft().get())
            while in_flight:
                yield _unwrap(in_flight.popleft().get())

    def map_reduce(self, map_fn: Callable, tasks: Sequence, reduce_fn: Callable, bar: ProgressBar, *,
                   name: str | None = None, started: Callable[[], None] = lambda: None):
        """``reduce_fn`` over ``map_fn(task, report)`` of every task. The tasks are dealt round-robin to the
        workers, and each worker reduces its own results before sending one back (less to send than one result
        per task). ``started()`` is called once the workers run (a thread it starts is not forked into them).

        Bad input in several tasks: the error of the earliest task is raised, whichever failed first in time
        (a worker stops at its own first bad task, so every earlier task was run by some worker). Once a task
        has failed, no worker starts a task after it: the error comes as soon as the tasks before it are done,
        not after every worker's whole share.
        """
        workers = min(self.workers, len(tasks))
        if workers <= 1:
            started()
            total = None
            for number, task in enumerate(tasks):
                value = _unwrap(_outcome(map_fn, task, lambda done, n=number: bar.set(n, done)))
                bar.finish(number)
                total = value if total is None else reduce_fn(total, value)
            return total
        numbered = list(enumerate(tasks))
        first_bad = self.context.Value("q", len(tasks))  # the earliest task found bad so far (none: past the last)
        with self._pool((map_fn, reduce_fn, first_bad), workers) as (pool, progress):
            pending = pool.map_async(_map_reduce_in_local_worker, [numbered[w::workers] for w in range(workers)])
            started()
            while not pending.ready():
                pending.wait(_POLL_SECONDS)  # returns as soon as the results are in
                _show(progress, bar)
            outcomes = pending.get()
            _show(progress, bar)
        failures = [(number, error) for number, error in outcomes if number is not None]
        if failures:
            raise min(failures, key=lambda failure: failure[0])[1]
        total = None
        for _, value in outcomes:
            if value is not None:
                total = value if total is None else reduce_fn(total, value)
        return total


def _ignore(done: int) -> None:
    pass


def _show(progress, bar: ProgressBar) -> None:
    """Move the bar to the figures the workers have reported since it last looked."""
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
                   name: str | None = None, started: Callable[[], None] = lambda: None):
        """``reduce_fn`` over ``map_fn(task, report)`` of every task, combined two at a time in a balanced tree of
        Ray tasks as the map results arrive; only the final result comes back to this process. ``started()`` is
        called as the tasks are submitted (nothing here is forked)."""
        ray = self.ray
        started()
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
