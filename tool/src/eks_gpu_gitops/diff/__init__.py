"""Show what a change does to the rendered manifests: `diff --base REF [--head REF]`.

Both refs are rendered once each (the base in a temporary git worktree), objects are paired
per environment by API group, kind, namespace and name (an object that moves to another namespace
pairs as one move: pairing.py), secrets are masked, and the result
starts with an impact summary: GPUs, node capacity, changes that cannot apply in place,
deletions that lose data.

Modules, one job each: gitrefs (git), sides (render both refs), pairing (pair and diff),
masking (secrets), impact (GPU figures), notices/ (the catalogue of notices and the functions that
make them), report (assembly), model (the records formats read), formats/ (text, markdown, json).
"""
