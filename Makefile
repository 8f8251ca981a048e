# NodeGround: `make demo` runs a small real sweep, `make test` runs the tests.
# Both set up everything they need on a fresh machine (a venv in .venv).

SHELL := /bin/bash
VENV ?= .venv
PYTHON := $(VENV)/bin/python
# The host install is the exact closure in requirements.lock (`make lock` regenerates it).
LOCK := requirements.lock
# torch is installed first, at the lock's version unless TORCH_SPEC says otherwise (a CUDA host),
# so that no resolver pulls a second (CUDA) build; the rest is constrained by the lock without torch.
TORCH_SPEC ?= $(shell grep -m1 '^torch==' $(LOCK))
PROTO_FILES := $(wildcard proto/nodeground/v1/*.proto)
STAMP := $(VENV)/.installed

# Offline dataset/checkpoint mirror: a `shared/mirror` beside the checkout is used
# when NODEGROUND_MIRROR is not set (the layout is documented in README.md).
ifeq ($(NODEGROUND_MIRROR),)
ifneq ($(wildcard ../shared/mirror/MANIFEST.tsv),)
export NODEGROUND_MIRROR := $(abspath ../shared/mirror)
endif
endif

.PHONY: help install lock proto describe lint demo test test-slow test-slurm bench gpu-check gpu-check-carry fidelity sweep-configs weights reference clean

# Every target carries one `## purpose (duration)` line right above its rule: `make help` prints them, read from the
# makefiles themselves (so it needs no venv), and tests/test_make_help.py fails when a target lacks one. Durations
# are wall time on two idle cores with the venv and images built, unless the line says otherwise.
## List every make target with its purpose and expected duration (instant)
help:
	@awk -v node_method='$(NODE_METHOD)' ' \
		FNR == 1 { printf "\n%s\n", FILENAME } \
		/^## / { doc = substr($$0, 4); next } \
		doc != "" && /^[^#\t =]+:([^=]|$$)/ { target = $$0; sub(/:.*/, "", target); \
			gsub(/\$$\(NODE_METHOD\)/, node_method, target); gsub(/%/, "NAME", target); \
			printf "  %-19s %s\n", target, doc } \
		{ doc = "" }' $(MAKEFILE_LIST)

## Set up .venv: torch's CPU build and the exact closure in requirements.lock (2-6 min fresh; instant after)
install: $(STAMP)

