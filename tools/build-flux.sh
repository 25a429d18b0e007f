#!/usr/bin/env bash
# Build the Flux CLI at a pinned release into a cache outside the repository, for the tests that compare
# scripts/render with `flux build kustomization`. Usage: tools/build-flux.sh VERSION OUTPUT
#
# `go install github.com/fluxcd/flux2/v2/cmd/flux@VERSION` is refused (flux2's go.mod has a replace
# line), and cmd/flux embeds manifests/*.yaml that its release pipeline generates (bootstrap's
# controller manifests), which the module does not ship. So: copy the module source out of Go's module
# cache, put one placeholder manifest where the embed looks (only `flux install` and `flux bootstrap`
# read them; `flux build` does not), and build it as the main module.
set -euo pipefail
version=$1
output=$2
if [ -x "$output" ]; then
  exit 0
fi
module=github.com/fluxcd/flux2/v2
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
echo "build-flux: downloading $module@$version" >&2
source_dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$source_dir" ]; then
  echo "build-flux: go mod download gave no source folder for $module@$version" >&2
  exit 1
fi
cp -r "$source_dir" "$work/flux2"
chmod -R u+w "$work/flux2"
mkdir -p "$work/flux2/cmd/flux/manifests"
echo "# placeholder: bootstrap manifests are not needed to build kustomizations" > "$work/flux2/cmd/flux/manifests/placeholder.yaml"
echo "build-flux: building flux $version (a few minutes on a cold Go cache)" >&2
mkdir -p "$(dirname "$output")"
(cd "$work/flux2" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-X main.VERSION=${version#v}" -o "$output.part" ./cmd/flux)
mv "$output.part" "$output"
echo "build-flux: $output" >&2
