"""Where per-trace work runs: in this process, in local worker processes, or on a Dask cluster.

:func:`map_items` applies one function to every item of a list (trace paths, for ``overlap-report``, ``diff`` and
``export``) and returns the results in the items' order. The function must be importable by name (a module-level
function): it is sent to the workers by reference, never by value.

Three ways to run, chosen by the caller:

- ``jobs == 1`` (or a single item, unless work runs ``beside``): in this process, one item after another.
- ``jobs > 1``: ``jobs`` local worker processes, forked from this one, each
  taking the next item as it finishes the last; a worker ends when this process
  dies, however it dies (:func:`die_with_parent`). While items remain for every
  worker, each holds one more in its pipe, so that it starts the next item at
  once instead of waiting for this process to take its result (about 1.7 ms per
  item on 2 CPUs, measured). A worker that dies while on an
  item (killed by the OOM killer, a segfault in a C extension, ``os._exit``) takes
  only that item with it (the one queued behind it goes back to the queue,
  uncounted): the item is run once more in a fresh worker; if that
  worker dies too, the item's result is ``on_crash(item, reason)`` (a per-file
  failure) and the other items go on. (``concurrent.futures.ProcessPoolExecutor``
  cannot do this: one dead worker breaks the whole pool and every pending item
  with it, ``BrokenProcessPool``.) The retry runs in a worker process, not in
  this one, so a file that kills every process it is read in cannot take the
  whole command down with it.
- ``scheduler`` given: the items are submitted to the Dask distributed cluster at
  that address (``dask.distributed.Client(scheduler)``), which runs ``fn`` on its
  workers, where the paths are opened (local paths must therefore be visible to
  the workers, on a shared filesystem; fsspec URLs such as ``s3://`` are read by
  each worker directly). Only ``fn``'s results travel back. A task whose workers
  keep dying is given up by the scheduler after its ``allowed-failures`` retries
  (Dask's ``KilledWorker``); that item's result is ``on_crash(item, reason)``.
  Dask is imported only on this path.

Exceptions raised by ``fn`` itself (not a dead process) propagate to the caller in every mode: ``fn`` is expected to
turn expected errors into results. One raised in a local worker carries the worker's traceback as a note
(``__notes__``), which Python prints with the parent's traceback (``--debug``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar

from ..reading.forked import die_with_parent
from .processes import default_jobs

T = TypeVar("T")
R = TypeVar("R")

MAX_CRASHES = 2
"""Worker deaths on one item before it becomes ``on_crash(item, reason)``: one retry."""
QUEUED = 2
"""Items a local worker holds at most: the one it is on and the next (while items remain for every worker)."""

def map_items(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    on_crash: Callable[[T, str], R],
    jobs: int | None = None,
    scheduler: str | None = None,
    on_done: Callable[[R], None] | None = None,
    on_index: Callable[[int, R], None] | None = None,
    beside: Callable[[], None] | None = None,
) -> list[R]:
    """``[fn(x) for x in items]``, run as the module docstring says.

    Args:
        fn: a module-level function (sent to workers by name).
        items: its inputs (picklable; small: paths, not data).
        on_crash: builds the result of an item whose worker processes died
            (``reason`` is one line, e.g. ``"worker process died twice (killed by
            SIGKILL: out of memory?)"``). Runs in this process.
        jobs: local worker processes (default: CPU count, at most one per item;
            1 runs here). Ignored with ``scheduler``.
        scheduler: address of a Dask distributed scheduler (``tcp://host:8786``),
            or None for local execution.
        on_done: called in this process with each result as it arrives (for
            progress bars), in completion order.
        on_index: called in this process with each item's index and result as it arrives, in completion order
            (after ``on_done``): for work on the results of a group of items as soon as all of them are in.
        beside: run in a thread of this process while local workers run the items (started once they are forked,
            and waited for before a dead worker's replacement is forked and before this returns: no fork while it
            runs); with it, even one item goes to a worker process, unless ``jobs`` is 1. Ignored with ``scheduler``
            or ``jobs`` 1.

    Returns:
        the results, in the order of ``items``.

    Raises:
        ImportError: ``scheduler`` given but ``distributed`` is not installed.
        OSError: the scheduler cannot be reached (Dask's own errors otherwise).
        Exception: whatever ``fn`` raised, re-raised here.
    """
    if not items:
        return []
    counted = on_index
    if scheduler:
        return _on_dask(fn, items, scheduler, on_crash, on_done, counted)
    n = default_jobs(len(items), jobs)
    if n == 1 and (beside is None or jobs == 1):
        out = []
        for i, x in enumerate(items):
            r = fn(x)
            if on_done:
                on_done(r)
            if counted:
                counted(i, r)
            out.append(r)
        return out
    return _on_local_workers(fn, items, n, on_crash, on_done, counted, beside if jobs != 1 else None)


# --- local worker processes ----------------------------------------------------------------



def _serve(conn: Connection, fn: Callable[[Any], Any], parent: int) -> None:
    """Worker loop: receive ``(item,)``, send ``("ok", fn(item))`` or ``("raise", exception)``; stop on ``None`` or EOF,
    or when the parent process dies."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops the workers
    while True:
        try:
            job = conn.recv()
        except (EOFError, KeyboardInterrupt):  # (KeyboardInterrupt: the parent's SIGTERM as the command line's handler
            return  # raises it, stopping its workers when another's item raised: nothing waits for this one)
        if job is None:
            return
        (item,) = job
        stop = False
        try:
            msg: tuple[str, Any] = ("ok", fn(item))
        except SystemExit:  # (SIGTERM in a worker, unwound: it ends quietly, cli.terminate)
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the parent, which re-raises it
            _note_traceback(exc)
            msg = ("raise", exc)
            stop = isinstance(exc, KeyboardInterrupt)  # (SIGTERM, unwound: start none of the items queued behind it)
        try:
            conn.send(msg)
        except KeyboardInterrupt:  # (SIGTERM while sending: the parent stopped reading, as above; no traceback printed)
            return
        except Exception as exc:  # an unpicklable result or exception, or a parent gone
            try:
                conn.send(("raise", RuntimeError(f"{type(exc).__name__}: {exc}")))
            except OSError:
                return
        if stop:
            return


def _note_traceback(exc: BaseException) -> None:
    """Keep the worker's traceback with ``exc`` as a note (``__notes__`` travel with a pickled exception; the
    traceback does not), so that ``--debug`` shows where in the worker it was raised, as Python prints notes."""
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    note = f"raised in worker process {os.getpid()}:\n{text.rstrip()}"
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(note)
    else:  # pragma: no cover - Python 3.10
        setattr(exc, "__notes__", [*getattr(exc, "__notes__", []), note])  # noqa: B010


@dataclass
class _Worker(Generic[T]):
    process: Any  # multiprocessing.Process (fork context)
    conn: Connection
    queue: deque[int] = field(default_factory=deque)  # the items sent to it, in order: it is on the first


def _start(fn: Callable[[Any], Any]) -> _Worker[Any]:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, fn, os.getpid()), daemon=True)
    proc.start()
    child.close()  # so that the parent sees EOF when the worker dies
    return _Worker(proc, parent)


