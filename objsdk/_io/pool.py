"""``PartPool``: the one thread pool that runs the parts of a transfer.

Socket reads and writes release the GIL, so a few threads keep several requests in
flight. Every use (read-ahead, downloads, uploads, the writer) gets the same guarantees:

* bounded: :meth:`PartPool.run` takes the next item only when one of ``level``
  slots is free, so a caller that hands out one part buffer per item holds at most
  ``level`` buffers (bytes in flight = ``level`` x part size);
* cancel on first error: the first failure stops the rest; parts not started never
  start, running ones are interrupted (their connections shut down, even mid-stall);
* no thread left behind: nothing returns or raises before every worker has finished;
* safe under ``KeyboardInterrupt``: an exception in the caller's thread while it waits
  cancels and joins exactly like a part failure.

It lives with the readers (``_io``) because read-ahead needs it; transfers build on it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Generic, TypeVar

from objsdk import errors
from objsdk._io.shared_level import SharedLevel
from objsdk._transport.base import Interruptible

__all__ = ["PartPool", "Task"]

I = TypeVar("I")  # noqa: E741 - an item
R = TypeVar("R")

WatchFactory = Callable[[], AbstractContextManager[Interruptible]]


class Task(Generic[R]):
    """One submitted call: its future, and a handle to interrupt it while it runs."""

    def __init__(self) -> None:
        self.future: Future[R] = Future()
        self.cancel = threading.Event()
        self._inner: Future[R] | None = None
        self._lock = threading.Lock()
        self._running: Interruptible | None = None

    def interrupt(self) -> None:
        """Stop it: never start it, or cut its current request short."""
        self.cancel.set()
        if self._inner is not None:
            self._inner.cancel()  # not started yet: it never will be
        with self._lock:
            running = self._running
        if running is not None:
            with contextlib.suppress(Exception):
                running.interrupt()

    def _attach(self, w: Interruptible | None) -> None:
        with self._lock:
            self._running = w


class PartPool:
    """Up to ``workers`` threads named ``objsdk-<name>``; use as a context manager.

    ``watch`` (the transport's) runs each task's requests under a watch, so that
    :meth:`cancel` and :meth:`Task.interrupt` can shut a stalled connection down.
    """

    def __init__(self, workers: int, *, name: str, watch: WatchFactory | None = None) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise errors.InvalidArgument(f"workers must be a positive int, got {workers!r}")
        self.workers = workers
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix=f"objsdk-{name}")
        self._watch = watch
        self.cancelled = threading.Event()
        self._lock = threading.Lock()
        self._tasks: set[Task[Any]] = set()

    def submit(self, fn: Callable[..., R], *args: object) -> Task[R]:
        """Run ``fn(*args)`` on a worker; it can see ``task.cancel`` via its arguments."""
        task: Task[R] = Task()
        with self._lock:
            self._tasks.add(task)

        def run() -> R:
            try:
                if task.cancel.is_set() or self.cancelled.is_set():
                    raise errors.Cancelled("transfer cancelled before this part started")
                if self._watch is None:
                    return fn(*args)
                with self._watch() as w:
                    task._attach(w)
                    try:
                        if task.cancel.is_set() or self.cancelled.is_set():
                            raise errors.Cancelled("transfer cancelled")
                        return fn(*args)
                    finally:
                        task._attach(None)
            finally:
                with self._lock:
                    self._tasks.discard(task)

        inner = self._executor.submit(run)
        task._inner = inner
        _chain(inner, task.future)
        return task

    def cancel(self) -> None:
        """Stop everything: tasks not started never start, running ones are interrupted."""
        self.cancelled.set()
        with self._lock:
            tasks = list(self._tasks)
        for task in tasks:
            task.interrupt()

    def run(
        self,
        items: Iterable[I],
        fn: Callable[[I], R],
        *,
        level: int | SharedLevel | None = None,
        on_done: Callable[[I, R], None] | None = None,
        on_release: Callable[[I], None] | None = None,
        prefer: tuple[type[BaseException], ...] = (),
    ) -> None:
        """Run ``fn(item)`` for every item, at most ``level`` (default: workers) at
        once, pulling the next item from ``items`` only when a slot is free. With a
        :class:`SharedLevel`, the level is followed as it changes (capped at
        ``workers``): a raised level starts its parts at once, not when a part ends.

        ``on_done(item, result)`` runs in the caller's thread as each finishes;
        ``on_release(item)`` runs for every item taken once its task is over, whatever
        happened (to recycle its buffer). The first failure cancels the rest and is
        raised once all tasks have ended; a failure of a type in ``prefer`` wins over
        others (it tells the caller something it must act on).
        """

        shared = level if isinstance(level, SharedLevel) else None
        fixed = level if isinstance(level, int) else self.workers

        def limit() -> int:
            want = shared.current() if shared is not None else (fixed or self.workers)
            return max(1, min(want, self.workers))

        it = iter(items)
        running: dict[Future[R], tuple[I, Task[R]]] = {}
        failures: list[BaseException] = []
        more = True
        try:
            while True:
                while more and len(running) < limit() and not failures:
                    try:
                        item = next(it)
                    except StopIteration:
                        more = False
                        break
                    task = self.submit(fn, item)
                    running[task.future] = (item, task)
                if not running:
                    break
                waiting: set[Future[Any]] = set(running)
                changed = shared.changed() if shared is not None else None
                if changed is not None:
                    waiting.add(changed)
                finished, _ = wait(waiting, return_when=FIRST_COMPLETED)
                for fut in finished:
                    if fut is changed:
                        continue
                    item, _task = running.pop(fut)
                    try:
                        exc = fut.exception()
                        if exc is not None:
                            failures.append(exc)
                            self.cancel()
                        elif on_done is not None and not failures:
                            on_done(item, fut.result())
                    finally:
                        if on_release is not None:
                            on_release(item)
        except BaseException as e:
            failures.append(e)
            self.cancel()
            raise
        finally:
            if running:
                wait(running)
                for item, _task in running.values():
                    if on_release is not None:
                        with contextlib.suppress(Exception):
                            on_release(item)
        if failures:
            raise _first(failures, prefer)

    def close(self) -> None:
        """Drop tasks not started and join every thread."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> PartPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.cancel()
        self.close()


def _first(failures: list[BaseException], prefer: tuple[type[BaseException], ...]) -> BaseException:
    """The failure to report: a preferred one, else the first that is not merely the
    cancellation it caused in other parts."""
    for e in failures:
        if prefer and isinstance(e, prefer):
            return e
    for e in failures:
        if not isinstance(e, errors.Cancelled):
            return e
    return failures[0]


def _chain(inner: Future[R], outer: Future[R]) -> None:
    def copy(f: Future[R]) -> None:
        if f.cancelled():
            outer.set_exception(errors.Cancelled("transfer cancelled before this part started"))
        elif (exc := f.exception()) is not None:
            outer.set_exception(exc)
        else:
            outer.set_result(f.result())

    inner.add_done_callback(copy)
