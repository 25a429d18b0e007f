"""The error type the command line turns into `<verb>: <message>` and exit status 2."""

# Set to 1 to let bugs and failing rules raise with their traceback (the tests set it).
DEBUG_VARIABLE = "GITOPS_DEBUG"


class InputError(Exception):
    """Bad input or a missing tool: reported in one line, never as a traceback."""
