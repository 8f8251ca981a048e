# Container targets. Included by the top-level Makefile, which defines
# PYTHON (.venv/bin/python) and the `install` target.
#
#   make images            base (public python:3.11-slim) if absent, then every family image
#   make wheels base-offline images OFFLINE=1
#                          offline path: wheelhouse + debootstrapped Debian base
#   make up [GPU=1]        build what is missing or changed, start every family's service (compose), wait for healthy
#   make up FAMILIES="gnn graphany"          only these families
#   make up SCALE="gnn=2 graphtransformer=2"  replicas per family (compose v1 and v2)
#   make compose           write .cache/compose.yaml from the manifests (make up does it first)
#   make wheels images GPU=1 [OFFLINE=1]
#                          the CUDA variant: wheelhouse-cuda/, nodeground/<family>:cuda
#   make up GPU=1 [GPUS=0,1]  one replica of each family per GPU, each pinned to its device
#   make down              stop and remove the project's containers and network (this checkout's: COMPOSE_PROJECT)
#   make test-docker       pytest -m docker tests/docker (all but the user path and the Swarm test)
#   make test-user-path    docker/README.md's path end to end: up, weights, run, report, validate-images, down

PYTHON ?= .venv/bin/python
DOCKER ?= docker
OFFLINE ?= 0
GPU ?= 0

