#!/usr/bin/env bash
# Build a Go command at a pinned release from the Go module proxy into a cache outside the repository: the
# tools the benches and tests compare the tool with (kubeconform, the Helm CLI).
# Usage: tools/build-go-tool.sh PACKAGE@VERSION OUTPUT [VERSION_VARIABLE]
#
# A plain `go install PACKAGE@VERSION` (into a temporary GOBIN), which works for modules whose go.mod has
# no replace or exclude line (kubeconform v0.8.0 and helm v4.2.4 have none; flux2 does, hence
# tools/build-flux.sh). VERSION_VARIABLE, when given, is set to VERSION with -X, as the project's own
# release build does (e.g. main.version for kubeconform, helm.sh/helm/v4/internal/version.version for helm).
set -euo pipefail
target=$1
output=$2
variable=${3:-}
if [ -x "$output" ]; then
  exit 0
fi
package=${target%@*}
version=${target##*@}
if [ "$package" = "$target" ] || [ -z "$version" ]; then
  echo "build-go-tool: give PACKAGE@VERSION, not $target" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ldflags="-s -w"
if [ -n "$variable" ]; then
  ldflags="$ldflags -X $variable=$version"
fi
echo "build-go-tool: building $package@$version (minutes on a cold Go cache)" >&2
# From inside the empty folder, so no go.mod or go.work around the caller changes what is built.
(cd "$work" && GOBIN="$work/bin" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" "$target")
mkdir -p "$(dirname "$output")"
mv "$work/bin/$(basename "$package")" "$output.part"
mv "$output.part" "$output"
echo "build-go-tool: $output" >&2
