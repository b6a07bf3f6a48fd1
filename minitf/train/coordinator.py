"""``tf.train.Coordinator`` and ``LooperThread``: stopping a set of threads together.

Book sections: "Multithreaded readers using a Coordinator and a QueueRunner" and "Managing
sessions" (a Supervisor and a MonitoredSession stop their threads through one).  Pure Python:
a lock, an event, the registered threads and the first exception reported.  Any thread may ask
everyone to stop; ``join`` waits for the threads, gives them a grace period, then re-raises the
exception that caused the stop.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from minitf.framework import errors


class Coordinator:
    """Stops threads together (``request_stop``) and waits for them (``join``)."""

    def __init__(self, clean_stop_exception_types: Iterable[type] | None = None) -> None:
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads: set[threading.Thread] = set()

    def _as_exc_info(self, ex):
        if isinstance(ex, tuple):
            return ex
        info = sys.exc_info()
        if info[1] is not ex:  # TF 1.15 formats a tuple with % here and fails the same way
            raise TypeError("not all arguments converted during string formatting")
        return info

    def request_stop(self, ex: Any = None) -> None:
        """Asks every thread to stop.  ``ex`` (an exception being handled, or an exc_info
        triple) is kept, the first one only, unless it is a clean stop (OutOfRangeError)."""
        with self._lock:
            ex = self._filter(ex)
            if self._joined:
                if ex is not None:  # join has run: nobody else will raise it
                    info = self._as_exc_info(ex)
                    raise info[1].with_traceback(info[2])
            elif not self._stop_event.is_set():
                if ex is not None and self._exc_info_to_raise is None:
                    self._exc_info_to_raise = self._as_exc_info(ex)
                self._stop_event.set()

    def _filter(self, ex):
        value = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(value, self._clean_stop_exception_types):
            return None
        return ex

    def clear_stop(self) -> None:
        """Forgets a stop request and its exception (the coordinator can be used again)."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """Any exception raised in the block requests a stop (and is swallowed)."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - TF's: the coordinator keeps and re-raises it
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Waits until a stop is requested (or ``timeout`` seconds); True if it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._registered_threads.add(thread)

    def join(
        self,
        threads: Iterable[threading.Thread] | None = None,
        stop_grace_period_secs: float = 120,
        ignore_live_threads: bool = False,
    ) -> None:
        """Waits until the threads end or a stop is requested, then up to
        ``stop_grace_period_secs`` more for them to end; re-raises the exception that caused
        the stop, else a RuntimeError naming threads still running (unless ignored)."""
        with self._lock:
            threads = set(threads or ()) | self._registered_threads
        while not self.should_stop():  # until they end or a stop is requested
            alive = [t for t in threads if t.is_alive()]
            if not alive:
                break
            alive[0].join(0.05)
        delay, waited = 0.001, 0.0
        while any(t.is_alive() for t in threads) and waited < stop_grace_period_secs:
            for t in threads:  # a join with a timeout: no sleep standing in for the condition
                t.join(delay)
            waited += delay
            delay = min(2 * delay, max(stop_grace_period_secs - waited, 0.001))
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            info = self._exc_info_to_raise
        if info is not None:
            raise info[1].with_traceback(info[2])
        if stragglers and not ignore_live_threads:
            raise RuntimeError(
                "Coordinator stopped with threads still running: %s" % " ".join(stragglers)
            )

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Re-raises the exception that caused the stop, if any."""
        with self._lock:
            info = self._exc_info_to_raise
        if info is not None:
            raise info[1].with_traceback(info[2])


class LooperThread(threading.Thread):
    """A daemon thread that calls ``target`` every ``timer_interval_secs`` (first at once)
    until ``coord`` stops; registered with ``coord``.  ``timer_interval_secs=None``: calls
    ``run_loop`` back to back instead."""

    def __init__(
        self,
        coord: Coordinator,
        timer_interval_secs: float | None,
        target: Any = None,
        args: Any = None,
        kwargs: Any = None,
    ) -> None:
        if not isinstance(coord, Coordinator):
            raise ValueError("'coord' argument must be a Coordinator: %s" % coord)
        super().__init__()
        self.daemon = True
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        self._args = args or ()
        self._kwargs = kwargs or {}
        self._coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None) -> LooperThread:
        """Starts a LooperThread calling ``target`` and returns it."""
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self) -> None:
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.monotonic()
                while not self._coord.wait_for_stop(max(next_time - time.monotonic(), 0)):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self) -> None:
        """Called once, before the loop."""

    def stop_loop(self) -> None:
        """Called once, after the loop."""

    def run_loop(self) -> None:
        if self._target:
            self._target(*self._args, **self._kwargs)
