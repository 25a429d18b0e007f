"""Flux's envsubst: the parser and evaluator kustomize-controller v1.9.4 runs over each object's YAML.

A line-for-line port of fluxcd/pkg envsubst/v1.7.0 (parse/scan.go, parse/parse.go, template.go,
funcs.go; the version kustomize-controller v1.9.4's go.mod pins), so that what it accepts, refuses and
writes is the controller's: `$$` is an escaped `$` outside `${...}` (so `$${X}` is the text `${X}`),
inside one `$$`, `\\` and `\\/` are escapes; `${X-a}` and `${ X }` are errors. Differences: lengths
and offsets (`${#X}`, `${X:1:2}`) count characters, not UTF-8 bytes; a negative substring length counts
back from the end as in envsubst v1.7.1 (v1.7.0 panics there); `${X#pattern}` matches with Go's
envsubst's path.Match rules translated to a regular expression.

The Flux CLI v2.9.5 that tests/test_flux_cli.py compares with pins kustomize v1.35.6 (the same
kustomize_varsub.go) and envsubst v1.7.1 (only the negative substring length differs). Its
`flux build kustomization --dry-run` reads no substituteFrom source (internal/build/build.go passes
SubstituteWithDryRun; kustomize_varsub.go skips LoadVariables) and substitutes leniently unless
--strict-substitute is given.

`evaluate` takes a lookup that returns None for a variable it cannot know offline: that reference is
written back as it stands instead of being evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

EOF = ""
_SCAN_IDENT, _SCAN_LBRACK, _SCAN_RBRACK, _SCAN_ESCAPE = 1, 2, 4, 8
_DOLLAR, _BACKSLASH = 1, 2
DEFAULT_OPERATORS = ("-", "+", "=", "?", ":-", ":+", ":=", ":?")


class EnvsubstError(ValueError):
    """What envsubst refuses; Flux fails the whole Kustomization with it."""


@dataclass
class Text:
    value: str


@dataclass
class Func:
    param: str = ""
    name: str = ""  # the operator ("" for a bare ${X})
    args: list = field(default_factory=list)
    text: str = ""  # as written, from `${` to `}`


class _Scanner:
    def __init__(self, buf: str):
        self.buf, self.pos, self.start, self.width = buf, 0, 0, 0
        self.mode, self.escape_chars, self.accept = 0, 0, None

    def read(self) -> str:
        if self.pos >= len(self.buf):
            self.width = 0
            return EOF
        self.width = 1
        self.pos += 1
        return self.buf[self.pos - 1]

    def unread(self) -> None:
        self.pos -= self.width

    def skip(self) -> None:
        self.buf = self.buf[: self.pos - 1] + self.buf[self.pos :]

    def peek(self) -> str:
        r = self.read()
        self.unread()
        return r

    def string(self) -> str:
        return self.buf[self.start : self.pos]

    def scan(self) -> str:
        self.start = self.pos
        r = self.read()
        if r == EOF:
            return "eof"
        if self._lbrack(r):
            return "lbrack"
        if self._rbrack(r):
            return "rbrack"
        if self._ident(r):
            return "ident"
        return "illegal"

    def _ident(self, r: str) -> bool:
        if not self.mode & _SCAN_IDENT:
            return False
        if self._escaped(r):
            self.skip()
        elif not self.accept(r, self.pos - self.start):
            return False
        while True:
            r = self.read()
            if r == EOF:
                self.unread()
                break
            if self._lbrack(r):
                self.unread()
                self.unread()
                break
            if self._escaped(r):
                self.skip()
                continue
            if not self.accept(r, self.pos - self.start):
                self.unread()
                break
        return True

    def _lbrack(self, r: str) -> bool:
        if not self.mode & _SCAN_LBRACK:
            return False
        if r == "$":
            if self.read() == "{":
                return True
            self.unread()
        return False

    def _rbrack(self, r: str) -> bool:
        return bool(self.mode & _SCAN_RBRACK) and r == "}"

    def _escaped(self, r: str) -> bool:
        if not self.mode & _SCAN_ESCAPE:
            return False
        if r == "$" and self.escape_chars & _DOLLAR and self.peek() == "$":
            return True
        return r == "\\" and bool(self.escape_chars & _BACKSLASH) and self.peek() in ("/", "\\")


def _accept_rune(r, i):
    return True


def _accept_ident(r, i):
    return r.isalnum() or r == "_"


def _accept_default(r, i):
    return (i == 1 and r == ":") or (i == 2 and r in "=-?+")


def _accept_replace(r, i):
    return (i == 1 and r == "/") or (i == 2 and r in "/#%")


def _accept_casing(r, i):
    return r in ",^" and i < 3


class _Parser:
    def __init__(self, text: str):
        self.s = _Scanner(text)

    def parse_any(self) -> list:
        nodes = []
        while True:
            s = self.s
            s.accept, s.mode, s.escape_chars = _accept_rune, _SCAN_IDENT | _SCAN_LBRACK | _SCAN_ESCAPE, _DOLLAR
            token = s.scan()
            if token == "ident":
                nodes.append(Text(s.string()))
            elif token == "eof":
                return nodes
            elif token == "lbrack":
                nodes.append(self.parse_func())
            else:
                raise EnvsubstError("bad substitution")

    def parse_func(self) -> Func:
        begin = self.s.start
        node = self._func()
        node.text = self.s.buf[begin : self.s.pos]
        return node

    def _func(self) -> Func:
        s = self.s
        s.escape_chars = _DOLLAR | _BACKSLASH
        if s.peek() == "#":
            return self._len_func()
        s.accept, s.mode = _accept_ident, _SCAN_IDENT
        if s.scan() != "ident":
            raise EnvsubstError("unable to parse variable name")
        name = s.string()
        following = s.peek()
        if following == ":":
            return self._default_or_substr(name)
        if following == "=":
            return self._default_func(name)
        if following in (",", "^"):
            return self._simple_func(name, _accept_casing)
        if following == "/":
            return self._replace_func(name)
        if following == "#":
            return self._remove_func(name, lambda r, i: r == "#" and i < 3)
        if following == "%":
            return self._remove_func(name, lambda r, i: r == "%" and i < 3)
        s.accept, s.mode = _accept_ident, _SCAN_RBRACK
        if s.scan() != "rbrack":
            raise EnvsubstError("missing closing brace")
        return Func(param=name)

    def _param(self, accept, mode: int):
        s = self.s
        s.accept, s.mode = accept, mode | _SCAN_LBRACK
        token = s.scan()
        if token == "lbrack":
            return self.parse_func()
        if token in ("ident", "rbrack"):
            return Text(s.string())
        raise EnvsubstError("unable to parse substitution within function")

    def _operator(self, node: Func, accept, error: str = "bad substitution") -> None:
        s = self.s
        s.accept, s.mode = accept, _SCAN_IDENT
        if s.scan() != "ident":
            raise EnvsubstError(error)
        node.name = s.string()

    def _default_or_substr(self, name: str) -> Func:
        s = self.s
        s.read()
        r = s.peek()
        s.unread()
        if r in ("=", "-", "?", "+"):
            return self._default_func(name)
        node = Func(param=name)
        self._operator(node, lambda r, i: i == 1 and r == ":")
        node.args.append(self._param(lambda r, i: r not in ":}", _SCAN_IDENT))
        s.accept, s.mode = (lambda r, i: r == ":"), _SCAN_IDENT | _SCAN_RBRACK
        token = s.scan()
        if token == "rbrack":
            return node
        if token != "ident":
            raise EnvsubstError("bad substitution")
        node.args.append(self._param(lambda r, i: r != "}", _SCAN_IDENT))
        self._rbrack()
        return node

    def _remove_func(self, name: str, accept) -> Func:
        node = Func(param=name)
        self._operator(node, accept)
        node.args.append(self._param(lambda r, i: r != "}", _SCAN_IDENT))
        self._rbrack()
        return node

    def _replace_func(self, name: str) -> Func:
        s = self.s
        node = Func(param=name)
        self._operator(node, _accept_replace)
        node.args.append(self._param(lambda r, i: r != "/", _SCAN_IDENT | _SCAN_ESCAPE))
        s.accept, s.mode = (lambda r, i: r == "/"), _SCAN_IDENT
        if s.scan() != "ident":
            raise EnvsubstError("bad substitution")
        if s.peek() == "}":
            self._rbrack()
            return node
        node.args.append(self._param(lambda r, i: r != "}", _SCAN_IDENT | _SCAN_ESCAPE))
        self._rbrack()
        return node

    def _default_func(self, name: str) -> Func:
        s = self.s
        node = Func(param=name)
        accept = (lambda r, i: i == 1 and r == "=") if s.peek() == "=" else _accept_default
        self._operator(node, accept, "unable to parse default function")
        while True:
            if s.peek() == "}":
                self._rbrack()
                return node
            node.args.append(self._param(lambda r, i: r != "}", _SCAN_IDENT))

    def _simple_func(self, name: str, accept) -> Func:
        node = Func(param=name)
        self._operator(node, accept)
        self._rbrack()
        return node

    def _len_func(self) -> Func:
        s = self.s
        node = Func()
        self._operator(node, lambda r, i: r == "#" and i == 1)
        s.accept, s.mode = _accept_ident, _SCAN_IDENT
        if s.scan() != "ident":
            raise EnvsubstError("bad substitution")
        node.param = s.string()
        self._rbrack()
        return node

    def _rbrack(self) -> None:
        self.s.mode = _SCAN_RBRACK
        if self.s.scan() != "rbrack":
            raise EnvsubstError("bad substitution")


def parse(text: str) -> list:
    """The nodes of `text`; EnvsubstError where Flux's parser refuses it."""
    return _Parser(text).parse_any()