def _death(proc: Any) -> str:
    proc.join(timeout=5)
    return exit_reason(proc.exitcode)


def exit_reason(code: int | None) -> str:
    """How a process ended, from its exit code as ``multiprocessing`` and ``os.waitstatus_to_exitcode``
    give it (negative: killed by that signal): ``killed by SIGKILL: out of memory?``, ``exit code 70``."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (": out of memory?" if -code == signal.SIGKILL else "")
    return f"exit code {code}"


def forget_process(pid: int) -> None:
    """Give back what a dead worker held of the command's shared memory limit (:mod:`traceprobe.reading.files`)."""
    from ..reading.files import forget_process as forget

    forget(pid)


def _on_local_workers(
    fn: Callable[[T], R], items: Sequence[T], n: int, on_crash: Callable[[T, str], R], on_done: Callable[[R], None] | None,
    on_index: Callable[[int, R], None] | None = None, beside: Callable[[], None] | None = None,
) -> list[R]:
    results: list[Any] = [None] * len(items)
    pending = deque(range(len(items)))
    crashes = [0] * len(items)
    left = len(items)
    workers = [_start(fn) for _ in range(n)]
    thread = threading.Thread(target=beside, daemon=True) if beside is not None else None
    if thread is not None:
        thread.start()
    try:
        while left:
            for w in workers:
                # a second item only while every worker can still get one: no worker idles at the end behind a queue
                while pending and (not w.queue or (len(w.queue) < QUEUED and len(pending) >= n)):
                    w.queue.append(pending.popleft())
                    try:
                        w.conn.send((items[w.queue[-1]],))
                    except OSError:  # it died meanwhile: its end of the pipe reads EOF next, and its queue goes back
                        break
            busy = [w for w in workers if w.queue]
            ready = set(wait([w.conn for w in busy]))
            for k, w in enumerate(workers):
                if not w.queue or w.conn not in ready:
                    continue
                i = w.queue.popleft()
                try:
                    status, value = w.conn.recv()
                except (EOFError, ConnectionResetError):  # the worker died on items[i] (reset: with an item unread
                    # in its socket); the items queued behind it were not started
                    crashes[i] += 1
                    why = _death(w.process)
                    forget_process(w.process.pid)  # (what it held of the command's memory limit is free again)
                    w.conn.close()
                    if thread is not None:  # (a fork while another thread runs may copy a lock it holds)
                        thread.join()
                    workers[k] = _start(fn)
                    pending.extendleft(reversed(w.queue))
                    if crashes[i] < MAX_CRASHES:
                        pending.appendleft(i)
                        continue
                    times = "once" if crashes[i] == 1 else "twice" if crashes[i] == 2 else f"{crashes[i]} times"
                    value = on_crash(items[i], f"worker process died {times} while analysing it ({why})")
                else:
                    if status == "raise":
                        raise value
                results[i] = value
                left -= 1
                if on_done:
                    on_done(value)
                if on_index:
                    on_index(i, value)
        if thread is not None:  # (its work is for after the items: the caller's next fork finds no thread running)
            thread.join()
    finally:
        for w in workers:
            try:
                w.conn.send(None)
            except OSError:
                pass
            w.conn.close()
        for w in workers:  # (a worker still busy, the command interrupted: SIGTERM first, so that its writes unwind and
            if w.queue and w.process.is_alive():  # remove their temporary files, as the command line's handler makes them)
                w.process.terminate()
        for w in workers:
            w.process.join(timeout=1 if not w.queue else 5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
    return results


# --- Dask distributed ------------------------------------------------------------------------


def _on_dask(
    fn: Callable[[T], R], items: Sequence[T], address: str, on_crash: Callable[[T, str], R], on_done: Callable[[R], None] | None,
    on_index: Callable[[int, R], None] | None = None,
) -> list[R]:
    try:
        from distributed import Client, KilledWorker, as_completed
    except ImportError:
        raise RuntimeError("--scheduler needs Dask, which is not installed: pip install 'traceprobe[scheduler]'") from None

    results: list[Any] = [None] * len(items)
    with Client(address) as client:
        futures = client.map(fn, list(items), pure=False)
        where = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures):
            i = where[fut.key]
            try:
                value = fut.result()
            except KilledWorker as exc:
                value = on_crash(items[i], f"Dask workers died while analysing it ({exc})")
            results[i] = value
            if on_done:
                on_done(value)
            if on_index:
                on_index(i, value)
    return results
