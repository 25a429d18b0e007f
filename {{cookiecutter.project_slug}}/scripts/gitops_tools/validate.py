"""Validate manifests before Flux applies them: lint, render once, schemas, rules, report.

    scripts/validate [PATH ...] [--env ENV] [--format text|json|github] [--cluster-config FILE]
                     [--schema-dir DIR] [--kubernetes-version X.Y] [--strict] [--quiet]
    scripts/validate --list-rules [--format text|json|markdown]

PATH is the repository root (the default: every environment), clusters/<env> (one environment),
a kustomization folder, a folder of plain manifests, or files. Exit status: 0 clean (warnings
allowed), 1 errors (or warnings with --strict), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import eks, kustomize, render, report, runner, settings
from .eks import version_key
from .errors import InputError
from .locate import Locator
from .manifests import Manifest, parse_stream, read_file, relative
from .rules import Finding
from .rules.apis import removal
from .rules.model import Scope
from .schemas import SCHEMA_DIR_VARIABLE, SchemaChecker, SchemaStore, schema_version

EKSCTL = ("eksctl.io", "ClusterConfig")
KUSTOMIZE_CONFIG_GROUP = "kustomize.config.k8s.io"   # kustomization.yaml files: build input, never applied
_YAML_SUFFIXES = (".yaml", ".yml")
_SKIPPED_FOLDERS = (".git", ".venv", "node_modules", "__pycache__")


@dataclass
class Plan:
    """What to read, decided before anything is rendered."""
    root: Path                          # repository root, or the working folder outside one
    repository: bool                    # render clusters/<env> (True) or read the paths (False)
    envs: list[str] | None = None
    builds: list[Path] = field(default_factory=list)   # kustomization folders
    files: list[Path] = field(default_factory=list)    # plain manifest files
    sources: list[Path] = field(default_factory=list)  # YAML sources for yamllint
    env: str = ""                       # environment name guessed from the paths


def _find_root(start: Path) -> Path | None:
    try:
        return render.repository_root(start.resolve())
    except InputError:
        return None


def _yaml_files(folder: Path) -> list[Path]:
    found = []
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(f for f in folders if f not in _SKIPPED_FOLDERS and not f.startswith("."))
        found.extend(Path(current) / f for f in sorted(files) if f.endswith(_YAML_SUFFIXES))
    return found




def _check_readable(path: Path) -> None:
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise InputError(f"{path}: cannot read: permission denied")


def _guess_env(paths: list[Path], root: Path) -> str:
    names = set()
    for path in paths:
        parts = Path(relative(path, root)).parts
        for marker in ("overlays", "clusters", "rendered"):
            if marker in parts and parts.index(marker) + 1 < len(parts):
                names.add(parts[parts.index(marker) + 1])
                break
        else:
            names.add("")
    names.discard("base")
    return names.pop() if len(names) == 1 else ""


def plan(paths: list[Path], envs: list[str] | None) -> Plan:
    cwd = Path.cwd()
    if not paths:
        root = _find_root(cwd)
        if root is None:
            raise InputError(f"{cwd}: not inside a repository made by the template (no clusters/ and overlays/); "
                             "name the files or folders to validate")
        paths = [root]
    for path in paths:
        _check_readable(path)
    first = paths[0].resolve()
    root = _find_root(first) or _find_root(cwd) or cwd
    # The repository root, or clusters/<env>: render environments.
    if len(paths) == 1 and first.is_dir() and (first == root or first.parent == (root / "clusters").resolve()):
        chosen = envs or ([first.name] if first != root else None)
        sources = [p for top in ("clusters", "overlays") for p in _yaml_files(root / top)]
        return Plan(root, True, chosen, sources=sources)
    if envs:
        raise InputError("--env selects environments of a repository; it does not go with file or folder paths")
    result = Plan(root, False, env=_guess_env(paths, root))
    for path in paths:
        if path.is_file():
            if path.name in kustomize.KUSTOMIZATION_FILES:
                result.builds.append(path.parent)
            else:
                result.files.append(path)
            result.sources.append(path)
        elif kustomize.has_kustomization(path):
            result.builds.append(path)
            result.sources.extend(_yaml_files(path))
        else:
            for file in _yaml_files(path):
                folder = file.parent
                if kustomize.has_kustomization(folder):
                    if folder not in result.builds:
                        result.builds.append(folder)
                elif not any(folder.is_relative_to(b) for b in result.builds):
                    result.files.append(file)
                result.sources.append(file)
            if not result.builds and not result.files:
                raise InputError(f"{path}: no YAML files to validate")
    return result


# --- lint ---------------------------------------------------------------------------------


def lint(files: list[Path], root: Path, progress) -> list[Finding]:
    """yamllint with the repository's configuration; invalid YAML is an input error."""
    from yamllint import linter
    from yamllint.config import YamlLintConfig, YamlLintConfigError

    config_file = next((root / n for n in (".yamllint", ".yamllint.yaml", ".yamllint.yml") if (root / n).is_file()), None)
    try:
        config = YamlLintConfig(file=str(config_file)) if config_file else YamlLintConfig("extends: default")
    except (YamlLintConfigError, OSError) as error:
        raise InputError(f"{config_file}: invalid yamllint configuration: {error}") from None
    # Results depend on the text alone unless a rule ignores some paths; then on the name too.
    by_name = any(isinstance(c, dict) and c.get("ignore") for c in config.rules.values())
    findings, cache, checked = [], {}, 0
    for path in dict.fromkeys(p.resolve() for p in files):
        name = relative(path, root)
        if config.is_file_ignored(name):
            continue
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{name}: cannot read: {getattr(error, 'strerror', None) or error}") from None
        checked += 1
        key = (text, name if by_name else "")
        if key not in cache:
            cache[key] = list(linter.run(text, config, name))
        for problem in cache[key]:
            if problem.rule is None:   # yamllint reports a parse failure as a rule-less error
                raise InputError(f"{name}:{problem.line}: invalid YAML: {problem.desc.removeprefix('syntax error: ')}")
            findings.append(Finding("yaml-lint", None, f"{problem.desc} ({problem.rule})", severity=problem.level,
                                    file=name, line=problem.line))
    progress(f"yamllint: {checked} files, {len(findings)} problems")
    return findings


