# dra-operators: see README.md. `make run` and `make test` are the two entry points.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# K8S_VERSION=v1.36.3: every component at that version (devcluster/controlplane/versions/ lists the
# older ones the devcluster builds; empty: the newest, devcluster/controlplane/go.mod).
K8S_VERSION ?=
# PROFILE=defaults: upstream's default gates and no --runtime-config, as on managed clusters;
# lab (the default): the newest version's alpha DRA gates and APIs on.
PROFILE ?=
UPSTREAM_DRA ?=
# WORKLOAD_CLAIMS=1: the DRAWorkloadResourceClaims and GenericWorkload gates on every component and
# the PodGroup API (scheduling.k8s.io/v1beta1) served; the e2e tests marked workload_claims run.
WORKLOAD_CLAIMS ?=
FAKE_NODES ?=
# NODE=fake: a cluster of fake nodes only (no kubelet, containerd or images; pods never start).
NODE ?=
# SERVICES=1: pods reach the API server and Services (kube-proxy), to install manifests/ onto the node.
SERVICES ?=
BINDING_TIMEOUT ?=
PYTEST_ARGS ?=
DEMO ?=

CLUSTER_FLAGS := $(if $(K8S_VERSION),--k8s-version $(K8S_VERSION)) $(if $(PROFILE),--profile $(PROFILE)) \
	$(if $(UPSTREAM_DRA),--upstream-dra) $(if $(WORKLOAD_CLAIMS),--workload-claims) \
	$(if $(FAKE_NODES),--fake-nodes $(FAKE_NODES)) \
	$(if $(NODE),--node $(NODE)) $(if $(SERVICES),--services) \
	$(if $(BINDING_TIMEOUT),--binding-timeout $(BINDING_TIMEOUT))
VERSION_FLAGS := $(if $(K8S_VERSION),--k8s-version $(K8S_VERSION)) $(if $(PROFILE),--profile $(PROFILE))

# Each phase of `make test` runs under its own hard limit (seconds), inside CI's 90 minutes.
LIMIT_VENV := 600
LIMIT_UNIT := 300
LIMIT_DOCS := 120
LIMIT_DIST := 900
LIMIT_BIN := 1800
LIMIT_NODE := 1200
LIMIT_E2E := 4200
LIMIT_E2E_WORKLOAD := 900
LIMIT_E2E_VERSIONS := 1200
LIMIT_CONFORMANCE_CI := 1200
LIMIT_CONFORMANCE := 7200
# Parallel ginkgo processes of upstream's suite: most specs wait for the kubelet, not the CPU.
CONFORMANCE_PROCS ?= 4

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,lint,bench,docs,release]'
	touch $@

.PHONY: venv
venv: $(STAMP) ## create the virtualenv with every Python dependency

.PHONY: lint
lint: $(STAMP) ## ruff (lint and format check), and the layer contracts of pyproject.toml (lint-imports)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

.PHONY: docs
docs: $(STAMP) ## the documentation site into test-artifacts/site (mkdocs.yml; --strict: a link to a missing page, file or anchor fails)
	NO_MKDOCS_2_WARNING=1 timeout $(LIMIT_DOCS) $(VENV)/bin/mkdocs build --strict

.PHONY: typecheck
typecheck: $(STAMP) ## mypy --strict
	$(VENV)/bin/mypy operators devcluster e2e tests demo conftest.py scripts/docs_hooks.py

.PHONY: test-unit
test-unit: $(STAMP) ## unit tests (no cluster)
	timeout $(LIMIT_UNIT) $(PY) -m pytest -m unit -q --durations=15 tests $(PYTEST_ARGS)

.PHONY: dist
dist: $(STAMP) ## the Python distributions (dra-operators, and kubectl-dra alone) and the plugin's krew archive and manifest, into dist/
	timeout $(LIMIT_DIST) $(PY) -m devcluster dist

.PHONY: dist-check
dist-check: $(STAMP) ## make dist, then twine check --strict of the four Python distributions it built
	timeout $(LIMIT_DIST) $(PY) -m devcluster dist --check

.PHONY: test-dist
test-dist: dist-check ## make dist-check, then kubectl-dra installed into new virtualenvs from PyPI, with pip and through its krew archive
	timeout $(LIMIT_DIST) $(PY) -m pytest -m dist -q --durations=5 tests $(PYTEST_ARGS)

.PHONY: k8s-bin
k8s-bin: $(STAMP) ## build or reuse kube-apiserver, scheduler, controller-manager, kubectl, etcd (K8S_VERSION=...)
	timeout $(LIMIT_BIN) $(PY) -m devcluster build $(if $(K8S_VERSION),--k8s-version $(K8S_VERSION))

.PHONY: node-bin
node-bin: $(STAMP) ## the real node's parts: Debian packages (as root), containerd 2, base/pause/operator images (the operator's for arm64 too, under qemu)
	timeout $(LIMIT_NODE) $(PY) -m devcluster build-node

