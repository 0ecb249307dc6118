# nodemaint — see README.md. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := build

GO ?= go
CONTROLLER_TOOLS_VERSION ?= v0.23.0
CONTROLLER_GEN ?= $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

OUTPUT := _output
CLUSTER_DIR := $(OUTPUT)/cluster
NODES ?= 5
export KUBECONFIG ?= $(CURDIR)/$(CLUSTER_DIR)/kubeconfig

# The version and commit the binaries carry (--version): a release tag, else v0.0.0-dev.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo -dirty)
# make build's binaries are built as the release's and the image's (static, -trimpath, stripped),
# so that make image reuses their compiled packages; STRIP= keeps the symbols.
STRIP ?= -s -w
LDFLAGS := -X github.com/nodemaint/nodemaint/internal/version.version=$(VERSION) -X github.com/nodemaint/nodemaint/internal/version.commit=$(COMMIT)

# The Kubernetes control plane and kwok, built from their Go modules once per machine.
CONTROL_PLANE = $(shell hack/control-plane.sh)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build bin/nodemaint-controller and bin/kubectl-maintenance (and its completion for kubectl, bin/kubectl_complete-maintenance): static and stripped, as released (STRIP= keeps the symbols, for a debugger).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(STRIP) $(LDFLAGS)" -o bin/ ./cmd/nodemaint-controller ./cmd/kubectl-maintenance
	cp hack/plugin/kubectl_complete-maintenance bin/

.PHONY: release
release: ## The release in _output/release/ (VERSION=v0.2.0): both binaries for linux and darwin, amd64 and arm64, checksums, the krew manifest, the controller's image, the Helm chart package and install.yaml.
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" GO="$(GO)" hack/release.sh

# The platforms of make image.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: image
image: ## The controller's OCI image, without a container engine: multi-platform (IMAGE_PLATFORMS), tagged VERSION, as an OCI image layout in _output/image.
	$(GO) run ./hack/image -version "$(VERSION)" -commit "$(COMMIT)" -platforms "$(IMAGE_PLATFORMS)" -out $(OUTPUT)/image

.PHONY: generate
generate: ## Regenerate deepcopy, CRDs and RBAC from the Go markers.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/crd-bounds config/crd/bases/nodemaint.dev_nodemaintenances.yaml config/crd/bases/nodemaint.dev_drainrules.yaml
	$(CONTROLLER_GEN) rbac:roleName=nodemaint-controller paths=./internal/... output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh
	@# Cluster API's Machine and Cluster CRDs, from its Go module (the version go.mod requires), for the e2e tests.
	rm -rf $(OUTPUT)/cluster-api-crds
	$(CONTROLLER_GEN) crd paths=sigs.k8s.io/cluster-api/api/core/v1beta2 output:crd:dir=$(OUTPUT)/cluster-api-crds
	cp $(OUTPUT)/cluster-api-crds/cluster.x-k8s.io_machines.yaml $(OUTPUT)/cluster-api-crds/cluster.x-k8s.io_clusters.yaml test/e2e/testdata/cluster-api/

.PHONY: helm
helm: ## Build (once) helm from its Go module; print its path.
	@hack/tools.sh helm

.PHONY: control-plane
control-plane: ## Build (once) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok.
	@hack/control-plane.sh

##@ Test

.PHONY: test
test: test-deps verify test-alerts test-unit test-fuzz test-e2e ## Every test: generated files, alerts, unit, integration (envtest) and end-to-end.

.PHONY: test-deps
test-deps: ## Install what make test needs beside Go and make (tmux, promtool) as root with apt-get; otherwise name the command. Builds staticcheck (hack/tools.sh).
	@hack/test-deps.sh
	@hack/tools.sh staticcheck >/dev/null

.PHONY: verify
verify: verify-chart ## Fail when gofmt, go vet, staticcheck, the size limits (hack/sizecheck), the generated files or the Helm chart are not clean.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	"$$(hack/tools.sh staticcheck)" ./...
	$(GO) run ./hack/sizecheck
	hack/verify-generated.sh

