"""`eks-gpu-gitops VERB [ARGS]` (or `python -m eks_gpu_gitops VERB [ARGS]`): one command, a verb per job.

A generated repository's scripts/VERB runs it from the repository's .venv. Importing a verb is the first thing
that needs the tool's dependencies, so a missing one is reported here in one line, like every
error (conventions.py).

Every run ends here, in one of three ways: the verb's status; one line and exit 2; or, when a signal came at any
moment (while Python imports the verb, while it works, while it cleans up), one line `<verb>: interrupted` and
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM). `main` installs the signal handling before it
imports anything heavy (core/interrupts.py), and ends the process itself once the clean-up is done
(os._exit): nothing runs after the exit status is decided, so no late Ctrl-C can print a traceback or be lost.
"""

from __future__ import annotations

import importlib
import os
import sys

from ..core import interrupts  # the standard library's lightest modules only: loaded before anything else

PROG = "eks-gpu-gitops"
USAGE_OR_INPUT = 2
INTERRUPTED = 128 + 2  # the status conventions.run gives a verb that was interrupted (after saying so)

# Verb -> (the module whose main(argv) runs it, what it does).
VERBS = {
    "render": ("render", "render every environment into rendered/"),
    "validate": ("validate", "lint, render, schema-check and rule-check manifests"),
    "diff": ("diff", "what a change (or applying to the cluster: --live) does to the rendered manifests"),
    "new-environment": ("new_environment", "add an environment shaped like the existing ones"),
    "new-job": ("new_job", "add a training job (an MPIJob) to an environment"),
    "scale": ("scale", "change an environment's GPU node count or type, and every figure that follows"),
    "cluster-settings": ("cluster_settings", "write a cluster's per-cluster values for Flux to substitute"),
    "status": ("status", "is the cluster the kubeconfig points at ready for an environment?"),
    "simulate": ("simulate", "place an environment's MPIJobs on a simulated cluster"),
    "toolchain": ("toolchain", "list or build the local control plane's binaries (simulate, the GitOps loop)"),
    "image-repository": ("image_repository", "where the image workflow pushes the trainer image"),
}


def usage() -> str:
    width = max(map(len, VERBS))
    lines = [f"usage: {PROG} VERB [ARGS] (VERB --help for its options), or {PROG} --version", "", "verbs:"]
    lines += [f"  {verb:<{width}}  {what}" for verb, (_, what) in VERBS.items()]
    return "\n".join(lines)


def renders_with() -> str:
    """What renders: the helper the install carries, another one named, or why renders fail."""
    from ..core.errors import InputError
    from ..render.helper import HELPER, HELPER_VARIABLE, binary

    try:
        found = binary()
    except InputError as error:
        return f"renders fail: {error}"
    if found == HELPER:
        return "with its helper (kustomize-controller v1.9.5's and helm-controller v1.6.4's libraries)"
    return f"with the helper {HELPER_VARIABLE} names, {found}"


def version() -> str:
    """The version, what renders, and where the documentation of this version is."""
    from importlib import metadata

    from .. import __version__

    lines = [f"{PROG} {__version__}, {renders_with()}"]
    try:
        urls = dict(url.split(", ", 1) for url in metadata.metadata(PROG).get_all("Project-URL") or [])
    except metadata.PackageNotFoundError:  # run from a source folder that is not installed
        urls = {}
    if "Source" in urls:
        lines.append(f"documentation: {urls['Source']}/tree/v{__version__}/tool/docs")
    return "\n".join(lines)


def _run(args: list[str]) -> int:
    """The verb's exit status (the verb says its own errors, and `interrupted` when it returns INTERRUPTED)."""
    if args[:1] in (["-h"], ["--help"]):
        print(usage())
        return 0
    if args[:1] == ["--version"]:
        print(version())
        return 0
    if not args or args[0] not in VERBS:
        given = f"unknown verb {args[0]!r}; " if args else ""
        print(f"{PROG}: {given}name one of {', '.join(VERBS)} (see --help)", file=sys.stderr)
        return USAGE_OR_INPUT
    verb = args[0]
    try:
        module = importlib.import_module(f"{__package__}.{VERBS[verb][0]}")
    except ModuleNotFoundError as error:
        from .conventions import MISSING

        print(f"{verb}: {MISSING.format(package=error.name)}", file=sys.stderr)
        return USAGE_OR_INPUT
    return module.main(args[1:])


