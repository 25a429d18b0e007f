"""Ctrl-C, SIGTERM and SIGHUP, and what a run leaves behind when one comes: nothing.

The command's entry point (cli/main.py) calls `install()` before it imports anything heavy, and ends every run
with `settle()` and `first_signal()`, so an interrupt at any moment (an import, a build, the clean-up at the
end) ends the run with one line and 128 + the signal's number:

- every signal is recorded, whichever handler takes it (a verb's own, conventions.py's, a generator's): the C
  part of Python's signal handling writes each one's number to a pipe (signal.set_wakeup_fd), so an interrupt a
  handler swallows, or one that comes while the interpreter runs no Python code, is never lost;
- the first signal raises KeyboardInterrupt in the main thread (at once, or when the `shielded()` section it
  came in ends); later ones do not, as the run is unwinding already: a second Ctrl-C never cuts a clean-up
  short;
- the child processes given to `add_process` (the helper's) are killed as soon as a signal comes (by the handler,
  or a thread of this module when another handler takes it), so no thread waits on a build after it; `check()`
  refuses new work after one;
- the temporary paths made with `temporary_folder` (or given to `track`) are removed by their owner as usual,
  and whatever an interrupt or a crash left is removed by `settle()` at the end (and at exit, for the tool
  used as a library).

Nothing here imports more than the standard library: it is loaded before anything else.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import threading
import time

# Only what the first lines of a run need is imported here: until `install()` runs, a Ctrl-C is Python's own.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_lock = threading.RLock()  # _received, _processes, _paths (a handler may run while its own thread holds it)
_received: list[int] = []  # every signal recorded, first first
_processes: list = []  # subprocess.Popen objects to kill when a signal comes
_paths: dict[int, Path | Callable[[], None]] = {}  # what settle() removes or runs, by token
_tokens = iter(range(1, 1 << 62))
_wakeup: tuple[int, int] | None = None  # (read, write) ends of the pipe the signals are written to
_state = {"depth": 0, "deferred": False, "told": False, "quiet": False}  # the main thread's


def install() -> None:
    """Record every signal, and turn the first into KeyboardInterrupt (once per process, in the main thread)."""
    global _wakeup
    if _wakeup is not None or threading.current_thread() is not threading.main_thread():
        return
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _wakeup = (read, write)
    for number in SIGNALS:
        signal.signal(number, _on_signal)
    threading.Thread(target=_watch, name="interrupts", daemon=True).start()


def _on_signal(signum, frame) -> None:
    _drain()
    if _state["told"] or _state["quiet"]:
        return
    if _state["depth"]:
        _state["deferred"] = True  # raised when the shielded section ends
        return
    _state["told"] = True
    raise KeyboardInterrupt


def _drain() -> int | None:
    """Record the signals written to the pipe since the last call, killing the registered processes when there
    is one (whichever thread reads the pipe first does); the first signal of the run, or None."""
    with _lock:
        arrived = False
        while _wakeup is not None:
            try:
                data = os.read(_wakeup[0], 512)
            except OSError:  # BlockingIOError: nothing more
                break
            if not data:
                break
            numbers = [number for number in data if number in SIGNALS]
            _received.extend(numbers)
            arrived = arrived or bool(numbers)
        if arrived:
            stop_processes()
        return _received[0] if _received else None


def _watch() -> None:
    """Kill the registered child processes as soon as a signal comes, whoever's handler takes it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # the signals go to the main thread, never here
    read = _wakeup[0] if _wakeup is not None else -1
    while True:
        try:
            select.select([read], [], [])
        except (OSError, ValueError):
            return
        _drain()  # a process registered later is killed by add_process


def signalled() -> int | None:
    """The number of the first signal the run received, or None."""
    return _drain()


def check() -> None:
    """KeyboardInterrupt when the run was interrupted: no new work (a helper started, a build sent) after it."""
    if _drain() is not None:
        raise KeyboardInterrupt


def quiet() -> None:
    """From now on a signal is recorded only, never raised: the run is ending."""
    _state["quiet"] = True


