"""What looks like a credential: names (`DB_PASS`, `apiKey`) and the secret parts of a string, by the name
they are given (`TOKEN=value`, `--password value`, `"apiKey": "..."`, `password = ...`) and by their shape
whatever their name (`https://user:password@host`, `Authorization: Bearer ...`, a JWT, a PEM private key, an AWS
access key id, `curl -u user:password`, netrc's `password`, `--password-stdin` input), and where the secrets of an
object are (`secret_slots`: a Secret's values, nested Secret manifests and credential-named keys at any depth, the
secret parts of its strings). diff masks objects with it, validate's rules keep secret values out of their
messages with it, and every message that can repeat a user's text (kustomize errors, findings, error lines) goes
through `mask_text`."""

from __future__ import annotations

import re

MASK = "***"

# A name is split into words (separators and camelCase: `WANDB_API_KEY`, `apiKey`, `db.password`);
# it looks like a credential when one word is one of these. Whole words, so that `KEYBOARD`,
# `TOKENIZER_PATH` or `pathType` are not credentials. Masking a harmless value costs little,
# printing a key costs a rotation, so the list is broad.
_CREDENTIAL_WORDS = frozenset(
    {
        "PASS", "PASSWD", "PASSWORD", "PASSWORDS", "PASSPHRASE", "PWD", "PAT", "TOKEN", "TOKENS",
        "SECRET", "SECRETS", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "OAUTH", "AUTHORIZATION",
        "APIKEY", "APIKEYS", "COOKIE", "SALT", "SIGNATURE", "DSN", "CONNECTIONSTRING",
    }
)  # fmt: skip
# Words glued to others (`DBPASSWORD`, `GITHUBTOKEN`, `CLIENTSECRET`) still count when they end a word.
_CREDENTIAL_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "TOKEN", "SECRET", "CREDENTIALS", "CREDENTIAL", "APIKEY")
# `KEY` alone is a selector's or a secretKeyRef's field; it is a credential after one of these words.
_KEY_WORDS = frozenset({"KEY", "KEYS"})
_KEY_QUALIFIERS = frozenset(
    {
        "API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION", "MASTER", "LICENSE", "SSH", "TLS",
        "CLIENT", "SERVICE", "ACCOUNT", "HMAC", "SESSION", "AUTH", "GPG", "PGP", "RSA", "SHARED", "STORAGE",
        "WEBHOOK", "DEPLOY",
    }
)  # fmt: skip
# A name ending in one of these refers to a credential without holding it (`secretName`, `tokenPath`,
# `passwordFile`, `secretKeyRef`).
_REFERENCE_ENDINGS = frozenset(
    {"NAME", "NAMES", "REF", "REFS", "NAMESPACE", "FILE", "FILES", "PATH", "PATHS", "DIR", "MOUNT", "SECONDS"}
)
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# scheme://user:password@host, group 2 the password (the user may be empty: redis://:password@host).
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)([^\s@]+)@")
# A value: quoted (an escaped quote inside does not end it), or a run of anything but whitespace and quotes, a
# backslash-newline (a shell line continuation) included, so that `a|b`, `a;b` or `a\\<newline>b` is one value.
_VALUE = r"(\"(?:[^\"\\]|\\.)*\"|'[^']*'|(?:[^\s\"'\\]|\\.|\\\n)+)"
# NAME=value, NAME: value, --name=value, --name value inside a string (scripts, command lines, config
# files), group 1 the name, group 2 the value.
_ASSIGNMENTS = (
    re.compile(r"(?<![\w.-])-{0,2}([A-Za-z_][\w.-]*)=" + _VALUE),
    re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]*):[ \t]+" + _VALUE),
    re.compile(r"(?<!\S)--?([A-Za-z][\w-]*)[ \t]+" + _VALUE),
)
OPTION = re.compile(r"--?([A-Za-z][\w-]*)")
# "name": "value" (JSON) and `name = value` on a line of its own (INI, .env, netrc-like files), group 1 the name,
# group 2 the value.
_FIELDS = (
    re.compile(r'"([A-Za-z_][\w.-]*)"\s*:\s*("(?:[^"\\]|\\.)*")'),
    re.compile(r"(?m)^[ \t]*([A-Za-z_][\w.-]*)[ \t]*[=:][ \t]*([^\s#;][^\n]*?)[ \t]*$"),
)
# Secrets known by their shape whatever name they have, the secret part in group 1: an HTTP authorization,
# a JWT, the body of a PEM private key, an AWS access key id, `curl -u user:password`, netrc's `password x` (after
# its `login y` or at the start of a line, so that "the password is wrong" is left alone),
# what is piped into `--password-stdin`, `aws configure set <credential name> <value>`.
_SHAPES = (
    re.compile(r"\b(?:Bearer|Basic|Token|Digest)[ \t]+([A-Za-z0-9._~+/=-]{6,})"),
    re.compile(r"\b(eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,})"),
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
    re.compile(r"\b((?:AKIA|ASIA)[A-Z0-9]{16})\b"),
    re.compile(r"(?<!\S)(?:-u|--user)[ \t]+[^\s:]*:(\S+)"),
    re.compile(r"(?m)(?:^[ \t]*|\blogin[ \t]+\S+[ \t]+)password[ \t]+(?![=:])(\S+)"),
    re.compile(r"\becho[ \t]+(\S+)[ \t]*\|[^|\n]*--password-stdin"),
)
_CONFIGURE_SET = re.compile(r"\bconfigure[ \t]+set[ \t]+([\w.-]+)[ \t]+(\S+)")