def _substr(s: str, *args: str) -> str:
    try:
        pos = int(args[0])
    except ValueError:
        return s
    if pos < 0:
        pos = max(len(s) + pos, 0)
    if len(args) == 1:
        return s[pos:]
    try:
        length = int(args[1])
    except ValueError:
        return s
    if length < 0:
        end = len(s) + length
        return "" if end < pos else s[pos:end]
    return s[pos : pos + length]


def _glob(pattern: str) -> re.Pattern | None:
    """envsubst's path.Match pattern (a fork of Go's where `*` and `?` match `/` too) as a regular
    expression; None when malformed (the value is kept)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                return None
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("^") else body).replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error:
        return None


def _trim(s: str, pattern: str, longest: bool) -> str:
    glob = _glob(pattern)
    if glob is None:
        return s
    matches = [n for n in range(len(s), 0, -1) if glob.fullmatch(s[:n])]
    if not matches:
        return s
    return s[(matches[0] if longest else matches[-1]) :]


def _trim_suffix(s: str, pattern: str, longest: bool) -> str:
    return _trim(s[::-1], pattern[::-1], longest)[::-1]


def _function(name: str, args: int) -> Callable[..., str]:
    """funcs.go's lookupFunc: what each operator does with the value and its arguments."""
    default = lambda s, *a: "".join(a) if not s and a else s  # noqa: E731
    return {
        ",": lambda s, *a: s[:1].lower() + s[1:],
        ",,": lambda s, *a: s.lower(),
        "^": lambda s, *a: s[:1].upper() + s[1:],
        "^^": lambda s, *a: s.upper(),
        "#": (lambda s, *a: str(len(s))) if args == 0 else (lambda s, *a: _trim(s, a[0], False) if a else s),
        "##": lambda s, *a: _trim(s, a[0], True) if a else s,
        "%": lambda s, *a: _trim_suffix(s, a[0], False) if a else s,
        "%%": lambda s, *a: _trim_suffix(s, a[0], True) if a else s,
        ":": _substr,
        "/#": lambda s, *a: a[1] + s[len(a[0]) :] if len(a) == 2 and s.startswith(a[0]) else s,
        "/%": lambda s, *a: s[: len(s) - len(a[0])] + a[1] if len(a) == 2 and s.endswith(a[0]) else s,
        "/": lambda s, *a: s.replace(a[0], a[1] if len(a) > 1 else "", 1) if a else s,
        "//": lambda s, *a: s.replace(a[0], a[1] if len(a) > 1 else "") if a else s,
    }.get(name, default)


def evaluate(nodes: list, lookup: Callable[[Func], str | None]) -> str:
    """The text Flux writes: each variable's value through its operator; a reference whose lookup is
    None (a value only the cluster has) stays as written."""
    out = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.value)
            continue
        args = [evaluate([arg], lookup) for arg in node.args]
        value = lookup(node)
        out.append(node.text if value is None else _function(node.name, len(args))(value, *args))
    return "".join(out)