class shielded:  # a function to its callers: `with interrupts.shielded():`
    """Hold a signal back (in the main thread) until the block ends, whichever handler was set: a clean-up, a
    rename that must happen with its pair, a path made and registered. The first signal of a run that came
    inside is raised as KeyboardInterrupt when the outermost block ends; in other threads (which Python never
    interrupts) this does nothing."""

    def __enter__(self) -> None:
        self.previous = {}
        self.main = threading.current_thread() is threading.main_thread()
        if not self.main:
            return
        # The handlers first, then the count: a signal in between raises before the block (or is this module's
        # to hold), and the count is never left raised by a block that was not entered.
        if _wakeup is not None:
            for number in SIGNALS:
                self.previous[number] = signal.signal(number, _on_signal)
        _state["depth"] += 1

    def __exit__(self, *exc) -> None:
        if not self.main:
            return
        _state["depth"] -= 1  # the count first: a signal while the handlers are put back finds it right
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        if not _state["depth"] and _state["deferred"]:
            _state["deferred"] = False
            if not (_state["told"] or _state["quiet"]):
                _state["told"] = True
                raise KeyboardInterrupt  # a signal held back during the block: delivered now


# --- temporary paths ---------------------------------------------------------------------------------------


def temporary_folder(prefix: str, dir: str | Path | None = None) -> Path:
    """A new folder (tempfile.mkdtemp), registered for removal before an interrupt can come between the two.
    None after an interrupt, in any thread (KeyboardInterrupt): a thread still at work as the run ends (diff
    renders a failed side again, one environment at a time) makes no copy the clean-up could miss."""
    import tempfile
    from pathlib import Path

    check()
    with shielded():
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=dir))
        track(path)
    return path


def track(what: Path | Callable[[], None]) -> int:
    """Register a path to remove (or a callable that cleans up) on any way out; the token `forget` takes."""
    with _lock:
        token = next(_tokens)
        _paths[token] = what
    return token


def forget(token: int) -> None:
    with _lock:
        _paths.pop(token, None)


def remove(path: Path) -> None:
    """Remove a path made with `temporary_folder` (or tracked), with signals held back; it stays registered
    while any of it is left."""
    with shielded():
        _remove(path)
        if not os.path.lexists(path):
            with _lock:
                for token in [t for t, p in _paths.items() if p == path]:
                    del _paths[token]


def _remove(path: Path) -> None:
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        os.unlink(path)
    except OSError:
        return


def run_clean_up(token: int) -> None:
    """Run the callable registered under `token` now, with signals held back, and forget it."""
    with shielded():
        with _lock:
            what = _paths.get(token)
        if callable(what):
            what()
        forget(token)


def remove_all() -> None:
    """Remove every registered path and run every registered clean-up, the latest first."""
    with shielded():
        with _lock:
            entries = list(_paths.items())
        for token, what in reversed(entries):
            try:
                if callable(what):
                    what()
                else:
                    _remove(what)
            except Exception:  # one that fails does not keep the others from running
                pass
            forget(token)


atexit.register(remove_all)


# --- child processes ---------------------------------------------------------------------------------------


def add_process(process) -> None:
    """Kill `process` (a subprocess.Popen) when a signal comes; at once when one came already."""
    with _lock:
        _processes.append(process)
        if _drain() is not None:
            stop_processes()


def discard_process(process) -> None:
    with _lock:
        if process in _processes:
            _processes.remove(process)


def stop_processes() -> None:
    """Kill every registered process that still runs (its owner reaps it)."""
    with _lock:
        processes = list(_processes)
    for process in processes:
        if process.returncode is None:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except OSError:  # ended and reaped meanwhile
                continue


# --- the end of a run --------------------------------------------------------------------------------------


def settle(wait: float = 10.0) -> None:
    """The clean-up at the end of a run, never cut short by a signal (each one is recorded): after an
    interrupt, the registered processes are killed and the other threads given up to `wait` seconds to end
    (a build in flight fails fast once its helper is gone); then the exit functions run (the helper pools close,
    libraries remove their files) and every registered path is removed."""
    quiet()
    with shielded():
        if _drain() is not None:
            stop_processes()
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:  # again and again: a thread may start others before it ends
                others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
                if not others:
                    break
                others[0].join(max(0.0, deadline - time.monotonic()))
        atexit._run_exitfuncs()  # what interpreter shutdown would run (each one's error is printed, as then)
        remove_all()


def first_signal() -> int | None:
    """The first signal of the run, for its exit status, once and for all: the signals are blocked from here on
    (one that comes now dies with the process), and one that came just before is still counted."""
    quiet()
    if threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    first = _drain()
    if first is None:
        pending = [number for number in SIGNALS if number in signal.sigpending()]
        first = pending[0] if pending else None
    return first