# --- load ---------------------------------------------------------------------------------


def _cluster_config_from(path: Path, root: Path) -> Manifest:
    _check_readable(path)
    if path.is_dir():
        objects = parse_stream(kustomize.build(path), relative(path, root))
    else:
        objects = read_file(path, root)
    configs = [m for m in objects if (m.group, m.kind) == EKSCTL]
    if len(configs) != 1:
        raise InputError(f"{path}: --cluster-config needs exactly one eksctl ClusterConfig, found {len(configs)}")
    return configs[0]


def kubernetes_version_of(cluster_config: Manifest | None, override: str | None) -> tuple[str, str]:
    """(version, where it came from)."""
    if override:
        return override, "--kubernetes-version"
    if cluster_config is None:
        return eks.DEFAULT_KUBERNETES_VERSION, "eksctl's default, as no ClusterConfig was given"
    version = str(cluster_config.metadata.get("version", "") or "")
    if version in ("", "auto"):
        return eks.DEFAULT_KUBERNETES_VERSION, "eksctl's default for metadata.version auto"
    if version == "latest":
        return eks.SUPPORTED_KUBERNETES_VERSIONS[-1], "the newest EKS version this template knows"
    return version, "the ClusterConfig"


def load(plan_: Plan, cluster_config_path: Path | None, kubernetes_version: str | None,
         progress) -> tuple[list[Scope], list[str]]:
    notes = []
    try:
        platform = settings.load(plan_.root) if (plan_.root / settings.FILE).is_file() else {}
    except InputError:
        platform = {}
    override = _cluster_config_from(cluster_config_path, plan_.root) if cluster_config_path else None
    if plan_.repository:
        environments = render.render_repository(plan_.root, plan_.envs, progress=progress, skip_missing=True)
        scopes = [Scope(e.name, e.objects, override or e.cluster_config, e.kustomizations, complete=True,
                        settings=platform) for e in environments]
    else:
        with ThreadPoolExecutor(max_workers=render.RENDER_WORKERS) as pool:
            built = list(pool.map(lambda folder: parse_stream(kustomize.build(folder), relative(folder, plan_.root)),
                                  plan_.builds))
        objects = [m for group in built for m in group]
        for file in plan_.files:
            objects.extend(read_file(file, plan_.root))
        objects = [m for m in objects if m.group != KUSTOMIZE_CONFIG_GROUP]
        configs = [m for m in objects if (m.group, m.kind) == EKSCTL]
        objects = [m for m in objects if (m.group, m.kind) != EKSCTL]
        if len(configs) > 1 and override is None:
            raise InputError(f"several ClusterConfigs among the inputs ({', '.join(sorted({m.file for m in configs}))}); "
                             "validate one environment at a time or give --cluster-config")
        for manifest in objects:
            manifest.env = plan_.env
        scopes = [Scope(plan_.env, objects, override or (configs[0] if configs else None), settings=platform)]
        progress(f"read {len(objects)} objects from {len(plan_.builds)} kustomizations and {len(plan_.files)} files")
        if not objects and scopes[0].cluster_config is None:
            raise InputError("nothing to validate: the inputs hold no Kubernetes objects")
    for scope in scopes:
        scope.kubernetes_version, origin = kubernetes_version_of(scope.cluster_config, kubernetes_version)
        if origin != "the ClusterConfig":
            notes.append(f"{scope.env or 'inputs'}: Kubernetes {scope.kubernetes_version} ({origin})")
    return scopes, notes