.PHONY: test-alerts
test-alerts: ## Unit tests of the Prometheus alerts (promtool test rules; Debian package prometheus).
	hack/test-alerts.sh

.PHONY: verify-chart
verify-chart: ## helm lint --strict (values.schema.json) and helm template of the chart with each non-default toggle.
	hack/verify-chart.sh

# The oldest Kubernetes the CRDs and admission policies need (README.md, Install).
MIN_KUBE_VERSION ?= v1.32.13

.PHONY: verify-min-kube
verify-min-kube: ## Install the CRDs and admission policies (config/ and the chart's) into the kube-apiserver of the oldest Kubernetes the README names, its kube-controller-manager type-checking the policies (MIN_KUBE_VERSION; built once from its Go module, minutes on 2 cores, so not part of make test).
	MIN_KUBE_VERSION=$(MIN_KUBE_VERSION) KUBEBUILDER_ASSETS="$$(MIN_KUBE_VERSION=$(MIN_KUBE_VERSION) hack/min-kube.sh)" HELM="$$(hack/tools.sh helm)" $(GO) test -tags minkube -count=1 -v ./test/minkube/

.PHONY: test-unit
test-unit: ## Unit and integration tests (envtest: a real kube-apiserver and etcd).
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/)

# Every fuzz target, FUZZTIME each: `go test -fuzz` takes one target per package at a time.
# FUZZTIME is an execution count, not a duration: with a duration, Go before 1.27 can fail a
# target with a bare "context deadline exceeded" when the deadline races a busy worker
# (golang/go#75804), which is a flake, not a crasher. A count has no deadline to race.
FUZZ_TARGETS := internal/drain:FuzzClassify internal/drain:FuzzPlanAndBlocked \
	internal/maintenance:FuzzTargeted internal/maintenance:FuzzEntries internal/maintenance:FuzzIntent \
	internal/maintenance:FuzzSelector internal/controller/node/nodedecide:FuzzDecide internal/rollout:FuzzDecide \
	internal/controller/nodemaintenance/nodemaintenancedecide:FuzzDecide \
	internal/drainpreflight:FuzzRun internal/controller/eviction/evictiondecide:FuzzDecide internal/responder:FuzzObserve \
	internal/controller/deployment/deploymentdecide:FuzzDecide internal/controller/machine/machinedecide:FuzzDecide \
	internal/controller/protocol:FuzzWrites
FUZZTIME ?= 10000x

.PHONY: test-fuzz
test-fuzz: ## A short fuzz run of each fuzz target (FUZZTIME=10000x executions each); seed corpora in testdata/fuzz.
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($${t%%:*}, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) ./$${t%%:*} || exit 1; \
	done

# go test runs packages in the order they are named, -p (2 here) at a time: the longest e2e
# packages first, so that none of them starts last and runs alone while the other slot idles
# (go test runs a package named twice once). The unit packages keep both slots busy as listed.
E2E_FIRST := ./test/e2e/chaos/ ./test/e2e/responder/ ./test/e2e/drain/ ./test/e2e/combinations/ \
	./test/e2e/maintenance/ ./test/e2e/ ./test/e2e/plugin/ ./test/e2e/realnode/
E2E_PKGS ?= $(E2E_FIRST) ./test/...

# The real node's tests need root (cgroups, mounts, network namespaces): as root (CI) make test
# runs them; as anyone else it runs everything else and says so on its last line.
ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1)
REAL_NODE_NEEDS_ROOT := The real node's tests (test/e2e/realnode) need root and did not run: sudo make test-real-node

# The release the end-to-end tests install and read: make release's files (chart package,
# install.yaml, the image) for this machine's platform alone. test/e2e/realnode installs it on the
# real node, pulled from a registry; test/e2e/install reads and runs its image.
E2E_RELEASE := $(OUTPUT)/e2e-release

.PHONY: e2e-release
e2e-release:
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" GO="$(GO)" OUT="$(E2E_RELEASE)" PLATFORMS="linux/$$($(GO) env GOARCH)" IMAGE_PLATFORMS="linux/$$($(GO) env GOARCH)" hack/release.sh >/dev/null

