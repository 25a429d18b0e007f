"""What looks like a credential: names (`DB_PASS`, `apiKey`) and the secret parts of a string, by the name
they are given (`TOKEN=value`, `--password value`, `"apiKey": "..."`, `password = ...`) and by their shape
whatever their name (`https://user:password@host`, `Authorization: Bearer ...`, a JWT, a PEM private key, an AWS
access key id, `curl -u user:password`, netrc's `password`, `--password-stdin` input). diff masks objects with it, and
every message that can repeat a user's text (kustomize errors, findings) goes through `mask_text`."""

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
# a JWT, the body of a PEM private key, an AWS access key id, `curl -u user:password`, netrc's `password x`,
# what is piped into `--password-stdin`, `aws configure set <credential name> <value>`.
_SHAPES = (
    re.compile(r"\b(?:Bearer|Basic|Token|Digest)[ \t]+([A-Za-z0-9._~+/=-]{6,})"),
    re.compile(r"\b(eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,})"),
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
    re.compile(r"\b((?:AKIA|ASIA)[A-Z0-9]{16})\b"),
    re.compile(r"(?<!\S)(?:-u|--user)[ \t]+[^\s:]*:(\S+)"),
    re.compile(r"\bpassword[ \t]+(?![=:])(\S+)"),
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
