# NodeGround: `make demo` runs a small real sweep, `make test` runs the tests.
# Both set up everything they need on a fresh machine (a venv in .venv).

SHELL := /bin/bash
VENV ?= .venv
PYTHON := $(VENV)/bin/python
# torch is pinned first so that no resolver pulls a second (CUDA) build.
TORCH_SPEC ?= torch==2.13.0
PROTO_FILES := $(wildcard proto/nodeground/v1/*.proto)
STAMP := $(VENV)/.installed

# Offline dataset/checkpoint mirror: a `shared/mirror` beside the checkout is used
# when NODEGROUND_MIRROR is not set (the layout is documented in README.md).
ifeq ($(NODEGROUND_MIRROR),)
ifneq ($(wildcard ../shared/mirror/MANIFEST.tsv),)
export NODEGROUND_MIRROR := $(abspath ../shared/mirror)
endif
endif

.PHONY: install proto demo test test-slurm bench fidelity sweep-configs weights clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -e ".[dev]"
	touch $(STAMP)

# Regenerate the committed gRPC stubs (tests fail when they are stale).
proto: $(STAMP)
	$(PYTHON) -m grpc_tools.protoc -Iproto --python_out=proto --pyi_out=proto \
		--grpc_python_out=proto $(PROTO_FILES)

demo: $(STAMP)
	$(PYTHON) -m orchestrator.demo

test: $(STAMP)
	$(PYTHON) -m pytest -m "not docker and not gpu and not fidelity and not sweep_configs and not slurm" -q

# A sweep as a SLURM job array on a one-node cluster started here (root; Debian's slurm-wlm and munge).
test-slurm: $(STAMP)
	tests/slurm/local_cluster.sh start
	$(PYTHON) -m pytest -m slurm tests/slurm -q -s

# Reproduce published accuracies on the mirror datasets (slow: kept out of `make test`).
# GFM checkpoints are read from NODEGROUND_WEIGHTS, else from the mirror.
fidelity: $(STAMP)
	NODEGROUND_WEIGHTS=$${NODEGROUND_WEIGHTS:-$(NODEGROUND_MIRROR)} $(PYTHON) -m pytest -m fidelity tests/fidelity -s -q

# Every configuration `orchestrator run --budget 5` draws, two epochs on each mirror
# dataset: catches sampler draws that cannot train on a real graph (slow: out of `make test`).
sweep-configs: $(STAMP)
	$(PYTHON) -m pytest -m sweep_configs tests/methods/test_sweep_configs_on_mirror.py -q -s

# Download and verify pretrained GFM weights (WEIGHTS="id ..." to pick some).
weights: $(STAMP)
	$(VENV)/bin/orchestrator weights fetch $(WEIGHTS)

bench: $(STAMP)
	$(PYTHON) -m tests.bench

clean:
	rm -rf $(VENV) .pytest_cache .bench

include docker/containers.mk
include docker/contrib.mk
include docker/swarm.mk
