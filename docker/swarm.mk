# Docker Swarm: the method families as replicated services on an overlay network, and a sweep as a
# one-shot orchestrator container on that network. Included by the top-level Makefile.
#
#   make swarm-up [SWARM_REPLICAS="gnn=2 graphtransformer=2"] [SWARM_FAMILIES="gnn"] [GPU=1]
#   make swarm-run ARGS="--methods mlp,gcn --datasets cora --endpoint gnn=dns:///gnn:50051 --store /runs/cora.sqlite"
#   make swarm-down
#
# The stack is named after this checkout (CHECKOUT_ID, docker/containers.mk), so two clones' stacks do not
# replace each other. Services use endpoint_mode dnsrr: the service name resolves to every replica, and the
# orchestrator keeps one channel per replica (its --endpoint FAMILY=dns:///FAMILY:50051). The
# stores land in SWARM_RUNS (a host directory mounted at /runs), the cache in SWARM_CACHE.
# The overlay is a shared network: every service serves TLS and requires a shared token, made
# once into SWARM_TLS (a self-signed certificate for the name "nodeground" and a random token,
# handed to the services as Docker secrets and to swarm-run's orchestrator as a read-only mount).

SWARM_STACK ?= $(CHECKOUT_ID)
SWARM_REPLICAS ?=
SWARM_FAMILIES ?=
SWARM_WAIT ?= 300
SWARM_RUNS ?= $(CURDIR)/runs
SWARM_CACHE ?= $(HOME)/.cache/nodeground
SWARM_WEIGHTS ?= $(SWARM_CACHE)/weights
SWARM_TLS ?= $(CURDIR)/.cache/swarm-tls
SWARM_NETWORK = $(SWARM_STACK)_nodeground
ORCHESTRATOR_IMAGE ?= $(IMAGE_PREFIX)/orchestrator:latest

.PHONY: swarm-init swarm-tls swarm-up swarm-run swarm-down image-orchestrator

# Its own tar context (the family images' context leaves the wheelhouse out); offline it carries
# the wheelhouse, whose orchestrator wheels `make wheels` fetches.
## nodeground/orchestrator, the image swarm-run starts (a few minutes; seconds when cached)
image-orchestrator: images
	tar -chf - --exclude=__pycache__ --exclude='*.pyc' docker/orchestrator/Dockerfile docker/requirements-orchestrator.txt \
		pyproject.toml README.md contract methods orchestrator datasets $(if $(filter 1,$(OFFLINE)),$(WHEELHOUSE)) \
		| $(DOCKER) build -f docker/orchestrator/Dockerfile -t $(ORCHESTRATOR_IMAGE) --build-arg BASE=$(BASE_TAG) --build-arg OFFLINE=$(OFFLINE) -

## A single-node swarm, unless this engine is already in one (seconds)
swarm-init:
	@if [ "$$($(DOCKER) info --format '{{.Swarm.LocalNodeState}}')" != active ]; then \
		$(DOCKER) swarm init --advertise-addr 127.0.0.1 >/dev/null && echo "swarm initialised (single node)"; \
	fi

# Made once and kept (a secret's content cannot change under a deployed stack).
## The stack's self-signed certificate and token in SWARM_TLS (seconds)
swarm-tls:
	@mkdir -p $(SWARM_TLS)
	@test -s $(SWARM_TLS)/cert.pem -a -s $(SWARM_TLS)/key.pem || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-days 825 -subj /CN=nodeground -addext "subjectAltName=DNS:nodeground,IP:127.0.0.1" \
		-keyout $(SWARM_TLS)/key.pem -out $(SWARM_TLS)/cert.pem 2>/dev/null
	@test -s $(SWARM_TLS)/token || openssl rand -hex 32 > $(SWARM_TLS)/token

## Deploy the families as a Swarm stack and wait until every replica runs (minutes; SWARM_WAIT=300 s at most)
swarm-up: install swarm-init swarm-tls images image-orchestrator
	@mkdir -p .cache $(SWARM_WEIGHTS)
	$(PYTHON) docker/services.py stack --weights $(SWARM_WEIGHTS) --prefix $(IMAGE_PREFIX) --tls $(SWARM_TLS) \
		$(if $(SWARM_REPLICAS),--replicas $(SWARM_REPLICAS)) $(if $(SWARM_FAMILIES),--families $(SWARM_FAMILIES)) \
		$(if $(filter 1,$(GPU)),--gpu) > .cache/stack.yaml
	$(DOCKER) stack deploy -c .cache/stack.yaml $(SWARM_STACK)
	@for i in $$(seq $(SWARM_WAIT)); do \
		st=$$($(DOCKER) service ls --filter label=com.docker.stack.namespace=$(SWARM_STACK) --format '{{.Replicas}}'); \
		if [ -n "$$st" ] && ! echo "$$st" | awk -F/ '$$1 != $$2 {bad=1} END {exit !bad}'; then echo "swarm services running after $${i}s: $$(echo $$st)"; break; fi; \
		if [ $$i = $(SWARM_WAIT) ]; then echo "swarm services not running after $(SWARM_WAIT)s: $$st" >&2; exit 1; fi; \
		sleep 1; \
	done

## A sweep (ARGS="...") in a one-shot orchestrator container on the stack's network (the sweep's own time)
swarm-run: install
	@test -n "$(ARGS)" || { echo 'usage: make swarm-run ARGS="--methods ... --datasets ... --endpoint gnn=dns:///gnn:50051 --store /runs/NAME.sqlite"' >&2; exit 2; }
	@mkdir -p $(SWARM_RUNS) $(SWARM_CACHE)
	$(DOCKER) run --rm --network $(SWARM_NETWORK) --user $$(id -u):$$(id -g) \
		-v $(SWARM_RUNS):/runs -v $(SWARM_CACHE):/cache -v $(SWARM_TLS):/tls:ro \
		-e NODEGROUND_TLS_CA=/tls/cert.pem -e NODEGROUND_TLS_NAME=nodeground -e NODEGROUND_TOKEN_FILE=/tls/token \
		$(if $(NODEGROUND_MIRROR),-v $(NODEGROUND_MIRROR):/mirror:ro -e NODEGROUND_MIRROR=/mirror) \
		$(ORCHESTRATOR_IMAGE) run --services embedded $(ARGS)

## Remove the stack and its network (seconds; 90 s at most)
swarm-down: install
	-$(DOCKER) stack rm $(SWARM_STACK)
	@# stack rm gives up on a network whose tasks are still stopping: remove it once they are gone.
	@for i in $$(seq 90); do \
		if [ -z "$$($(DOCKER) ps -aq --filter label=com.docker.stack.namespace=$(SWARM_STACK))" ]; then \
			$(DOCKER) network rm $(SWARM_NETWORK) >/dev/null 2>&1 || true; \
			if ! $(DOCKER) network inspect $(SWARM_NETWORK) >/dev/null 2>&1; then echo "stack $(SWARM_STACK) removed"; exit 0; fi; \
		fi; \
		sleep 1; \
	done; echo "stack $(SWARM_STACK) still has containers or its network after 90 s" >&2; exit 1
