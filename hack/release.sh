#!/usr/bin/env bash
# Builds the release of nodemaint into _output/release/ (`make release`):
#   <binary>_<version>_<os>_<arch>.tar.gz for nodemaint-controller and kubectl-maintenance on
#   linux and darwin, amd64 and arm64 (CGO_ENABLED=0, -trimpath, version and commit in
#   internal/version), each with the LICENSE (the plugin's with kubectl_complete-maintenance, its
#   completion for kubectl), checksums.txt (sha256sum format) and maintenance.yaml, the krew manifest;
#   the controller's OCI image (image/, an OCI image layout for linux/amd64 and linux/arm64 tagged
#   with the version: hack/image), the Helm chart (nodemaint-<version>.tgz, its appVersion the
#   version, so that it deploys that image) and install.yaml (config/default, the image tagged
#   with the version: hack/installer).
# VERSION (a git tag: v0.2.0), COMMIT and PLATFORMS come from the environment (the Makefile);
# OUT (default _output/release) and IMAGE_PLATFORMS (default linux/amd64,linux/arm64) let the
# end-to-end tests make a release for this machine alone, which test/e2e/realnode installs.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${VERSION:?VERSION is needed, e.g. v0.2.0}"
: "${COMMIT:?COMMIT is needed}"
PLATFORMS=${PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"}
IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-linux/amd64,linux/arm64}
GO=${GO:-go}
out=${OUT:-_output/release}
ldflags="-s -w -X github.com/nodemaint/nodemaint/internal/version.version=${VERSION} -X github.com/nodemaint/nodemaint/internal/version.commit=${COMMIT}"
# The archives' files carry the commit's time, so that a release is reproducible.
mtime=$(git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)

[ -f LICENSE ] || { echo "LICENSE missing: every archive carries it" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  echo "build ${VERSION} ${os}/${arch}"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch $GO build -trimpath -ldflags "$ldflags" -o "$dir/" ./cmd/nodemaint-controller ./cmd/kubectl-maintenance
  cp hack/plugin/kubectl_complete-maintenance "$dir/"
  for bin in nodemaint-controller kubectl-maintenance; do
    files=("$bin" LICENSE)
    [ "$bin" = kubectl-maintenance ] && files+=(kubectl_complete-maintenance)
    cp LICENSE "$dir/"
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
      -C "$dir" -czf "$out/${bin}_${VERSION}_${os}_${arch}.tar.gz" "${files[@]}"
  done
  rm -rf "$dir"
done
$GO run ./hack/image -version "$VERSION" -commit "$COMMIT" -platforms "$IMAGE_PLATFORMS" -out "$out/image"
$GO run ./hack/installer -version "$VERSION" > "$out/install.yaml"
helm=$(hack/tools.sh helm)
"$helm" package charts/nodemaint --version "${VERSION#v}" --app-version "$VERSION" --destination "$out"
(cd "$out" && sha256sum -- *.tar.gz *.tgz install.yaml > checksums.txt)
$GO run ./hack/krew -version "$VERSION" -checksums "$out/checksums.txt" > "$out/maintenance.yaml"
echo "release ${VERSION} (${COMMIT}) in $out:"
ls -l "$out"