.PHONY: test-e2e
test-e2e: build e2e-release ## End-to-end tests on a local cluster of their own (real control plane, kwok kubelets; test/e2e/realnode's with a real kubelet and containerd, as root only, the release installed there); then the drain's and the responder's again under the EvictionRequest API.
	$(if $(ROOT),NODEMAINT_REAL_NODE=1 NODEMAINT_REAL_NODE_BIN_DIR="$(REAL_NODE_BIN)") NODEMAINT_RELEASE="$(CURDIR)/$(E2E_RELEASE)" NODEMAINT_IMAGE="$(CURDIR)/$(E2E_RELEASE)/image" NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" HELM="$$(hack/tools.sh helm)" $(GO) test -count=1 -timeout 40m $(E2E_PKGS) $(E2E_ARGS)
	EVICTION_REQUEST_API=true NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -count=1 -p 2 -timeout 15m $(E2E_EVICTION_REQUEST_PKGS) $(E2E_ARGS)
	@$(if $(ROOT),true,echo "$(REAL_NODE_NEEDS_ROOT)")

# The drain's and the responder's e2e tests run a second time on clusters serving the
# EvictionRequest API (KEP-4563), where nodemaint asks through EvictionRequests: the whole
# packages, each test saying with framework.RequireProtocols under which protocols it runs (the
# drain's whose outcome must not depend on the protocol and the responder's proofs of issue 19
# name both; those about EvictionRequests alone skip in the first pass). -p 2: both packages'
# clusters at once.
E2E_EVICTION_REQUEST_PKGS ?= ./test/e2e/drain/ ./test/e2e/responder/

.PHONY: test-real-node needs-root
test-real-node: needs-root build e2e-release ## The real node's e2e tests alone (test/e2e/realnode, part of make test-e2e as root), as root: a kubelet, containerd and runc beside the kwok nodes drain, reboot and evict for real, and the release (make release's chart package and install.yaml) runs there as users install it.
	NODEMAINT_REAL_NODE=1 NODEMAINT_REAL_NODE_BIN_DIR="$(REAL_NODE_BIN)" NODEMAINT_RELEASE="$(CURDIR)/$(E2E_RELEASE)" NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" HELM="$$(hack/tools.sh helm)" $(GO) test -count=1 -v -timeout 15m ./test/e2e/realnode/ $(E2E_ARGS)

# As anyone but root, test-real-node stops before building anything and names the command.
needs-root:
	@$(if $(ROOT),true,echo "$(REAL_NODE_NEEDS_ROOT)" >&2; exit 1)

.PHONY: test-scale
test-scale: build ## The scale e2e test at full size: 200 nodes, 5,000 pods, 20 nodes maintained.
	NODEMAINT_E2E_SCALE=full NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -count=1 -v -timeout 30m ./test/e2e/scale/

.PHONY: test-chaos
test-chaos: build ## The chaos e2e test, long version: 41 aimed leader kills (failovers), an API server restart, overlapping maintenances.
	NODEMAINT_CHAOS=long NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -count=1 -v -timeout 30m -run 'TestChaos$$' ./test/e2e/chaos/ $(E2E_ARGS)

.PHONY: test-combinations
test-combinations: build ## The combinations e2e test, long version: 104 scenarios (4 batches of 26) of overlapping maintenances drawn from the whole spec space, both protocols, leader kills; NODEMAINT_COMBINATIONS_SEED replays.
	NODEMAINT_COMBINATIONS=long NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -count=1 -v -timeout 80m -run 'TestCombinations$$' ./test/e2e/combinations/ $(E2E_ARGS)

.PHONY: test-eviction-heartbeat
test-eviction-heartbeat: ## KEP-4563: a responder that stops heartbeating is passed over after the API server's 20-minute deadline (about 21 minutes).
	NODEMAINT_SLOW_TESTS=1 KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -count=1 -v -timeout 40m -run 'TestSilentResponderPassedOver$$' ./internal/controller/eviction/