# Families = the folders methods/<family>/ with a manifest.toml: the folder's name is the
# family's name, its image's and its compose service's. Each builds from docker/family/Dockerfile
# (--build-arg FAMILY=<family>), or from its own methods/<family>/Dockerfile if it has one.
ALL_FAMILIES = $(sort $(patsubst methods/%/manifest.toml,%,$(wildcard methods/*/manifest.toml)))
FAMILIES ?= $(ALL_FAMILIES)
IMAGE_PREFIX ?= nodeground
BASE_TAG ?= $(IMAGE_PREFIX)/base:latest
PUBLIC_BASE_IMAGE ?= python:3.11-slim
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

# Offline base OS (debootstrap), cached under the git-ignored .cache/.
DEBIAN_SUITE ?= bookworm
DEBIAN_MIRROR ?= http://deb.debian.org/debian
BASE_OS_TAG ?= $(IMAGE_PREFIX)/base-os:$(DEBIAN_SUITE)
ROOTFS_DIR ?= .cache/rootfs
ROOTFS_TAR ?= $(ROOTFS_DIR)/$(DEBIAN_SUITE)-minbase.tar
DEBOOTSTRAP_INCLUDE ?= python3,python3-venv,ca-certificates,libgomp1,passwd

# Wheelhouse for the images: exactly docker/requirements.txt (--no-deps: the file
# is the full closure, and the base build's `pip check` fails if it is not),
# for CPython 3.11 on manylinux x86_64 (Debian bookworm has glibc 2.36).
WHEELHOUSE ?= wheelhouse
WHEEL_PLATFORMS ?= manylinux_2_36_x86_64 manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 linux_x86_64
WHEELS_PIP_ARGS ?=
# A family's own dependencies (methods/<family>/requirements.txt) as wheels, one folder per family; the
# family images' build context includes this folder (.dockerignore), a few MB.
WHEELHOUSE_FAMILIES ?= wheelhouse-families

# CUDA variant (GPU=1): PyPI's CUDA torch (docker/requirements-cuda.txt) in its own
# wheelhouse and under its own tag, so CPU and CUDA images never mix.
WHEELHOUSE_CUDA ?= wheelhouse-cuda
TORCH_INDEX_CUDA ?= https://pypi.org/simple
CUDA_WHEEL_PLATFORMS ?= $(WHEEL_PLATFORMS) manylinux_2_27_x86_64 manylinux_2_25_x86_64 manylinux_2_24_x86_64 \
	manylinux_2_18_x86_64 manylinux_2_12_x86_64 manylinux2010_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64
CUDA_CONTEXT ?= .cache/cuda-base-context
IMAGE_TAG = $(if $(filter 1,$(GPU)),cuda,latest)
BASE_TAG_CUDA ?= $(IMAGE_PREFIX)/base:cuda
IMAGE_BASE = $(if $(filter 1,$(GPU)),$(BASE_TAG_CUDA),$(BASE_TAG))
# GPUS=0,1,... picks devices; GPU=1 alone means every GPU nvidia-smi lists.
GPUS ?=
ifneq ($(GPUS),)
override GPU := 1
endif

# This checkout's name (docker/services.py checkout: ng-<folder>-<hash of its path>) is its compose project and
# Swarm stack, and labels its containers (nodeground.checkout), so two clones on one host never share containers
# and a sweep uses only its own checkout's. Asked once per make run (a recursive variable that sets itself); every
# target that names it depends on install, so the venv that answers exists.
CHECKOUT_ID = $(eval CHECKOUT_ID := $(shell $(PYTHON) docker/services.py checkout))$(CHECKOUT_ID)
COMPOSE_PROJECT ?= $(CHECKOUT_ID)
UP_WAIT ?= 120
COMPOSE_FILE = .cache/compose.yaml
COMPOSE_FILES = -f $(COMPOSE_FILE) $(if $(filter 1,$(GPU)),-f $(GPU_COMPOSE))
GPU_COMPOSE ?= .cache/compose.gpu.yaml
# Replicas per family, "family=N ...": passed as --scale family=N, which both
# docker-compose v1 and docker compose v2 accept on `up`.
SCALE ?=
# compose.yaml names its images ${NODEGROUND_IMAGE_PREFIX}/<family>:latest.
export NODEGROUND_IMAGE_PREFIX := $(IMAGE_PREFIX)
# docker compose (v2 plugin) when present, else docker-compose (v1).
COMPOSE ?= $(shell if $(DOCKER) compose version >/dev/null 2>&1; then echo "$(DOCKER) compose"; \
	elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; else echo false; fi)

.PHONY: wheels family-wheels family-base-cuda base base-offline base-os base-cuda images compose gpu-compose up down test-docker test-user-path test-swarm

# GPU=1: the CUDA closure (requirements.txt without its torch, plus requirements-cuda.txt)
# into $(WHEELHOUSE_CUDA) (about 3 GB; not part of CI). The CPU closure is downloaded
# --no-deps: requirements.txt is complete, and the base build's `pip check` says if not.
WHEELS_DIR = $(if $(filter 1,$(GPU)),$(WHEELHOUSE_CUDA),$(WHEELHOUSE))
WHEELS_REQUIREMENTS = $(if $(filter 1,$(GPU)),-r <(grep -v '^torch==' docker/requirements.txt) -r docker/requirements-cuda.txt,-r docker/requirements.txt -r docker/requirements-orchestrator.txt)

## The images' wheelhouse, the CPU closure (GPU=1: the CUDA one, about 3 GB) (minutes; needs PyPI)
wheels: install
	@mkdir -p $(WHEELS_DIR)
	$(PYTHON) -m pip download --disable-pip-version-check --no-cache-dir -d $(WHEELS_DIR) \
		$(if $(filter 1,$(GPU)),,--no-deps) --only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
		$(foreach p,$(if $(filter 1,$(GPU)),$(CUDA_WHEEL_PLATFORMS),$(WHEEL_PLATFORMS)),--platform $(p)) \
		$(WHEELS_PIP_ARGS) $(WHEELS_REQUIREMENTS)
	@ls $(WHEELS_DIR) | wc -l | xargs echo "wheels in $(WHEELS_DIR):"
	$(if $(filter 1,$(GPU)),,@$(MAKE) --no-print-directory family-wheels)
	@set -e; for r in $(if $(filter 1,$(GPU)),$(wildcard methods/*/requirements-cuda.txt)); do f=$$(basename $$(dirname $$r)); \
		$(PYTHON) -m pip download --disable-pip-version-check --no-cache-dir -q -d $(WHEELHOUSE_CUDA)-$$f --no-deps \
			--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
			$(foreach p,$(CUDA_WHEEL_PLATFORMS),--platform $(p)) $(WHEELS_PIP_ARGS) -r $$r; \
		ls $(WHEELHOUSE_CUDA)-$$f | wc -l | xargs echo "family $$f: wheels in $(WHEELHOUSE_CUDA)-$$f:"; done

# Each family's own dependencies (methods/<family>/requirements.txt) into $(WHEELHOUSE_FAMILIES)/<family>
# (`make wheels` runs it): the offline family image installs them from there.
## Each family's own dependencies (methods/<family>/requirements.txt) as wheels (seconds)
family-wheels: install
	@set -e; for r in $(wildcard methods/*/requirements.txt); do f=$$(basename $$(dirname $$r)); \
		$(PYTHON) -m pip download --disable-pip-version-check --no-cache-dir -q -d $(WHEELHOUSE_FAMILIES)/$$f --no-deps \
			--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
			$(foreach p,$(WHEEL_PLATFORMS),--platform $(p)) $(WHEELS_PIP_ARGS) -r $$r; \
		ls $(WHEELHOUSE_FAMILIES)/$$f | wc -l | xargs echo "family $$f: wheels in $(WHEELHOUSE_FAMILIES)/$$f:"; done

# The base image's build context is its own: the Dockerfile, requirements.txt and,
# offline, the wheelhouse, streamed as a tar, so that the repository-root context
# of the family images (.dockerignore) never carries the wheels.
# The classic builder keeps the wheel-installing stage as a dangling image
# (~1.4 GB); it is labelled in the Dockerfile and removed after the build.
# (A symlinked wheelhouse is followed: tar -h.)
BUILD_STAGE_LABEL = nodeground.build-stage=base

# Said after an online build fails: without a registry Docker ends in its raw DNS error ("lookup
# registry-1.docker.io ... no such host"), which names neither the cause nor the way out.
OFFLINE_HINT = the build could not reach an image registry or package index (a DNS or connection error above says \
so); without a network, build offline: make wheels base-offline images OFFLINE=1 (docker/README.md, "Offline: no \
image registry, no index inside containers")
# $(call offline_hint,OFFLINE) ends an online build's command (none with 1): on failure, the hint, then the failure
offline_hint = $(if $(filter 1,$(1)),,|| { echo 'error: $(OFFLINE_HINT)' >&2; exit 1; })

define build_base
tar -chf - docker/base/Dockerfile docker/requirements.txt $(if $(filter 1,$(2)),$(WHEELHOUSE)) | $(DOCKER) build -f docker/base/Dockerfile -t $(BASE_TAG) \
	--build-arg BASE_IMAGE=$(1) --build-arg OFFLINE=$(2) --build-arg TORCH_INDEX_URL=$(TORCH_INDEX) - $(call offline_hint,$(2))
$(DOCKER) image prune -f --filter label=$(BUILD_STAGE_LABEL) >/dev/null
endef

## nodeground/base from a public python:3.11-slim and PyPI, or ./wheelhouse with OFFLINE=1 (a few minutes)
base:
	$(call build_base,$(PUBLIC_BASE_IMAGE),$(OFFLINE))

$(ROOTFS_TAR):
	@mkdir -p $(ROOTFS_DIR)
	rm -rf $(ROOTFS_DIR)/tree
	debootstrap --variant=minbase --include=$(DEBOOTSTRAP_INCLUDE) \
		$(DEBIAN_SUITE) $(ROOTFS_DIR)/tree $(DEBIAN_MIRROR)
	chroot $(ROOTFS_DIR)/tree apt-get clean
	rm -rf $(ROOTFS_DIR)/tree/var/lib/apt/lists/* $(ROOTFS_DIR)/tree/var/cache/apt/*.bin \
		$(ROOTFS_DIR)/tree/usr/share/doc/* $(ROOTFS_DIR)/tree/usr/share/man/* \
		$(ROOTFS_DIR)/tree/usr/share/locale/*
	tar -C $(ROOTFS_DIR)/tree --numeric-owner -cf $@.tmp .
	mv $@.tmp $@
	rm -rf $(ROOTFS_DIR)/tree

# The rootfs tarball (debootstrap, root) is cached in $(ROOTFS_DIR); the image is re-imported only if absent.
## The Debian base OS image, nodeground/base-os (minutes the first time; seconds after)
base-os: $(ROOTFS_TAR)
	@if $(DOCKER) image inspect $(BASE_OS_TAG) >/dev/null 2>&1; then \
		echo "$(BASE_OS_TAG) present"; \
	else \
		echo "importing $(ROOTFS_TAR) as $(BASE_OS_TAG)"; \
		$(DOCKER) import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'CMD ["python3"]' \
			$(ROOTFS_TAR) $(BASE_OS_TAG); \
	fi

## Offline nodeground/base: debootstrapped Debian + ./wheelhouse, no registry, no index (a few minutes)
base-offline: base-os
	@test -n "$$(ls $(WHEELHOUSE)/*.whl 2>/dev/null)" || { echo "no wheels in $(WHEELHOUSE)/: run 'make wheels' first" >&2; exit 1; }
	$(call build_base,$(BASE_OS_TAG),1)

# What a family image is built from, as one hash: the files its build can COPY (the shared Dockerfile copies
# pyproject.toml, README*, contract/ and methods/; a family's own Dockerfile may copy anything .dockerignore
# lets into the context), minus what .dockerignore drops, its Dockerfile, the family and the base image's id.
# `make images` labels each image with it (nodeground.inputs) and skips a family whose image already
# carries it, so `make up` does not rebuild current images (the classic builder takes minutes even cached).
INPUTS_LABEL = nodeground.inputs
SHARED_COPIES = pyproject.toml README* contract methods $(wildcard wheelhouse-families)
OWN_COPIES = $(SHARED_COPIES) proto orchestrator datasets docker/requirements.txt docker/requirements-cuda.txt
INPUTS_OF = f() { { find $$([ "$$2" = docker/family/Dockerfile ] && echo $(SHARED_COPIES) || echo $(OWN_COPIES)) "$$2" \
	-type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; \
	echo "base $$($(DOCKER) image inspect -f '{{.Id}}' $$3 2>/dev/null) family $$1"; } | sha256sum | cut -c1-32; }; f
LABEL_OF = f() { $(DOCKER) image inspect -f '{{index .Config.Labels "$(INPUTS_LABEL)"}}' "$$1" 2>/dev/null; }; f

# Base only if absent (OFFLINE=1 picks the offline base); a family image is built when its inputs
# changed (INPUTS_OF) or it is absent; REBUILD=1 builds every one anyway.
REBUILD ?= 0
## The base if absent, then every family image whose inputs changed (about 15 min first; seconds when current)
images:
	@if $(DOCKER) image inspect $(IMAGE_BASE) >/dev/null 2>&1; then \
		echo "$(IMAGE_BASE) present"; \
	else \
		$(MAKE) --no-print-directory $(if $(filter 1,$(GPU)),base-cuda,$(if $(filter 1,$(OFFLINE)),base-offline,base)); \
	fi
	@for f in $(FAMILIES); do [ -f methods/$$f/manifest.toml ] || { \
		echo "no family $$f (no methods/$$f/manifest.toml); the families: $(ALL_FAMILIES)" >&2; exit 2; }; done
	@set -e; for f in $(FAMILIES); do \
		base=$(IMAGE_BASE); \
		if [ "$(GPU)" = 1 ] && [ -f methods/$$f/requirements-cuda.txt ]; then \
			$(MAKE) --no-print-directory family-base-cuda FAMILY=$$f; base=$(IMAGE_PREFIX)/base-$$f:cuda; \
		elif [ "$(GPU)" = 1 ] && pin=$$($(CUDA_PIN_OF) $$f); then \
			echo "skipping $(IMAGE_PREFIX)/$$f:cuda: its manifest pins torch $$pin, not the torch of $(BASE_TAG_CUDA)"; continue; \
		fi; \
		if [ -f methods/$$f/Dockerfile ]; then df=methods/$$f/Dockerfile; else df=docker/family/Dockerfile; fi; \
		img=$(IMAGE_PREFIX)/$$f:$(IMAGE_TAG); inputs=$$($(INPUTS_OF) $$f $$df $$base); \
		if [ "$(REBUILD)" != 1 ] && [ "$$($(LABEL_OF) $$img)" = "$$inputs" ]; then \
			echo "$$img is current (inputs $$inputs)"; continue; fi; \
		echo "building $$img"; \
		$(DOCKER) build -f $$df -t $$img --label $(INPUTS_LABEL)=$$inputs \
			--build-arg BASE=$$base --build-arg FAMILY=$$f . $(call offline_hint,$(OFFLINE)); \
	done

# A family whose CUDA pins differ from the runtime's (methods/FAMILY/requirements-cuda.txt, its whole
# closure): its own base, nodeground/base-FAMILY:cuda, from docker/base/Dockerfile with that file as the
# requirements (--no-deps, pip check). The context is a folder of its own: the file and, offline, hard
# links to $(WHEELHOUSE_CUDA)-FAMILY (make wheels GPU=1 fills it). Built once; remove the image to rebuild.
## A family's own CUDA base (FAMILY=NAME) when its CUDA pins differ; `make images GPU=1` runs it (minutes, once)
family-base-cuda:
	@test -n "$(FAMILY)" && test -f methods/$(FAMILY)/requirements-cuda.txt
	@if $(DOCKER) image inspect $(IMAGE_PREFIX)/base-$(FAMILY):cuda >/dev/null 2>&1; then \
		echo "$(IMAGE_PREFIX)/base-$(FAMILY):cuda present"; exit 0; fi; \
	ctx=.cache/$(FAMILY)-cuda-base-context; rm -rf $$ctx && mkdir -p $$ctx/docker/base $$ctx/wheelhouse; \
	cp docker/base/Dockerfile $$ctx/docker/base/; cp methods/$(FAMILY)/requirements-cuda.txt $$ctx/docker/requirements.txt; \
	if [ "$(OFFLINE)" = 1 ]; then \
		test -n "$$(ls $(WHEELHOUSE_CUDA)-$(FAMILY)/*.whl 2>/dev/null)" || { echo "no wheels in $(WHEELHOUSE_CUDA)-$(FAMILY)/: run 'make wheels GPU=1' first" >&2; exit 1; }; \
		$(MAKE) --no-print-directory base-os; \
		cp -l $(WHEELHOUSE_CUDA)-$(FAMILY)/*.whl $$ctx/wheelhouse/ 2>/dev/null || cp $(WHEELHOUSE_CUDA)-$(FAMILY)/*.whl $$ctx/wheelhouse/; \
		src="--build-arg BASE_IMAGE=$(BASE_OS_TAG) --build-arg OFFLINE=1"; \
	else \
		src="--build-arg BASE_IMAGE=$(PUBLIC_BASE_IMAGE) --build-arg OFFLINE=0 --build-arg TORCH_INDEX_URL=$(TORCH_INDEX_CUDA)"; \
	fi; \
	$(DOCKER) build -f $$ctx/docker/base/Dockerfile -t $(IMAGE_PREFIX)/base-$(FAMILY):cuda $$src $$ctx; \
	rm -rf $$ctx

# A family whose manifest says `torch = "..."` pins its own torch: prints it (exit 0), else exit 1.
CUDA_PIN_OF = f() { sed -n 's/^torch *= *"\(.*\)".*/\1/p' methods/$$1/manifest.toml | grep .; }; f

# nodeground/base:cuda: the same Dockerfile with PyPI's CUDA torch. Offline, the build
# context is a folder holding only the requirements and hard links to $(WHEELHOUSE_CUDA)
# (the repository root would send its CPU wheelhouse, and a CUDA one there would go
# into every CPU build's context).
## nodeground/base:cuda, the base with PyPI's CUDA torch (minutes; several GB)
base-cuda:
ifeq ($(OFFLINE),1)
	@test -n "$$(ls $(WHEELHOUSE_CUDA)/*.whl 2>/dev/null)" || { echo "no wheels in $(WHEELHOUSE_CUDA)/: run 'make wheels GPU=1' first" >&2; exit 1; }
	@$(MAKE) --no-print-directory base-os
	rm -rf $(CUDA_CONTEXT) && mkdir -p $(CUDA_CONTEXT)/docker $(CUDA_CONTEXT)/wheelhouse
	cp docker/requirements.txt docker/requirements-cuda.txt $(CUDA_CONTEXT)/docker/
	cp -l $(WHEELHOUSE_CUDA)/*.whl $(CUDA_CONTEXT)/wheelhouse/ 2>/dev/null || cp $(WHEELHOUSE_CUDA)/*.whl $(CUDA_CONTEXT)/wheelhouse/
	$(DOCKER) build -f docker/base/Dockerfile -t $(BASE_TAG_CUDA) \
		--build-arg BASE_IMAGE=$(BASE_OS_TAG) --build-arg OFFLINE=1 \
		--build-arg TORCH_REQUIREMENTS=docker/requirements-cuda.txt $(CUDA_CONTEXT)
	rm -rf $(CUDA_CONTEXT)
else
	$(DOCKER) build -f docker/base/Dockerfile -t $(BASE_TAG_CUDA) \
		--build-arg BASE_IMAGE=$(PUBLIC_BASE_IMAGE) --build-arg OFFLINE=0 \
		--build-arg TORCH_INDEX_URL=$(TORCH_INDEX_CUDA) \
		--build-arg TORCH_REQUIREMENTS=docker/requirements-cuda.txt .
endif

PROJECT_FILTER = --filter label=com.docker.compose.project=$(COMPOSE_PROJECT)

# GFM weights are mounted from where `make weights` and `orchestrator weights` put them: the one
# rule of contract/weights.py (stdlib only, so any python3 >= 3.11 can answer). Created first,
# so that Docker does not create it root-owned and empty.
WEIGHTS_DIR_CMD = $(if $(wildcard $(PYTHON)),$(PYTHON),python3) -m contract.weights

## Build what is missing or changed, start every family's service, wait until healthy (seconds with current images)
up: compose images $(if $(filter 1,$(GPU)),gpu-compose)
	@for s in $(SCALE); do \
		case " $(FAMILIES) " in *" $${s%%=*} "*) ;; \
		*) echo "SCALE=$$s: $${s%%=*} is not among the families started ($(FAMILIES))" >&2; exit 2;; esac; \
		case "$${s#*=}" in ''|*[!0-9]*) echo "SCALE=$$s: the replica count must be a number" >&2; exit 2;; esac; \
	done
	w="$$($(WEIGHTS_DIR_CMD))" && mkdir -p "$$w" && \
		NODEGROUND_WEIGHTS="$$w" $(COMPOSE) -p $(COMPOSE_PROJECT) $(COMPOSE_FILES) up -d --no-build --remove-orphans \
		$(foreach s,$(SCALE),--scale $(s)) $(FAMILIES)
	@# Wait (UP_WAIT seconds, 0 = don't) until every service answers, so an `orchestrator run`
	@# started right after `make up` finds them; a GFM without its weights answers NOT_SERVING
	@# and is reported with the command that fetches them (it turns healthy once they verify).
	@if [ "$(UP_WAIT)" != 0 ]; then DOCKER="$(DOCKER)" sh docker/wait-up.sh $(COMPOSE_PROJECT) $(UP_WAIT); fi
	$(COMPOSE) -p $(COMPOSE_PROJECT) $(COMPOSE_FILES) ps

# Generated, not committed: a new family is one new folder.
## Write .cache/compose.yaml from the family manifests (seconds)
compose: install
	@$(PYTHON) docker/services.py compose --out $(COMPOSE_FILE)

## The compose override for the GPUs found (GPUS=... picks them), or :cuda images on CPU (seconds)
gpu-compose: compose
	@$(PYTHON) -m orchestrator.services.gpus --compose $(COMPOSE_FILE) --gpus "$(GPUS)" --out $(GPU_COMPOSE)

# Compose removes the containers, then the network; Docker 20.10 can keep a stale
# endpoint on the network after its container is gone, and compose then fails.
# So whatever of this project is left afterwards is removed here, and `down`
# fails only if something still remains.
## Stop and remove this checkout's containers and network (seconds)
down: compose
	@$(COMPOSE) -p $(COMPOSE_PROJECT) $(COMPOSE_FILES) down --remove-orphans || \
		echo "compose down failed; removing what is left of project $(COMPOSE_PROJECT)" >&2
	@left=$$($(DOCKER) ps -aq $(PROJECT_FILTER)); \
	if [ -n "$$left" ]; then $(DOCKER) rm -f $$left >/dev/null; fi; \
	for n in $$($(DOCKER) network ls -q $(PROJECT_FILTER)); do \
		for e in $$($(DOCKER) network inspect -f '{{range .Containers}}{{.Name}} {{end}}' $$n); do \
			echo "disconnecting stale endpoint $$e from network $$n" >&2; \
			$(DOCKER) network disconnect -f $$n $$e || true; \
		done; \
		$(DOCKER) network rm $$n >/dev/null; \
	done; \
	left="$$($(DOCKER) ps -aq $(PROJECT_FILTER))$$($(DOCKER) network ls -q $(PROJECT_FILTER))"; \
	if [ -n "$$left" ]; then echo "project $(COMPOSE_PROJECT) still has containers or networks: $$left" >&2; exit 1; fi

## Container tests: images, compose, hostile and broken images (about 3 min)
test-docker: install
	$(PYTHON) -m pytest -m docker tests/docker --ignore=tests/docker/test_user_path.py --ignore=tests/docker/test_swarm.py

## The Swarm test: swarm-up, a sweep over replicas with TLS, one replica killed, swarm-down (about 3 min)
test-swarm: install
	$(PYTHON) -m pytest -m docker tests/docker/test_swarm.py -s

# Needs the images (`make images`, `make image-centroid`) and the offline mirror.
## docker/README.md's path from a fresh cache: up, weights, run, report, validate, down (about 12 min)
test-user-path: install
	$(PYTHON) -m pytest -m docker tests/docker/test_user_path.py -s
