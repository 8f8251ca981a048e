# Container targets. Included by the top-level Makefile, which defines
# PYTHON (.venv/bin/python) and the `install` target.
#
#   make images            base (public python:3.11-slim) if absent, then every family image
#   make wheels base-offline images OFFLINE=1
#                          offline path: wheelhouse + debootstrapped Debian base
#   make up [GPU=1]        build what is missing, start the services (compose), wait for healthy
#   make down              stop and remove them
#   make test-docker       pytest -m docker tests/docker

PYTHON ?= .venv/bin/python
DOCKER ?= docker
OFFLINE ?= 0
GPU ?= 0

# Families = the `family` named in each methods/*/manifest.toml that has a
# docker/<family>/Dockerfile (a family's folder may differ from its name:
# methods/graph_transformer serves family graph-transformer).
FAMILIES ?= $(sort $(foreach f,$(foreach m,$(wildcard methods/*/manifest.toml),\
	$(shell sed -n 's/^family *= *"\(.*\)".*/\1/p' $(m))),$(if $(wildcard docker/$(f)/Dockerfile),$(f))))
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

# Wheelhouse for the images: exactly docker/requirements.txt, for CPython 3.11
# on manylinux x86_64 (Debian bookworm has glibc 2.36).
WHEELHOUSE ?= wheelhouse
WHEEL_PLATFORMS ?= manylinux_2_36_x86_64 manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 linux_x86_64
WHEELS_PIP_ARGS ?=

COMPOSE_PROJECT ?= nodeground
UP_WAIT ?= 120
COMPOSE_FILES = -f docker/compose.yaml $(if $(filter 1,$(GPU)),-f docker/compose.gpu.yaml)
# docker compose (v2 plugin) when present, else docker-compose (v1).
COMPOSE ?= $(shell if $(DOCKER) compose version >/dev/null 2>&1; then echo "$(DOCKER) compose"; \
	elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; else echo false; fi)

.PHONY: wheels base base-offline base-os images up down test-docker

wheels: install
	@mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download --disable-pip-version-check --no-cache-dir -d $(WHEELHOUSE) \
		--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
		$(foreach p,$(WHEEL_PLATFORMS),--platform $(p)) \
		$(WHEELS_PIP_ARGS) -r docker/requirements.txt -r docker/requirements-orchestrator.txt
	@ls $(WHEELHOUSE) | wc -l | xargs echo "wheels in $(WHEELHOUSE):"

# Public default: python:3.11-slim from a registry, packages from PyPI
# (or from ./wheelhouse with OFFLINE=1).
base:
	$(DOCKER) build -f docker/base/Dockerfile -t $(BASE_TAG) \
		--build-arg BASE_IMAGE=$(PUBLIC_BASE_IMAGE) \
		--build-arg OFFLINE=$(OFFLINE) \
		--build-arg TORCH_INDEX_URL=$(TORCH_INDEX) .

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

# Debian base OS image from the cached rootfs (re-imported only if absent).
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

# Offline path: debootstrapped Debian + ./wheelhouse, no registry, no index.
base-offline: base-os
	@test -n "$$(ls $(WHEELHOUSE)/*.whl 2>/dev/null)" || { echo "no wheels in $(WHEELHOUSE)/: run 'make wheels' first" >&2; exit 1; }
	$(DOCKER) build -f docker/base/Dockerfile -t $(BASE_TAG) \
		--build-arg BASE_IMAGE=$(BASE_OS_TAG) \
		--build-arg OFFLINE=1 .

# Base only if absent (OFFLINE=1 picks the offline base); family images are
# always (re)built, which is a cache hit unless methods/ or proto/ changed.
images:
	@if $(DOCKER) image inspect $(BASE_TAG) >/dev/null 2>&1; then \
		echo "$(BASE_TAG) present"; \
	else \
		$(MAKE) --no-print-directory $(if $(filter 1,$(OFFLINE)),base-offline,base); \
	fi
	@set -e; for f in $(FAMILIES); do \
		echo "building $(IMAGE_PREFIX)/$$f"; \
		$(DOCKER) build -f docker/$$f/Dockerfile -t $(IMAGE_PREFIX)/$$f:latest \
			--build-arg BASE=$(BASE_TAG) . ; \
	done

up: images
	$(COMPOSE) -p $(COMPOSE_PROJECT) $(COMPOSE_FILES) up -d --no-build --remove-orphans
	@# Wait (UP_WAIT seconds, 0 = don't) until every service reports healthy, so an
	@# `orchestrator run` started right after `make up` finds them serving.
	@for i in $$(seq $(UP_WAIT)); do \
		st=$$($(DOCKER) ps -q --filter label=com.docker.compose.project=$(COMPOSE_PROJECT) --filter label=nodeground.family \
			| xargs -r $(DOCKER) inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}healthy{{end}}'); \
		if [ -n "$$st" ] && ! echo "$$st" | grep -qv '^healthy$$'; then echo "services healthy after $${i}s"; break; fi; \
		if [ $$i = $(UP_WAIT) ]; then echo "services not healthy after $(UP_WAIT)s: $$st" >&2; exit 1; fi; \
		sleep 1; \
	done
	$(COMPOSE) -p $(COMPOSE_PROJECT) $(COMPOSE_FILES) ps

down:
	$(COMPOSE) -p $(COMPOSE_PROJECT) $(COMPOSE_FILES) down --remove-orphans

test-docker: install
	$(PYTHON) -m pytest -m docker tests/docker
