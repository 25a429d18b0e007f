"""One-line error reporting for the command-line entry points."""

import functools
import sys


class TrainerError(Exception):
    """A problem with the user's settings or input: reported as one line, no traceback."""

    exit_code = 2


class TargetNotReached(TrainerError):
    """Training finished but missed --target-accuracy."""

    exit_code = 1


def report_errors(prog):
    """Turn TrainerError raised by the wrapped main() into `prog: error: ...` and an exit code."""

    def decorate(main):
        @functools.wraps(main)
        def wrapper(*args, **kwargs):
            try:
                return main(*args, **kwargs)
            except TrainerError as exc:
                print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
                sys.exit(exc.exit_code)

        return wrapper

    return decorate