# --- schemas ------------------------------------------------------------------------------


def check_schemas(scopes: list[Scope], checker: SchemaChecker, progress) -> tuple[dict[int, list[Finding]], list[str]]:
    found: dict[int, list[Finding]] = {}
    notes = []
    checked = 0
    for index, scope in enumerate(scopes):
        scope_checker = checker.with_crds(scope.objects)
        version = schema_version(scope.kubernetes_version)
        if version != scope.kubernetes_version:
            notes.append(f"{scope.env or 'inputs'}: built-in kinds checked with the schemas of Kubernetes {version}, "
                         f"the nearest kubernetes-validate has to {scope.kubernetes_version}")
        findings = found.setdefault(index, [])
        for manifest in [*scope.objects, *([scope.cluster_config] if scope.cluster_config else [])]:
            checked += 1
            problems = scope_checker.check(manifest, version)
            if problems and removal(manifest.api_version, manifest.kind, scope.kubernetes_version):
                continue   # removed-api says it better
            findings.extend(Finding("schema-missing" if p.missing else "schema-invalid", manifest, p.message, p.path)
                            for p in problems)
    progress(f"schemas: {checked} objects checked")
    return found, notes


# --- the pipeline -------------------------------------------------------------------------


@dataclass
class Options:
    paths: list[Path] = field(default_factory=list)
    envs: list[str] | None = None
    cluster_config: Path | None = None
    schema_dir: Path | None = None
    kubernetes_version: str | None = None


def _schema_sources(root: Path) -> dict:
    for candidate in (root, Path(__file__).resolve().parents[2]):
        if (candidate / settings.FILE).is_file():
            return settings.load(candidate)["schemas"]
    raise InputError(f"{root}: no {settings.FILE} with the pinned schema URLs (run validate inside the repository)")