def _status(code) -> int:
    """sys.exit's argument as an exit status (a message is printed, as Python does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _silence_stdout() -> None:
    """The reader went away (`scripts/validate | head`): send whatever is still buffered nowhere."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        return


class _Stderr:
    """sys.stderr, remembering how what was written to it ends: the line that says a run was interrupted is
    written once, whether the verb said it (conventions.run) or not, and however many signals came."""

    def __init__(self, stream):
        self._stream = stream
        self.tail = ""

    def write(self, text: str) -> int:
        written = self._stream.write(text)
        self.tail = (self.tail + text)[-512:]
        return written

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _start(outcome: dict, argv: list[str] | None) -> None:
    interrupts.install()  # first: from here on a signal ends the run with one line, whenever it comes
    if sys.stderr is not None and not isinstance(sys.stderr, _Stderr):
        sys.stderr = _Stderr(sys.stderr)
    args = sys.argv[1:] if argv is None else list(argv)
    outcome["verb"] = args[0] if args and args[0] in VERBS else PROG
    try:
        outcome["code"] = _run(args)
        outcome["said"] = outcome["code"] == INTERRUPTED
        sys.stdout.flush()  # here, where a Ctrl-C still ends a write the reader does not take
    except SystemExit as exit:
        outcome["code"] = _status(exit.code)
    except BrokenPipeError:
        _silence_stdout()
        outcome["code"] = 1
    except Exception as error:
        if interrupts.signalled() is not None:
            # What an interrupt turned into: Python wraps a KeyboardInterrupt raised while a class is made (in
            # __set_name__, a dataclass's fields) in a RuntimeError, and a verb's import may catch it as another.
            outcome["code"], outcome["said"] = INTERRUPTED, False
            return
        from ..core.errors import DEBUG_VARIABLE

        if os.environ.get(DEBUG_VARIABLE):
            raise
        message = f"internal error: {type(error).__name__}: {error} (set {DEBUG_VARIABLE}=1 for the traceback)"
        try:
            from .conventions import say

            say(outcome["verb"], message)  # one line, credentials masked
        except Exception:
            print(f"{outcome['verb']}: {' '.join(message.split())}", file=sys.stderr)
        outcome["code"] = USAGE_OR_INPUT


def _write(stream, text: str) -> None:
    try:
        stream.write(text)
    except (OSError, ValueError):
        return


def _flush(stream) -> bool:
    """Write out what `stream` holds; False when it cannot be (a reader gone, a closed stream)."""
    try:
        stream.flush()
    except (OSError, ValueError):
        return False
    return True


def _end(verb: str, code: int, said: bool) -> None:
    """The process's end: the clean-up (threads, helpers, temporary folders; core/interrupts.py), then the
    status, 128 + the first signal's number when one came at any moment, with the one line that says so."""
    interrupts.settle()
    signum = interrupts.first_signal()
    if signum is not None or code == INTERRUPTED:
        _silence_stdout()  # what an interrupted run still holds for stdout is not waited for
        line = f"{verb}: interrupted\n"
        tail = getattr(sys.stderr, "tail", None)
        if not (tail.endswith(line) if tail is not None else said):
            _write(sys.stderr, line)  # without a stderr to say it on, the status says it
        code = 128 + signum if signum is not None else INTERRUPTED
    elif not _flush(sys.stdout):
        _silence_stdout()
        code = code or 1
    _flush(sys.stdout)
    _flush(sys.stderr)
    os._exit(code & 0xFF)


def main(argv: list[str] | None = None) -> None:
    """Run a verb, and end the process (never returns)."""
    outcome = {"verb": sys.argv[1] if argv is None and sys.argv[1:2] and sys.argv[1] in VERBS else PROG}
    outcome.update(code=USAGE_OR_INPUT, said=False)
    started = False
    while True:
        # A run gets one KeyboardInterrupt (core/interrupts.py), wherever it comes: the verb's import, its work,
        # or just before the run turns quiet (a signal is only recorded from then on).
        try:
            if not started:
                started = True
                _start(outcome, argv)
            interrupts.quiet()
            break
        except KeyboardInterrupt:
            outcome["code"], outcome["said"] = INTERRUPTED, False
    _end(outcome["verb"], outcome["code"], outcome["said"])
