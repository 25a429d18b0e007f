"""Reading fields of parsed objects that may be malformed: never raise on a wrong type, treat it
as absent (the schema check reports the object), and Kubernetes quantities as numbers."""

from __future__ import annotations

import math
import re


def mapping(value, *keys) -> dict:
    """value[k1][k2]... as a dict, {} where any step is missing or not a mapping."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def sequence(value, *keys) -> list:
    """value[k1][k2]... as a list, [] where any step is missing or not a list."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, list) else []


def text(value, *keys) -> str:
    """value[k1][k2]... when it is a string, "" where any step is missing or not what Kubernetes reads there: a
    name, a class or a path given as a list or a map is never a dictionary key or a set member (unhashable)."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else ""


def names(value, *keys) -> list[str]:
    """The `name` of each mapping in the list at value[k1][k2]... (Flux's dependsOn, a pod's volumes): the
    strings only; [] where any step is missing or not a list."""
    return [
        item["name"] for item in sequence(value, *keys) if isinstance(item, dict) and isinstance(item.get("name"), str)
    ]


def integer(value, default: int) -> int:
    """`value` when it is an int (not a bool), else `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


_QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?|[+-]?\.\d+)(?:[eE]([+-]?\d+))?([a-zA-Z]*)$")
_FACTORS = {
    "": 1,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def quantity(value) -> float | None:
    """A Kubernetes resource quantity ("500m", "2", "864Gi") as a number; None when malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int of more digits than a float holds
            return None
        return number if math.isfinite(number) else None
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(3) not in _FACTORS:
        return None
    try:
        number = float(match.group(1)) * (10 ** int(match.group(2)) if match.group(2) else 1)
        number *= _FACTORS[match.group(3)]
    except (OverflowError, ValueError):  # "1e400": past what a float holds (and what the API server takes)
        return None
    return number if math.isfinite(number) else None


def plural(count: int | float, word: str) -> str:
    count = int(count) if float(count).is_integer() else count
    return f"{count} {word}{'' if count == 1 else 's'}"


def strings(value, path: tuple = (), keys: bool = False):
    """(field path, text) of every string inside `value`, depth first; with `keys`, mapping keys too
    (at the path of their value)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if keys and isinstance(key, str):
                yield (*path, key), key
            yield from strings(item, (*path, key), keys)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, (*path, index), keys)
    elif isinstance(value, str):
        yield path, value
