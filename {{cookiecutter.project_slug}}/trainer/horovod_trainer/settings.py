"""Command-line settings that fall back to environment variables.

Every option `--some-name` can also be given as `TRAINER_SOME_NAME`; a flag on the command line wins
over the environment, and the environment wins over the default. Parsing and range checks happen
here, before TensorFlow is imported, so a bad setting fails fast with one line on stderr.
"""

import argparse
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from .errors import TrainerError

ENV_PREFIX = "TRAINER_"
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


@dataclasses.dataclass(frozen=True)
class Option:
    flag: str
    type: Callable[[str], Any]
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None  # returns a complaint, or None
    choices: Sequence[str] | None = None
    is_switch: bool = False
    kind: str | None = None  # what the value should look like, for the error message of a bad one

    @property
    def dest(self):
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self):
        return ENV_PREFIX + self.dest.upper()


def at_least(minimum):
    def check(value):
        return None if value >= minimum else f"must be at least {minimum} (got {value})"

    return check


def between(low, high):
    def check(value):
        return None if low <= value <= high else f"must be between {low} and {high} (got {value})"

    return check


def positive(value):
    return None if value > 0 else f"must be greater than 0 (got {value})"


def parse_switch(text):
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(text)


KIND_NAMES = {int: "an integer", float: "a number", parse_switch: "true or false"}


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; the contract here is exactly one line."""

    def error(self, message):
        raise TrainerError(message)


def build_parser(prog, description, options):
    parser = OneLineParser(
        prog=prog,
        description=description,
        epilog=f"Every option can also be set as an environment variable {ENV_PREFIX}<OPTION_NAME> "
        "(e.g. --batch-size as TRAINER_BATCH_SIZE); the command line wins.",
    )
    for option in options:
        env_note = f" [env {option.env}]"
        if option.is_switch:
            parser.add_argument(option.flag, action="store_true", default=None, help=option.help + env_note)
        else:
            default_note = "" if option.default is None else f" (default: {option.default})"
            if option.choices:
                default_note = f": {', '.join(option.choices)}" + default_note
            # type=str: conversion happens in resolve() so that messages can name the source.
            parser.add_argument(
                option.flag,
                type=str,
                default=None,
                metavar=option.dest.upper(),
                help=option.help + default_note + env_note,
            )
    return parser


def _convert(option, raw, source):
    try:
        value = option.type(raw)
    except ValueError:
        kind = option.kind or KIND_NAMES.get(option.type, "a valid value")
        raise TrainerError(f"{source} expects {kind}, got {raw!r}") from None
    if option.choices is not None and value not in option.choices:
        raise TrainerError(f"{source} must be one of {', '.join(option.choices)} (got {raw!r})")
    if option.check is not None and value is not None:
        complaint = option.check(value)
        if complaint:
            raise TrainerError(f"{source} {complaint}")
    return value


def resolve(options, argv, environ=None, prog="trainer", description=None):
    """Return {dest: value} from argv, then environ, then the defaults."""
    environ = os.environ if environ is None else environ
    parsed = build_parser(prog, description, options).parse_args(argv)
    values = {}
    for option in options:
        given = getattr(parsed, option.dest)
        if given is not None:
            values[option.dest] = True if option.is_switch else _convert(option, given, option.flag)
        elif option.env in environ:
            values[option.dest] = _convert(option, environ[option.env], option.env)
        else:
            values[option.dest] = option.default
    return values
