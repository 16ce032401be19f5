"""A few threads that compute constrained sequences' next-token masks, off the engine's step.

A mask can take seconds: some regexes (``(.*){1,32002}[bc]``) cost xgrammar seconds per token, more
with each token. Computed in the step, such a mask held every other request's token for as long.
xgrammar releases the GIL while it fills a mask (a Python thread kept counting beside a 16 s fill),
so a thread here runs it beside the step, and the sequence waits for it without holding the others:
the scheduler passes over a sequence whose mask is not ready (see ``GrammarState.mask_ready``).
"""
from __future__ import annotations

import atexit
import concurrent.futures
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

Result = TypeVar("Result")

# Enough that one slow grammar leaves others' masks flowing; few, as each may keep a core busy.
MASK_THREADS = 4
# How long a step waits, once per job, for the masks submitted since the step before: a usual mask takes
# well under a millisecond, but its thread must first get a core and the GIL, which on a loaded machine
# takes longer, so without this wait a constrained sequence would often miss the step after its token.
# At least the floor, else this share of the last step's own time: a slow mask costs the others that
# much once, not its whole time.
FRESH_MASK_WAIT_FLOOR_S = 0.01
FRESH_MASK_WAIT_STEP_SHARE = 0.5


class MaskWorkers:
    """Runs mask jobs in submission order on up to ``num_threads`` daemon threads, started on the first job.
    A job cancelled before it starts never runs; one running when its request ends (xgrammar's fill cannot
    be interrupted) runs to its end, unread, and is waited for only at the interpreter's exit (see
    ``_end_running_jobs``).
    """

    def __init__(self, num_threads: int = MASK_THREADS) -> None:
        self.num_threads = num_threads
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[[], object]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._job_done = threading.Condition(self._lock)
        self._listeners: list[Callable[[], None]] = []
        self.num_done = 0  # jobs that ran to their end (a result or an error); read to notice a new mask
        self._fresh: list[Future] = []  # submitted since the last wait_for_fresh; engine thread only
        _EVERY_POOL.add(self)

    def submit(self, job: Callable[[], Result]) -> Future[Result]:
        """Queue ``job``; its future holds what it returns or raises, or is cancelled before it starts."""
        future: Future[Result] = Future()
        with self._lock:
            if len(self._threads) < self.num_threads:
                thread = threading.Thread(target=self._work, name=f"grammar-mask-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        self._jobs.put((future, job))
        self._fresh.append(future)
        return future

    def wait_for_fresh(self, last_step_s: float) -> None:
        """Give the jobs submitted since the last call a while together to end (see FRESH_MASK_WAIT_STEP_SHARE);
        from the thread that submits, before it schedules a step that took ``last_step_s`` the time before."""
        if self._fresh:
            concurrent.futures.wait(self._fresh, max(FRESH_MASK_WAIT_FLOOR_S, FRESH_MASK_WAIT_STEP_SHARE * last_step_s))
            self._fresh = []

    def wait_past(self, num_done: int) -> None:
        """Sleep until more than ``num_done`` jobs have ended (at once if they already have)."""
        with self._job_done:
            self._job_done.wait_for(lambda: self.num_done > num_done)

    def add_done_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on a worker thread) after each job ends: a sequence may have become schedulable."""
        with self._lock:
            self._listeners.append(listener)

    def close(self, wait: bool = False) -> None:
        """Cancel the jobs not yet started and let the threads leave after the ones running; ``wait``: until they have."""
        with self._lock:
            threads, self._threads = self._threads, []
        while True:
            try:
                entry = self._jobs.get_nowait()
            except queue.Empty:
                break
            if entry is not None:
                entry[0].cancel()
        for _ in threads:
            self._jobs.put(None)
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while (entry := self._jobs.get()) is not None:
            future, job = entry
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as error:  # handed to whoever reads the mask
                future.set_exception(error)
            with self._lock:
                self.num_done += 1
                self._job_done.notify_all()
                listeners = list(self._listeners)
            for listener in listeners:
                listener()


_EVERY_POOL: weakref.WeakSet[MaskWorkers] = weakref.WeakSet()


@atexit.register
def _end_running_jobs() -> None:
    """Python 3.11 ends a daemon thread that comes back from native code once the interpreter is finalizing,
    which inside xgrammar's C++ aborts the process ("terminate called without an active exception"). So at
    exit the jobs still running are waited for, and the queued ones dropped."""
    for workers in list(_EVERY_POOL):
        workers.close(wait=True)
