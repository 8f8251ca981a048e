# Contributed-method targets. Included by the top-level Makefile after
# docker/containers.mk (which defines DOCKER, IMAGE_PREFIX, BASE_TAG, the
# Debian suite/mirror and the rootfs cache).
#
#   make image-NAME         build nodeground/NAME, the family in methods/NAME/ (after `orchestrator methods new NAME`)
#   make image-centroid     the Node.js method: npm deps on the host, a debootstrapped Debian with nodejs
#   make validate-NAME      orchestrator validate nodeground/NAME (sandboxed)
#   make validate-images    validate every built-in image, the Node.js method included
#   make test-contrib       the docker-marked contributor tests

NODE_METHOD ?= centroid
NODE_METHOD_DIR ?= methods/$(NODE_METHOD)
NPM ?= npm
# The Node.js runtime image: debootstrapped Debian with Debian's nodejs (offline: no registry),
# or, with NODE_OS_IMAGE=node:20-bookworm-slim, a public image.
NODE_OS_TAG ?= $(IMAGE_PREFIX)/node-os:$(DEBIAN_SUITE)
NODE_OS_IMAGE ?= $(NODE_OS_TAG)
NODE_ROOTFS_TAR ?= $(ROOTFS_DIR)/$(DEBIAN_SUITE)-minbase-nodejs.tar
# A fit checks its deadline between epochs, so the deadline check's grace must hold one default epoch:
# NAGphormer's on the 1,281 x 1,024 case takes over 10 s of a loaded 2-core machine (measured 2026-12-02).
VALIDATE_ARGS ?= --grace 30
# GFM images read their checkpoints from where `make weights` puts them (mounted read-only);
# the in-context GFMs, whose weights are unreachable offline, run a random-init stand-in:
# the conformance check tests the contract, not the network, so its structure is the smallest
# (VALIDATE_ARCH= checks the official structure: hours on a 2-core CPU).
VALIDATE_WEIGHTS ?= $(shell $(WEIGHTS_DIR_CMD))
VALIDATE_ARCH ?= tiny

.PHONY: node-deps node-os image-$(NODE_METHOD) validate-images test-contrib

# Pure-JavaScript dependencies (no native addons), installed on the host from the
# committed lock file and copied into the image: containers need no registry.
$(NODE_METHOD_DIR)/node_modules/.package-lock.json: $(NODE_METHOD_DIR)/package.json $(NODE_METHOD_DIR)/package-lock.json
	cd $(NODE_METHOD_DIR) && $(NPM) ci --omit=dev --no-audit --no-fund
## The Node.js method's npm dependencies, on the host from its lock file (seconds)
node-deps: $(NODE_METHOD_DIR)/node_modules/.package-lock.json

$(NODE_ROOTFS_TAR):
	@mkdir -p $(ROOTFS_DIR)
	rm -rf $(ROOTFS_DIR)/tree-nodejs
	debootstrap --variant=minbase --include=nodejs,ca-certificates \
		$(DEBIAN_SUITE) $(ROOTFS_DIR)/tree-nodejs $(DEBIAN_MIRROR)
	chroot $(ROOTFS_DIR)/tree-nodejs apt-get clean
	rm -rf $(ROOTFS_DIR)/tree-nodejs/var/lib/apt/lists/* $(ROOTFS_DIR)/tree-nodejs/var/cache/apt/*.bin \
		$(ROOTFS_DIR)/tree-nodejs/usr/share/doc/* $(ROOTFS_DIR)/tree-nodejs/usr/share/man/* \
		$(ROOTFS_DIR)/tree-nodejs/usr/share/locale/*
	tar -C $(ROOTFS_DIR)/tree-nodejs --numeric-owner -cf $@.tmp .
	mv $@.tmp $@
	rm -rf $(ROOTFS_DIR)/tree-nodejs

## The Node.js runtime image: debootstrapped Debian with nodejs, or NODE_OS_IMAGE (minutes the first time)
node-os:
	@if $(DOCKER) image inspect $(NODE_OS_IMAGE) >/dev/null 2>&1; then \
		echo "$(NODE_OS_IMAGE) present"; \
	elif [ "$(NODE_OS_IMAGE)" = "$(NODE_OS_TAG)" ]; then \
		$(MAKE) --no-print-directory $(NODE_ROOTFS_TAR) && \
		echo "importing $(NODE_ROOTFS_TAR) as $(NODE_OS_TAG)" && \
		$(DOCKER) import \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'CMD ["node"]' \
			$(NODE_ROOTFS_TAR) $(NODE_OS_TAG); \
	else \
		$(DOCKER) pull $(NODE_OS_IMAGE); \
	fi

## The Node.js method's image (a couple of minutes the first time; seconds after)
image-$(NODE_METHOD): node-deps node-os
	$(DOCKER) build -f $(NODE_METHOD_DIR)/Dockerfile -t $(IMAGE_PREFIX)/$(NODE_METHOD):latest \
		--build-arg NODE_BASE=$(NODE_OS_IMAGE) .

# Any other family (methods/NAME/manifest.toml: a scaffolded method, a built-in family): built on the base image.
## nodeground/NAME from methods/NAME (a few minutes when changed; seconds when current)
image-%:
	@test -f methods/$*/manifest.toml || { echo "no family $* (no methods/$*/manifest.toml; scaffold one with: orchestrator methods new $*)" >&2; exit 2; }
	@$(MAKE) --no-print-directory images FAMILIES=$*

## The contract check on nodeground/NAME, sandboxed: orchestrator validate (a few minutes)
validate-%: install
	$(VENV)/bin/orchestrator validate $(IMAGE_PREFIX)/$*:latest $(VALIDATE_ARGS)

## The contract check on every built-in family image and the Node.js method (several minutes)
validate-images: install
	@set -e; for f in $(FAMILIES) $(NODE_METHOD); do \
		echo "validating $(IMAGE_PREFIX)/$$f"; \
		$(VENV)/bin/orchestrator validate $(IMAGE_PREFIX)/$$f:latest --weights $(VALIDATE_WEIGHTS) \
			--env NODEGROUND_RANDOM_INIT_WEIGHTS=1 --env NODEGROUND_RANDOM_INIT_ARCH=$(VALIDATE_ARCH) $(VALIDATE_ARGS); \
	done

## Contributor docker tests: the scaffold's image and Lite submission, broken and hostile images (minutes)
test-contrib: install
	$(PYTHON) -m pytest -m docker tests/docker/test_contrib_*.py