.PHONY: tools-bin
tools-bin: $(STAMP) ## build or reuse helm and oras (Go modules helm.sh/helm/v4 and oras.land/oras, pinned), for the chart's tests and the release
	timeout $(LIMIT_BIN) $(PY) -m devcluster build-tools

.PHONY: release-artifacts
release-artifacts: $(STAMP) ## the operator image (amd64 and arm64, one index), its SBOM and the packaged chart into dist/, pushed to the devcluster's registry when one runs, the SBOM attached to the image (RELEASE.md)
	timeout $(LIMIT_NODE) $(PY) -m devcluster release-artifacts

.PHONY: constraints
constraints: $(STAMP) ## pin constraints.txt to the versions in .venv (after the tiers pass with them)
	{ sed -n '/^#/p' constraints.txt; $(PY) -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The operator image installs exactly these, each checked against its hash (pip --require-hashes):
# the runtime dependencies at constraints.txt's versions, with pip and setuptools of image.in.
.PHONY: image-lock
image-lock: $(STAMP) ## regenerate requirements/image.txt (the image's hash-locked dependencies) from constraints.txt
	CUSTOM_COMPILE_COMMAND="make image-lock" $(VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe \
		--strip-extras --no-emit-index-url --no-emit-find-links --constraint constraints.txt \
		--output-file requirements/image.txt pyproject.toml requirements/image.in

.PHONY: chart-readme
chart-readme: $(STAMP) ## rewrite the values table of charts/dra-operators/README.md from values.yaml and values.schema.json
	$(PY) -m devcluster chart-readme

.PHONY: k8s-gomod
k8s-gomod: $(STAMP) ## regenerate devcluster/controlplane/go.mod at K8S_VERSION=vX.Y.Z (OLDER=1: versions/<version>.mod beside it)
	$(PY) -m devcluster gomod --k8s-version $(K8S_VERSION) $(if $(OLDER),--older)

# The second pass: the PodGroup claims need their gates and API on every component, so their
# tests get devclusters of their own; those tests use fake nodes only, so no real node starts.
.PHONY: test-e2e
test-e2e: k8s-bin node-bin tools-bin ## e2e tests on private devclusters (started and stopped by pytest) in lanes, then the workload claims tests on devclusters of their own
	scripts/e2e-lanes $(LIMIT_E2E) $(PY) -m pytest -m "e2e and not benchmark" -q --durations=15 e2e $(PYTEST_ARGS)
	timeout $(LIMIT_E2E_WORKLOAD) $(PY) -m pytest -m "e2e and workload_claims and not benchmark" \
		--e2e-workload-claims --e2e-node=fake -q --durations=15 e2e $(PYTEST_ARGS)

# The version pass: the tests marked versions on devclusters of another version or profile. CI's
# older version is the oldest supported one, with upstream's defaults (docs/install.md).
CI_OLDER_VERSION := v1.35.4
MATRIX := v1.35.4:defaults v1.36.3:defaults v1.37.2:defaults
# Upstream's suite at the older versions, each against its in-tree baseline (the newest runs it in
# make test, on the lab profile).
CONFORMANCE_MATRIX := v1.35.4:defaults v1.36.3:defaults

.PHONY: test-e2e-versions
test-e2e-versions: node-bin tools-bin ## the version pass on CI_OLDER_VERSION with upstream's default settings
	timeout $(LIMIT_BIN) $(PY) -m devcluster build --k8s-version $(CI_OLDER_VERSION)
	timeout $(LIMIT_E2E_VERSIONS) $(PY) -m pytest -m "e2e and versions and not benchmark" -q --durations=15 \
		--e2e-k8s-version $(CI_OLDER_VERSION) --e2e-profile defaults e2e $(PYTEST_ARGS)

.PHONY: test-conformance-versions
test-conformance-versions: node-bin ## upstream's DRA suite (the CI subset) at CI_OLDER_VERSION with upstream's default settings, against its in-tree baseline
	timeout $(LIMIT_BIN) $(PY) -m devcluster build --k8s-version $(CI_OLDER_VERSION)
	timeout $(LIMIT_CONFORMANCE_CI) $(PY) -m e2e.conformance --modes ours --selection ci --procs $(CONFORMANCE_PROCS) \
		--k8s-version $(CI_OLDER_VERSION) --profile defaults

.PHONY: test-matrix
test-matrix: node-bin tools-bin ## the version pass and upstream's DRA suite (CI subset) on every supported version with upstream's defaults (docs/install.md)
	@for cell in $(MATRIX); do \
		version=$${cell%%:*}; profile=$${cell##*:}; \
		echo "== $$version $$profile"; \
		timeout $(LIMIT_BIN) $(PY) -m devcluster build --k8s-version $$version || exit 1; \
		timeout $(LIMIT_E2E_VERSIONS) $(PY) -m pytest -m "e2e and versions and not benchmark" -q \
			--e2e-k8s-version $$version --e2e-profile $$profile \
			--junitxml=test-artifacts/matrix-$$version-$$profile.xml e2e $(PYTEST_ARGS) || exit 1; \
	done
	@for cell in $(CONFORMANCE_MATRIX); do \
		version=$${cell%%:*}; profile=$${cell##*:}; \
		echo "== upstream's DRA suite, $$version $$profile"; \
		timeout $(LIMIT_CONFORMANCE_CI) $(PY) -m e2e.conformance --modes ours --selection ci \
			--procs $(CONFORMANCE_PROCS) --k8s-version $$version --profile $$profile || exit 1; \
		cp test-artifacts/conformance/table-ci.md test-artifacts/matrix-$$version-$$profile-conformance.md; \
	done

# Upstream's own DRA e2e suite (k8s.io/kubernetes test/e2e/dra), unmodified: docs/conformance.md.
.PHONY: test-conformance
test-conformance: k8s-bin node-bin ## upstream's DRA e2e suite with our operators and with the in-tree controllers, both passes; the table in test-artifacts/conformance/ (K8S_VERSION=, PROFILE=)
	timeout $(LIMIT_CONFORMANCE) $(PY) -m e2e.conformance --selection full --procs $(CONFORMANCE_PROCS) --write-baseline $(VERSION_FLAGS)
	$(if $(filter-out lab,$(PROFILE)),,timeout $(LIMIT_CONFORMANCE) $(PY) -m e2e.conformance --selection full-workload-claims --procs $(CONFORMANCE_PROCS) --write-baseline)
	$(if $(filter-out lab,$(PROFILE)),,timeout $(LIMIT_CONFORMANCE) $(PY) -m e2e.conformance --selection two-nodes --procs $(CONFORMANCE_PROCS) --write-baseline)

.PHONY: test-conformance-ci
test-conformance-ci: k8s-bin node-bin ## the controller-focused subset of upstream's DRA e2e suite with our operators, against the kept in-tree baseline; then the specs that need a second node
	timeout $(LIMIT_CONFORMANCE_CI) $(PY) -m e2e.conformance --modes ours --selection ci --procs $(CONFORMANCE_PROCS) $(VERSION_FLAGS)
	$(if $(filter-out lab,$(PROFILE))$(K8S_VERSION),,timeout $(LIMIT_CONFORMANCE_CI) $(PY) -m e2e.conformance --modes ours --selection two-nodes --procs $(CONFORMANCE_PROCS))

.PHONY: test
test: ## everything CI runs: lint, the docs site, types, unit tests, distributions, binaries, e2e tests, upstream's DRA suite (subset)
	@scripts/phases venv:$(LIMIT_VENV):"$(MAKE) --no-print-directory venv" \
		lint::"$(MAKE) --no-print-directory lint" \
		docs::"$(MAKE) --no-print-directory docs" \
		typecheck::"$(MAKE) --no-print-directory typecheck" \
		test-unit::"$(MAKE) --no-print-directory test-unit" \
		test-dist::"$(MAKE) --no-print-directory test-dist" \
		k8s-bin::"$(MAKE) --no-print-directory k8s-bin" \
		node-bin::"$(MAKE) --no-print-directory node-bin" \
		tools-bin::"$(MAKE) --no-print-directory tools-bin" \
		test-e2e::"$(MAKE) --no-print-directory test-e2e" \
		test-e2e-versions::"$(MAKE) --no-print-directory test-e2e-versions" \
		test-conformance-ci::"$(MAKE) --no-print-directory test-conformance-ci" \
		test-conformance-versions::"$(MAKE) --no-print-directory test-conformance-versions"

.PHONY: cluster-up
cluster-up: k8s-bin $(if $(filter fake,$(NODE)),,node-bin) ## start the devcluster in .cluster/ (UPSTREAM_DRA=1 keeps the in-tree DRA controllers; NODE=fake: no real node; WORKLOAD_CLAIMS=1: PodGroup claims gates and API)
	$(PY) -m devcluster up $(CLUSTER_FLAGS)

.PHONY: cluster-down
cluster-down: $(STAMP) ## stop the devcluster in .cluster/
	$(PY) -m devcluster down

.PHONY: cluster-status
cluster-status: $(STAMP) ## state of the devcluster in .cluster/
	$(PY) -m devcluster status

.PHONY: run
run: $(STAMP) ## the main job: local control plane (unless KUBECONFIG names a cluster), CRDs, all operators
	$(PY) -m e2e.run

.PHONY: demo
demo: $(STAMP) ## walk through the demo scenarios on the local control plane (demo/README.md; DEMO=<name>)
	$(PY) -m demo $(DEMO)

.PHONY: clean
clean: ## remove the virtualenv and test artifacts (the binary cache stays)
	rm -rf $(VENV) test-artifacts .pytest_cache .mypy_cache .ruff_cache

.PHONY: bench
bench: k8s-bin ## benchmarks: our operators against the upstream Go controllers (ratios, RSS)
	$(PY) -m e2e.bench $(BENCH)
