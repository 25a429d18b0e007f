"""The one error type the command line turns into `<verb>: <message>` and exit status 2."""


class InputError(Exception):
    """Bad input or a missing tool: reported in one line, never as a traceback."""
