"""One command-line convention for every verb (render, validate, diff, new-environment, new-job, ...):

- an error is one line on stderr, `<verb>: <message>`, and never a traceback; it and every progress line are
  masked (core/credentials.mask_text);
- usage and input errors exit 2, argparse's own included; Ctrl-C, SIGTERM and SIGHUP unwind the same way (so
  temporary files and worktrees are removed) and exit 128 + the signal's number (130, 143, 129) with one line
  (cli/main.py and core/interrupts.py);
- a bug in the tools is one line too, `<verb>: internal error: ...`, exit 2, unless GITOPS_DEBUG=1
  asks for the traceback;
- a reader that goes away (`scripts/validate | head`) ends the verb quietly.

A verb's module defines `main(argv) -> int` as `run(VERB, body, argv)`; main.py dispatches to it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

from ..core.credentials import mask_text
from ..core.errors import DEBUG_VARIABLE, InputError
from ..core.escaping import one_line
from ..core.network import OFFLINE_VARIABLE

PROG = "eks-gpu-gitops"
# An install whose dependencies are gone (a --no-deps install, a pip that failed half-way).
MISSING = "eks-gpu-gitops is missing the Python package {package}: reinstall it (in a generated repository: make setup)"
USAGE_OR_INPUT = 2
INTERRUPTED = 130


def add_offline(parser: argparse.ArgumentParser) -> None:
    """--offline, for the verbs that render HelmReleases' charts."""
    parser.add_argument(
        "--offline",
        action="store_true",
        help=f"never use the network: a chart missing from the chart cache is a note ({OFFLINE_VARIABLE}=1)",
    )


def apply_offline(args: argparse.Namespace) -> None:
    if getattr(args, "offline", False):
        os.environ[OFFLINE_VARIABLE] = "1"


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (`<verb>: <message> (see --help)`, exit 2) instead of usage
    text plus message."""

    def error(self, message: str):
        raise InputError(f"{message} (see --help)")


def say(verb: str, message: str) -> None:
    """One line on stderr, whatever the message holds, its credentials masked (core/credentials.mask_text: the
    last point every error passes, whatever made it)."""
    print(f"{verb}: {one_line(mask_text(str(message)))}", file=sys.stderr, flush=True)


def progress(verb: str, quiet: bool = False) -> Callable[[str], None]:
    """A progress callback: `<verb>: <line>` on stderr, each line whole although several threads
    render at once."""
    lock = threading.Lock()

    def report(line: str) -> None:
        if not quiet:
            with lock:
                sys.stderr.write(f"{verb}: {one_line(mask_text(str(line)))}\n")
                sys.stderr.flush()

    return report


def _terminate(signum, frame):
    raise KeyboardInterrupt


def _silence_stdout() -> None:
    """The reader went away: send whatever is still buffered nowhere."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run(verb: str, body: Callable[..., int], *args) -> int:
    """body(*args), with every way out turned into the convention's exit status and one line."""
    previous = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[number] = signal.signal(number, _terminate)
        except ValueError:  # not the main thread: leave signals to it
            break
    try:
        return body(*args)
    except InputError as error:
        say(verb, str(error))
        return USAGE_OR_INPUT
    except KeyboardInterrupt:
        say(verb, "interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except ModuleNotFoundError as error:  # an install that did not finish
        say(verb, MISSING.format(package=error.name))
        return USAGE_OR_INPUT
    except Exception as error:  # a bug must not pass for findings (exit 1) nor print a traceback
        if os.environ.get(DEBUG_VARIABLE):
            raise
        say(verb, f"internal error: {type(error).__name__}: {error} (set {DEBUG_VARIABLE}=1 for the traceback)")
        return USAGE_OR_INPUT
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def exit_with(main: Callable[[list[str] | None], int]) -> None:
    """The process's end: main's status, after flushing what it printed."""
    try:
        code = main(None)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = 1
    except KeyboardInterrupt:  # between main's return and the flush
        code = INTERRUPTED
    sys.exit(code)
