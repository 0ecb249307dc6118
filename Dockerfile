# syntax=docker/dockerfile:1
# nodemaint-controller: a static binary on distroless, run as the nonroot user (65532).
#
#   docker build --build-arg VERSION=$(git describe --tags) --build-arg COMMIT=$(git rev-parse HEAD) -t ghcr.io/nodemaint/nodemaint-controller:dev .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
WORKDIR /src

# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -buildid= -X github.com/nodemaint/nodemaint/internal/version.version=${VERSION} -X github.com/nodemaint/nodemaint/internal/version.commit=${COMMIT}" -o /out/nodemaint-controller ./cmd/nodemaint-controller

FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.source="https://github.com/nodemaint/nodemaint" \
      org.opencontainers.image.title="nodemaint-controller" \
      org.opencontainers.image.description="Declarative node maintenance for Kubernetes (KEP-4212)"
COPY --from=builder /out/nodemaint-controller /nodemaint-controller
USER 65532:65532
ENTRYPOINT ["/nodemaint-controller"]
