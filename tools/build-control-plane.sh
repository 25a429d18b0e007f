#!/usr/bin/env bash
# Build the local control plane the live-cluster tests start (and scripts/simulate uses) into a cache
# outside the repository. Usage: tools/build-control-plane.sh OUTPUT_DIR
#
# OUTPUT_DIR gets etcd, kube-apiserver, kube-scheduler, kwok and mpi-operator. kube-apiserver and
# kube-scheduler come from k8s.io/kubernetes, whose go.mod replaces its staging repositories with local
# folders, so `go install` refuses it: tools/control-plane/kubernetes is a small module with the staging
# `replace` lines and two main packages. etcd's own main module has replace lines too:
# tools/control-plane/etcd builds its server package. kwok installs as it is. The MPI operator is built
# from a copy of its module: `go install` asks the proxy for the module's version list, which the proxy
# here refuses for github.com/kubeflow/mpi-operator (the version itself downloads).
# Versions: Kubernetes as go.mod there says (the default bake's minor), etcd as kubeadm pins for that
# minor (k8s.io/kubernetes v1.34.4 cmd/kubeadm/app/constants/constants.go: 3.6.5), the MPI operator as
# the template pins it. Official release binaries work as well: point GITOPS_CONTROL_PLANE_BIN at them.
set -euo pipefail
output=$1
here=$(cd "$(dirname "$0")" && pwd)
KWOK_VERSION=v0.7.0
MPI_OPERATOR_VERSION=v0.8.2
binaries=(etcd kube-apiserver kube-scheduler kwok mpi-operator)
missing=0
for name in "${binaries[@]}"; do
  [ -x "$output/$name" ] || missing=1
done
if [ "$missing" = 0 ]; then
  exit 0
fi
mkdir -p "$output"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
start=$(date +%s)
step() { echo "build-control-plane: $* ($(($(date +%s) - start)) s)" >&2; }

step "kube-apiserver and kube-scheduler from k8s.io/kubernetes (about 10 minutes on a cold Go cache)"
# The version the servers report (/version), as the release build stamps it.
version=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9.]*\)$/\1/p' "$here/control-plane/kubernetes/go.mod")
stamp="-X k8s.io/component-base/version.gitVersion=v$version"
stamp="$stamp -X k8s.io/component-base/version.gitMajor=${version%%.*}"
minor=${version#*.}
stamp="$stamp -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
(cd "$here/control-plane/kubernetes" && go build -trimpath -ldflags "$stamp" -o "$work/" ./cmd/kube-apiserver ./cmd/kube-scheduler)
step "etcd"
(cd "$here/control-plane/etcd" && go build -trimpath -o "$work/etcd" .)
step "kwok $KWOK_VERSION"
GOBIN="$work" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
step "mpi-operator $MPI_OPERATOR_VERSION"
module=github.com/kubeflow/mpi-operator
source_dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$MPI_OPERATOR_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp -r "$source_dir" "$work/mpi-operator-source"
chmod -R u+w "$work/mpi-operator-source"
(cd "$work/mpi-operator-source" && GOFLAGS=-mod=mod go build -trimpath -o "$work/mpi-operator" ./cmd/mpi-operator)
for name in "${binaries[@]}"; do
  mv "$work/$name" "$output/$name"
done
step "done: $output"