def evaluate(scopes: list[Scope], checker: SchemaChecker, locator: Locator, notes: list[str] = (),
             lint_findings: list[Finding] = (), progress=lambda line: None) -> runner.Result:
    """Schemas and rules over loaded scopes, settled into a result."""
    schema_findings, schema_notes = check_schemas(scopes, checker, progress)
    result = runner.Result(notes=[*notes, *schema_notes], environments=[s.env or "inputs" for s in scopes],
                           objects=sum(len(s.objects) + (1 if s.cluster_config else 0) for s in scopes))
    runner.settle(Scope("", []), list(lint_findings), locator, result)
    for index, scope in enumerate(scopes):
        findings, rule_notes = runner.check_scope(scope)
        result.notes.extend(rule_notes)
        runner.settle(scope, schema_findings.get(index, []) + findings, locator, result)
    progress(f"rules: {len(scopes)} environment{'s' if len(scopes) != 1 else ''} checked")
    runner.sort(result)
    return result


def validate(options: Options, progress=lambda line: None) -> runner.Result:
    plan_ = plan(options.paths, options.envs)
    sources = list(plan_.sources)
    if options.cluster_config is not None and options.cluster_config.is_file():
        sources.append(options.cluster_config)
    with ThreadPoolExecutor(max_workers=1) as background:
        # kustomize runs in subprocesses while this thread lints: both cores stay busy.
        loading = background.submit(load, plan_, options.cluster_config, options.kubernetes_version, progress)
        try:
            lint_findings = lint(sources, plan_.root, progress)
        except BaseException:
            loading.cancel()
            raise
        scopes, notes = loading.result()
    checker = SchemaChecker(SchemaStore(_schema_sources(plan_.root), schema_dir=options.schema_dir))
    return evaluate(scopes, checker, Locator(plan_.root), notes, lint_findings, progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="validate", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="what to validate (default: the repository)")
    parser.add_argument("--env", action="append", help="environment of the repository to validate (repeatable)")
    parser.add_argument("--format", default="text", choices=sorted({*report.FORMATS, *report.RULE_FORMATS}),
                        help="text (default), json or github; with --list-rules: text, json or markdown")
    parser.add_argument("--cluster-config", type=Path, metavar="FILE",
                        help="eksctl ClusterConfig (a file, or a kustomization folder that renders one)")
    parser.add_argument("--schema-dir", type=Path, metavar="DIR",
                        help=f"local copy of the pinned schemas (crds/, eksctl/); default ${SCHEMA_DIR_VARIABLE} "
                             "or a download cache")
    parser.add_argument("--kubernetes-version", metavar="X.Y", help="Kubernetes version when no ClusterConfig says it")
    parser.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--list-rules", action="store_true", help="print the rule catalogue and exit")
    args = parser.parse_args(argv)

    if args.list_rules:
        if args.format not in report.RULE_FORMATS:
            parser.error(f"--list-rules prints text, json or markdown, not {args.format}")
        sys.stdout.write(report.list_rules(args.format))
        return 0
    if args.format not in report.FORMATS:
        parser.error(f"--format {args.format} only goes with --list-rules")
    if args.kubernetes_version and not version_key(args.kubernetes_version):
        parser.error(f"--kubernetes-version {args.kubernetes_version}: expected a version such as 1.34")
    if args.schema_dir and not args.schema_dir.is_dir():
        print(f"validate: {args.schema_dir}: --schema-dir is not a folder", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        if not args.quiet:
            print(f"validate: {line}", file=sys.stderr, flush=True)

    options = Options(args.paths, args.env, args.cluster_config, args.schema_dir, args.kubernetes_version)
    try:
        result = validate(options, progress)
    except InputError as error:
        print(f"validate: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a bug here must not pass for findings (exit 1) nor print a traceback
        if os.environ.get(runner.DEBUG_VARIABLE):
            raise
        print(f"validate: internal error: {type(error).__name__}: {error} (set {runner.DEBUG_VARIABLE}=1 for the "
              "traceback)", file=sys.stderr)
        return 2
    sys.stdout.write(report.FORMATS[args.format](result))
    return result.exit_code(args.strict)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:   # the reader went away (`scripts/validate | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