# A family with its own Python dependencies (methods/<family>/requirements.txt, exact pins over the
# service runtime, which may conflict with the orchestrator's) gets them apart, in $(VENV)/families/<family>
# (--no-deps: the file is the closure); its local services put that folder first on their path.
FAMILY_REQUIREMENTS := $(wildcard methods/*/requirements.txt)

$(STAMP): pyproject.toml $(LOCK) $(FAMILY_REQUIREMENTS)
	test -x $(PYTHON) || python3 -m venv $(VENV)
	grep -v '^torch==' $(LOCK) > $(VENV)/constraints.txt
	$(PYTHON) -m pip install -q -c $(VENV)/constraints.txt pip setuptools
	$(PYTHON) -m pip install -q -c $(VENV)/constraints.txt "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -c $(VENV)/constraints.txt --no-build-isolation -e ".[dev]"
	@set -e; for r in $(FAMILY_REQUIREMENTS); do f=$$(basename $$(dirname $$r)); rm -rf $(VENV)/families/$$f; \
		echo "family $$f: its own dependencies into $(VENV)/families/$$f"; \
		$(PYTHON) -m pip install -q --no-deps --target $(VENV)/families/$$f -r $$r; done
	touch $(STAMP)

# Upgrade on purpose: the newest versions pyproject.toml allows today, resolved in a scratch venv (torch stays at
# TORCH_SPEC unless LOCK_TORCH=torch==X names another CPU build), written to requirements.lock; then `make test`
# and commit the lock.
LOCK_VENV := .cache/lock-venv
## Re-resolve requirements.lock to the newest versions pyproject.toml allows (about 3 min; needs PyPI)
lock:
	rm -rf $(LOCK_VENV) && python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q --upgrade pip setuptools
	$(LOCK_VENV)/bin/pip install -q "$(or $(LOCK_TORCH),$(TORCH_SPEC))"
	$(LOCK_VENV)/bin/pip install -q -e ".[dev]"
	{ echo "# The host install's exact closure: make install uses it, make lock writes it. Do not edit by hand."; \
	  $(LOCK_VENV)/bin/pip freeze --all --exclude-editable | sed -E 's/^(torch==[^+]*)\+.*/\1/' | LC_ALL=C sort -f; } > $(LOCK).new
	mv $(LOCK).new $(LOCK) && rm -rf $(LOCK_VENV)
	@echo "wrote $(LOCK); run make test (and re-record golden files if numbers moved), then commit it"

# proto/nodeground/v1/*.proto is compiled as contract/v1/*.proto, so the stubs import as contract.v1;
# tests/contract/test_proto_stubs.py fails when they are stale.
## Regenerate the committed gRPC stubs in contract/v1 from proto/ (seconds)
proto: $(STAMP)
	$(PYTHON) -m grpc_tools.protoc -Icontract/v1=proto/nodeground/v1 --python_out=. --pyi_out=. \
		--grpc_python_out=. $(PROTO_FILES)

# What its Describe answers, which `orchestrator plan` reads instead of starting services;
# tests/methods/test_descriptions.py fails when one is missing or stale.
## Regenerate each method family's committed description.json (about 15 s)
describe: $(STAMP)
	$(PYTHON) -m methods.describe

# House rules as tools (pyproject.toml: [tool.ruff], [tool.mypy]). The first run's 40 s of one core's CPU is mypy
# reading torch's and numpy's stubs; later runs reuse .mypy_cache.
## ruff's lint rules, ruff's formatting check, mypy (about 45 s the first time, 2-5 s after)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

## A small real sweep (MLP and GCN on a synthetic graph and Texas), then its results (about 1 min + install)
demo: $(STAMP)
	$(PYTHON) -m orchestrator.demo

# The run's header says what is left out and which target runs it.
NOT_HERE := not docker and not gpu and not fidelity and not sweep_configs and not slurm
## The tests that need no container, cluster, GPU or long run (about 7 min)
test: $(STAMP)
	$(PYTHON) -m pytest -m "not slow and $(NOT_HERE)"

## Slow end-to-end runs: golden sweep rerun, kill -9 and resume, watchdogs, real-store report (about 15 min)
test-slow: $(STAMP)
	$(PYTHON) -m pytest -m "slow and $(NOT_HERE)" -q

# Root, Debian's slurm-wlm and munge (plus slurmdbd and mariadb-server for sacct); docs/cluster.md.
## A sharded sweep as a SLURM job array on a one-node cluster started here (about 8 min)
test-slurm: $(STAMP)
	tests/slurm/local_cluster.sh start
	$(PYTHON) -m pytest -m slurm tests/slurm -q -s

# GFM checkpoints are read from NODEGROUND_WEIGHTS, else from the mirror.
## Reproduce published accuracies (supervised methods and GFMs) on the mirror datasets (about an hour)
fidelity: $(STAMP)
	NODEGROUND_WEIGHTS=$${NODEGROUND_WEIGHTS:-$(NODEGROUND_MIRROR)} $(PYTHON) -m pytest -m fidelity tests/fidelity -s -q

# Catches sampler draws that cannot train on a real graph.
## Every configuration a 5-trial sweep draws, two epochs on each mirror dataset (about an hour)
sweep-configs: $(STAMP)
	$(PYTHON) -m pytest -m sweep_configs tests/methods/test_sweep_configs_on_mirror.py -q -s

# WEIGHTS="id ..." or FAMILIES="graphany gvt" pick some, and then it fails unless they are all ready; with
# neither it fetches what it can reach and fails only on a file that does not verify.
## Fetch and verify the GFM checkpoints; say which GFM families are ready (seconds from the mirror)
weights: $(STAMP)
	$(VENV)/bin/orchestrator weights fetch $(WEIGHTS) \
		$(if $(filter command line environment,$(origin FAMILIES)),$(foreach f,$(FAMILIES),--family $(f)))

# The GFM section reads official checkpoints like `make fidelity`; NODEGROUND_UPSTREAM adds upstream's side.
# BENCH="gfm methods" picks sections (default: all); docs/benchmarks.md.
BENCH ?=
## Side-by-side timings printed as ratios (about 3 h; BENCH=estimate alone is about 1.5 h)
bench: $(STAMP)
	NODEGROUND_WEIGHTS=$${NODEGROUND_WEIGHTS:-$(NODEGROUND_MIRROR)} $(PYTHON) -m tests.bench $(BENCH)

# The GPU check (tests/bench/gpu_check.py) on any CUDA host, with or without Docker, using
# the host's own torch (>= 2.3) and PyG: service vs plain-loop epoch times and peak GPU
# memory, then a 17-method x 5-dataset sweep (under 8 minutes on one H200).
#   make gpu-check                                   # the host's python3; installs $(GPU_CHECK_DIR)/wheels if there
#   make gpu-check GPU_CHECK_PYTHON=$(PYTHON) GPU_CHECK_ARGS="--device cpu --small"   # the code path on CPU
#   make gpu-check-carry [GPU_CHECK_PY=3.12]         # wheels + mirror files for a host with no network
GPU_CHECK_PYTHON ?= python3
GPU_CHECK_DIR ?= .cache/gpu-check
GPU_CHECK_WHEELS ?= $(wildcard $(GPU_CHECK_DIR)/wheels)
GPU_CHECK_ARGS ?=
GPU_CHECK_PY ?= 3.12
ifeq ($(NODEGROUND_MIRROR),)
gpu-check: export NODEGROUND_MIRROR := $(if $(wildcard $(GPU_CHECK_DIR)/mirror/MANIFEST.tsv),$(abspath $(GPU_CHECK_DIR)/mirror))
endif

## The GPU check on a CUDA host: service vs plain loop, then a 17x5 sweep (under 8 min on one H200)
gpu-check:
	$(GPU_CHECK_PYTHON) -m tests.bench.gpu_check $(if $(GPU_CHECK_WHEELS),--wheels $(GPU_CHECK_WHEELS)) $(GPU_CHECK_ARGS)

## Wheels and mirror files for `make gpu-check` on a host with no network (under a minute; needs PyPI)
gpu-check-carry: $(STAMP)
	@test -n "$(NODEGROUND_MIRROR)" || { echo "set NODEGROUND_MIRROR: the check's datasets and GFM checkpoints come from it" >&2; exit 1; }
	rm -rf $(GPU_CHECK_DIR)/wheels $(GPU_CHECK_DIR)/mirror && mkdir -p $(GPU_CHECK_DIR)
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version $(GPU_CHECK_PY) \
		$(foreach p,$(CUDA_WHEEL_PLATFORMS),--platform $(p)) -d $(GPU_CHECK_DIR)/wheels -r tests/bench/gpu_check_requirements.txt
	cp -r $(NODEGROUND_MIRROR) $(GPU_CHECK_DIR)/mirror
	@du -sh $(GPU_CHECK_DIR)/wheels $(GPU_CHECK_DIR)/mirror

## Remove .venv, .pytest_cache and .bench (seconds)
clean:
	rm -rf $(VENV) .pytest_cache .bench

include docker/containers.mk
include docker/contrib.mk
include docker/swarm.mk

# The shipped reference records (orchestrator/reference/lite.csv + lite.json, docs/reference.md): the Lite tier of
# every reference method on the catalog datasets that fit in HOURS estimated wall hours (default 4; two one-thread
# services side by side), smallest graphs first; it resumes from the shipped table and extends it.
HOURS ?= 4
## Build or extend the shipped Lite reference records (HOURS hours, default 4, + about 15 min of probe)
reference: $(STAMP)
	$(MAKE) weights FAMILIES="graphany gvt node4all"
	$(VENV)/bin/orchestrator reference build --hours $(HOURS)