# Values Flux's post-build substitution took from a Secret of the repository (post_build.py adds them):
# wherever one lands (an env value, a URL in a ConfigMap), it is masked like a credential. A value is
# masked inside longer text from this many characters on; a shorter one only where it is the whole value
# (masking every "ab" in every message would hide everything else).
_SUBSTITUTED_SECRETS: set[str] = set()
_SECRET_SUBSTRING = 4


def add_substituted_secrets(values) -> None:
    _SUBSTITUTED_SECRETS.update(str(v) for v in values if str(v))


def is_substituted_secret(value) -> bool:
    """Whether a whole value (a string, or a number Flux's substitution made of one) came from a Secret."""
    return not isinstance(value, bool) and value is not None and str(value) in _SUBSTITUTED_SECRETS


def _substituted_spans(text: str) -> list[tuple[int, int]]:
    if text in _SUBSTITUTED_SECRETS:
        return [(0, len(text))]
    spans = []
    for value in _SUBSTITUTED_SECRETS:
        if len(value) < _SECRET_SUBSTRING:
            continue
        start = text.find(value)
        while start >= 0:
            spans.append((start, start + len(value)))
            start = text.find(value, start + 1)
    return spans


def looks_like_credential(name: str) -> bool:
    words = [word.upper() for word in _WORDS.findall(str(name))]
    if not words or words[-1] in _REFERENCE_ENDINGS:
        return False
    for index, word in enumerate(words):
        if word in _CREDENTIAL_WORDS or word.endswith(_CREDENTIAL_ENDINGS) or word.startswith("PASSW"):
            return True
        if word in _KEY_WORDS and index and words[index - 1] in _KEY_QUALIFIERS:
            return True
    return False


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where the secrets in a string are (start, end), in order and not overlapping."""
    spans = [match.span(2) for match in _URL_PASSWORD.finditer(text)] + _substituted_spans(text)
    for pattern in (*_ASSIGNMENTS, *_FIELDS, _CONFIGURE_SET):
        spans += [match.span(2) for match in pattern.finditer(text) if looks_like_credential(match.group(1))]
    for pattern in _SHAPES:
        spans += [match.span(1) for match in pattern.finditer(text) if match.group(1).strip()]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):  # a URL password inside an assigned value is one secret
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mask_text(text: str, marker: str = MASK) -> str:
    """`text` with the secret part of each credential shape replaced by `marker`."""
    for start, end in reversed(secret_spans(text)):
        text = text[:start] + marker + text[end:]
    return text


# scheme://userinfo@: what without_userinfo leaves out (a user alone too: https://TOKEN@host). As in RFC 3986, the
# authority ends at the first "/": `https://registry:5000/v2/image@sha256:...` has none.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/@]*@")


def without_userinfo(text: str) -> str:
    """`text` with the user and password of every URL left out (`https://user:password@host` -> `https://host`):
    how a server a kubeconfig or a CLI names is shown."""
    return _USERINFO.sub(r"\1", str(text))


# --- where the secrets of an object are ---------------------------------------------------------------

# How much of a value is secret: all of it, or the secret parts of a string (secret_spans).
WHOLE, TEXT = "whole", "text"
# Every value of these is secret: a Secret's (at the top or as a mapping nested anywhere, such as a whole Secret
# manifest in a HelmRelease's values.extraObjects); `data` under a credential-named key too (`secrets: {x: {data:
# ...}}`); `stringData` (only Secrets have it) and `binaryData` wherever they are.
_SECRET_FIELDS = ("data", "stringData")
_ALWAYS_SECRET_FIELDS = ("stringData", "binaryData")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# A string that holds a Secret manifest with its values (a chart's extraDeploy template, a JSON document): both
# `kind: Secret` and a data or stringData key, in YAML or JSON spelling.
_SECRET_KIND = re.compile(r"""(?<![\w-])["']?kind["']?[ \t]*:[ \t]*["']?Secret(?![\w.-])""")
_DATA_KEY = re.compile(r"""(?<![\w-])["']?(?:data|stringData)["']?[ \t]*:""")


def is_secret(doc: dict) -> bool:
    """A core Secret (an apiVersion with no group, or none as in a chart's values)."""
    return isinstance(doc, dict) and doc.get("kind") == "Secret" and "/" not in str(doc.get("apiVersion", "v1"))


def holds_secret_manifest(text: str) -> bool:
    return bool(_SECRET_KIND.search(text) and _DATA_KEY.search(text))


def secret_slots(doc) -> dict[tuple, tuple[tuple, str]]:
    """Where the secrets of `doc` are: {stable id: (path to the value, WHOLE or TEXT)}.

    - whole values: every value of a Secret's `data` and `stringData` (of the object, or of a Secret-shaped mapping
      at any depth), of `stringData` and `binaryData` anywhere, of `data` under a credential-named key, the
      last-applied annotation (it repeats the whole object), the string or number under a credential-named key
      (a ConfigMap's `token`, HelmRelease `values.db.password`, an annotation `example.com/api-token`), the
      `value` of a `{name, value}` pair named like a credential (env entries, wherever the list sits), the item
      after a credential-named option in a list (`["--token", "abc"]`), every item of a list under a
      credential-named key, a string that holds a Secret manifest, and a number a Secret's value was substituted
      into;
    - the secret parts (secret_spans) of any other string.

    The id names a value the same way in two versions of an object (list items by their `name`, not by
    position), so that diff compares the right pair.
    """
    slots: dict[tuple, tuple[tuple, str]] = {}
    if isinstance(doc, dict):
        _collect(doc, (), (), slots)
    return slots


def secret_paths(doc) -> dict[tuple, str]:
    """{path to a secret value of `doc`: WHOLE or TEXT}."""
    return dict(secret_slots(doc).values())


def hide(value, how: str, marker: str = MASK):
    """A secret value as it is shown: `marker` for a whole one, else the string with its secret parts masked."""
    return marker if how == WHOLE else mask_text(value, marker)


def _collect(node, path: tuple, ident: tuple, slots: dict, whole_items: bool = False, named: bool = False) -> None:
    """Adds the slots under `node`. `whole_items`: the node is a list under a credential-named key; `named`: a
    key above it is named like a credential."""
    if isinstance(node, dict):
        # A JSON schema's `properties` (a CRD's) names fields, a `stringData` one among them: no section of values.
        schema = bool(path) and path[-1] == "properties"
        sections = () if schema else (*_ALWAYS_SECRET_FIELDS, *(_SECRET_FIELDS if is_secret(node) or named else ()))
        pair = looks_like_credential(node["name"]) if isinstance(node.get("name"), str) else False
        for key, value in node.items():
            where, which = path + (key,), ident + (key,)
            if key in sections:
                _section(value, where, which, slots)
            elif path == ("metadata", "annotations") and key == _LAST_APPLIED:
                slots[which] = (where, WHOLE)
            else:
                credential = isinstance(key, str) and looks_like_credential(key)
                whole = credential or (key == "value" and pair)
                _collect_value(value, where, which, slots, whole, named or credential)
    elif isinstance(node, list):
        previous = None
        for index, item, name in _named_items(node):
            option = OPTION.fullmatch(previous) if isinstance(previous, str) else None
            whole = whole_items or (bool(option) and looks_like_credential(option.group(1)))
            _collect_value(item, path + (index,), ident + (name,), slots, whole, named)
            previous = item


def _section(values, path: tuple, ident: tuple, slots: dict) -> None:
    """Every value of a secret section (`data`, `stringData`, `binaryData`) is secret, whatever its type."""
    if isinstance(values, dict):
        for key in values:
            slots[ident + (str(key),)] = (path + (key,), WHOLE)
    elif values is not None:
        slots[ident] = (path, WHOLE)


def _collect_value(value, path: tuple, ident: tuple, slots: dict, whole: bool, named: bool) -> None:
    if isinstance(value, (dict, list)):
        _collect(value, path, ident, slots, whole and isinstance(value, list), named)
    elif value is None or isinstance(value, bool):
        return
    elif whole or (is_substituted_secret(value) if not isinstance(value, str) else holds_secret_manifest(value)):
        slots[ident] = (path, WHOLE)
    elif isinstance(value, str) and secret_spans(value):
        slots[ident] = (path, TEXT)


def _named_items(items: list):
    """(index, item, id): an item's id is its `name` (with a count for repeats), else its index."""
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str):
            seen[name] = seen.get(name, 0) + 1
            yield index, item, name if seen[name] == 1 else f"{name}#{seen[name]}"
        else:
            yield index, item, f"#{index}"
