"""Hostile input, leaks: secrets known by their name and by their shape, whatever the text around them."""

from __future__ import annotations

import pytest

LEAKS = [
    ("Authorization: Bearer tok3n-AbC123xyz", "tok3n-AbC123xyz"),
    ("curl -H 'Authorization: Basic dXNlcjpodW50ZXIy' https://x", "dXNlcjpodW50ZXIy"),
    ("TOKEN=first|second-half", "second-half"),
    ('PASSWORD="ab\\"cd-second" next', "cd-second"),
    ("PASSWORD=abc\\\nsecond-line", "second-line"),
    ('{"password": "hunter2-json", "user": "x"}', "hunter2-json"),
    ("[db]\npassword = hunter2-ini\nuser = x", "hunter2-ini"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA-pem\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA-pem"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.SflKxwRJSMeKKF2QT4fw", "eyJzdWIiOiIxIn0"),
    ("machine git.example.com login bot password hunter2-netrc", "hunter2-netrc"),
    ("curl -u bob:hunter2-curl https://x", "hunter2-curl"),
    ("echo hunter2-stdin | docker login -u x --password-stdin ghcr.io", "hunter2-stdin"),
    ("aws configure set aws_secret_access_key wJalrXUtnFEMI-aws && aws configure set region us-west-2", "FEMI-aws"),
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("key id AKIAIOSFODNN7EXAMPLE in a sentence", "AKIAIOSFODNN7EXAMPLE"),
]


@pytest.mark.parametrize(("text", "secret"), LEAKS, ids=[f"leak-{i}" for i in range(len(LEAKS))])
def test_a_secret_is_masked_by_its_name_or_its_shape(text, secret):
    from eks_gpu_gitops.core.credentials import mask_text

    masked = mask_text(text)
    assert secret not in masked and "***" in masked, masked


@pytest.mark.parametrize(
    "text", ["image: nginx:1.25", "replicas: 3", "--epochs 3", "a Bearer token", "key: app", "uses: actions/cache@v5"]
)
def test_ordinary_text_is_left_alone(text):
    from eks_gpu_gitops.core.credentials import mask_text

    assert mask_text(text) == text
