"""Validate manifests before Flux applies them, in stages with one module each:

plan (what to read) -> lint (yamllint) and load (render, build, read) -> schemas -> rules (runner:
run the catalogue, settle severity, suppression and source lines) -> report (output formats).
pipeline ties the stages together; server.py is `--server`; the command line is cli/validate.py.
"""