.PHONY: test-load
test-load: build ## The load e2e test: 50 NodeMaintenances created at once over 500 nodes.
	NODEMAINT_E2E_LOAD=1 NODEMAINT_BIN_DIR="$(CURDIR)/bin" KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -count=1 -v -timeout 30m -run 'TestLoad$$' ./test/e2e/chaos/ $(E2E_ARGS)

##@ Local cluster

# REAL_NODES=1 adds a real node to the local cluster: a kubelet, containerd, runc and CNI plugins
# built from their Go modules (hack/real-node.sh, once per machine), running pods for real. It
# needs root.
REAL_NODES ?= 0
REAL_NODE_BIN = $(shell hack/real-node.sh)

.PHONY: cluster-up
cluster-up: ## Start the local cluster in the background (NODES=5, REAL_NODES=0; REAL_NODES=1 adds a real kubelet and containerd, as root); kubeconfig at _output/cluster/kubeconfig.
	$(GO) run ./hack/localcluster up --dir $(CLUSTER_DIR) --nodes $(NODES) --bin-dir "$(CONTROL_PLANE)" $(if $(filter-out 0,$(REAL_NODES)),--real-nodes $(REAL_NODES) --node-bin-dir "$(REAL_NODE_BIN)")

.PHONY: real-node
real-node: ## Build (once) the real node's kubelet, containerd, runc and CNI plugins.
	@hack/real-node.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster, every process it started, and the demo's controller.
	@if [ -f $(CLUSTER_DIR)/run/nodemaint-controller.pid ]; then kill $$(cat $(CLUSTER_DIR)/run/nodemaint-controller.pid) 2>/dev/null || true; rm -f $(CLUSTER_DIR)/run/nodemaint-controller.pid; fi
	$(GO) run ./hack/localcluster down --dir $(CLUSTER_DIR)

.PHONY: cluster-status
cluster-status: ## Show what runs of the local cluster.
	$(GO) run ./hack/localcluster status --dir $(CLUSTER_DIR)

# ARGS are passed to the controller; one local process needs no leader election.
ARGS ?= --leader-elect=false

.PHONY: run
run: build ## Run the controller against $$KUBECONFIG (default: the local cluster, started if needed; CRDs applied).
	@if [ "$(KUBECONFIG)" = "$(CURDIR)/$(CLUSTER_DIR)/kubeconfig" ] && [ ! -f "$(KUBECONFIG)" ]; then $(MAKE) cluster-up; fi
	@if [ "$(KUBECONFIG)" = "$(CURDIR)/$(CLUSTER_DIR)/kubeconfig" ]; then "$(CONTROL_PLANE)/kubectl" apply --server-side -f config/crd/bases >/dev/null; fi
	bin/nodemaint-controller --kubeconfig "$(KUBECONFIG)" $(ARGS)

.PHONY: demo
demo: ## Bring up the local cluster, run the controller and a maintenance, and show its progress.
	hack/demo.sh

# BENCH_ARGS go to test/bench: -large adds scenario L and the idle memory on 5,000 nodes,
# -scenarios S,B,M,P picks scenarios.
BENCH_ARGS ?=

.PHONY: bench
bench: build ## Benchmarks against kubectl drain (S, B, M, P; BENCH_ARGS=-large adds L); JSON under _output/bench/, figures in docs/benchmarks.md.
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) run ./test/bench -write-docs $(BENCH_ARGS)

# FLEET_ARGS go to test/bench after scenario F's: -fleet-nodes 100 scales the fleet down to 100
# nodes and 1,000 pods, -methods nodemaint runs nodemaint alone.
FLEET_ARGS ?=

.PHONY: bench-fleet
bench-fleet: build ## Scenario F (not in make bench): 1,000 nodes and 10,000 pods rolled 10% at a time, nodemaint against a reboot daemon's loop at 100 at once; figures in docs/benchmarks.md.
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) run ./test/bench -scenarios F -methods nodemaint,kubectl-drain -write-docs $(FLEET_ARGS)

.PHONY: clean
clean: cluster-down ## Stop the local cluster; remove build output (not the control-plane cache).
	rm -rf bin $(OUTPUT)
