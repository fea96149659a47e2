# Everything a developer does has a target. `make standalone` and `make test` are the two
# the README shows first; both create .venv and install what they need on their own.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: standalone cluster test lint bench bench-cluster bench-peers bench-txn peer-servers fuzz fuzz-admin proto clean install browser zookeeper chaos soak

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml setup.py src/quasar/storage/file/_syncio.c \
		src/quasar/protocol/_batchsplit.c
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

standalone: $(STAMP)
	$(BIN)/quasar standalone

# A cluster on this machine to try out (docs/cluster.md, "Trying it out on one
# machine"): ZooKeeper and BROKERS members on 6650, 6651, ... (admin 8080, 8081, ...),
# data and logs in ./quasar-cluster, in the foreground until Ctrl-C.
BROKERS ?= 2
cluster: $(STAMP) zookeeper
	$(BIN)/quasar cluster up --brokers $(BROKERS)

# The dashboard's browser tests (tests/dashboard) drive Debian's Chromium and its
# chromedriver, which a fresh machine lacks: install them when either is missing
# (as root, or through sudo when there is one). Without either, the browser tests
# say why they cannot run: they fail under CI=true and are skipped elsewhere.
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
browser:
	@if [ ! -x $(CHROMIUM) ] || [ ! -x $(CHROMEDRIVER) ]; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; \
		elif command -v sudo >/dev/null; then SUDO=sudo; \
		else echo "cannot install chromium chromium-driver: neither root nor sudo" >&2; \
			exit 0; fi; \
		$$SUDO apt-get update && \
		$$SUDO apt-get install -y --no-install-recommends chromium chromium-driver; \
	fi

# The ZooKeeper metadata store's tests (tests/storage/test_zookeeper_store.py and
# the others that ask for the `zookeeper` fixture) start Debian's ZooKeeper 3.8 as a
# real process; install the package when its jar is missing, the same way. Without
# it those tests fail under CI=true and are skipped elsewhere, saying why.
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
zookeeper:
	@if [ ! -f $(ZOOKEEPER_JAR) ] || ! command -v java >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; \
		elif command -v sudo >/dev/null; then SUDO=sudo; \
		else echo "cannot install zookeeper: neither root nor sudo" >&2; \
			exit 0; fi; \
		$$SUDO apt-get update && \
		$$SUDO apt-get install -y --no-install-recommends zookeeper; \
	fi

# The suite runs in PYTEST_WORKERS processes (pytest-xdist), a test file to a
# process so a module's broker fixture starts once; most tests wait on brokers,
# ZooKeeper or Spark rather than compute, so two processes use two cores well.
# PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
test: $(STAMP) browser zookeeper
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests tools benchmarks
	$(BIN)/lint-imports

proto: $(STAMP)
	$(BIN)/python tools/gen_protocol.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# Scaling out (docs/performance.md): one partitioned topic on a 1-broker and on a
# 2-broker cluster (its own ZooKeeper, fresh brokers per run), measured in the same
# run; BENCH_CLUSTER_ARGS adds flags, e.g. --rounds 5 --json scaling.json.
BENCH_CLUSTER_ARGS ?=
bench-cluster: $(STAMP) zookeeper
	$(BIN)/python benchmarks/cluster_scaling.py $(BENCH_CLUSTER_ARGS)

# quasar side by side with RabbitMQ, Redis streams and NATS JetStream
# (benchmarks/peers.py, docs/performance.md): installs Debian's rabbitmq-server,
# redis-server and strace when missing (as root, or through sudo), the `bench` extra
# (the peers' Python clients, the nats-server binary, matplotlib) into the venv, then
# starts each server on loopback in turn. The report, JSON and charts go to
# bench-out/peers. PEERS_ARGS passes options (e.g. --duration-s 5 --backlog-mb 100).
BENCH_STAMP := $(VENV)/.bench-installed
PEERS_ARGS ?=
peer-servers:
	@if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || ! command -v redis-server >/dev/null \
			|| ! command -v strace >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; \
		elif command -v sudo >/dev/null; then SUDO=sudo; \
		else echo "cannot install rabbitmq-server redis-server strace: neither root nor sudo" >&2; \
			exit 0; fi; \
		$$SUDO apt-get update && \
		$$SUDO apt-get install -y --no-install-recommends rabbitmq-server redis-server strace; \
	fi

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench-peers: $(BENCH_STAMP) peer-servers
	$(BIN)/python benchmarks/peers.py --out bench-out/peers $(PEERS_ARGS)

# Transactions as the industry measures them (benchmarks/txn_industry.py): produce-only
# transactions committed every 100 ms against none, and 1 consume + 1 produce per
# transaction at 1, 8, 64 and 256 in flight with the batched logs off and on.
# BENCH_TXN_ARGS passes more flags (--repeat 3, --profile-seconds 10, --out FILE).
BENCH_TXN_ARGS ?=
bench-txn: $(STAMP)
	$(BIN)/python benchmarks/txn_industry.py $(BENCH_TXN_ARGS)

# A long run of the fuzzers, on new random sequences each time (the test suite runs
# a short derandomized one): the frame decoder, and command sequences against a live
# broker (tests/hostile/test_stateful_fuzz.py). A failure prints its --hypothesis-seed.
FUZZ_EXAMPLES ?= 500
FUZZ_STEPS ?= 60
fuzz: $(STAMP)
	QUASAR_FUZZ_RANDOM=1 QUASAR_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) QUASAR_FUZZ_STEPS=$(FUZZ_STEPS) \
		$(BIN)/python -m pytest -q -p no:cacheprovider -s tests/hostile/test_stateful_fuzz.py

# A long run of the admin REST fuzzer (schemathesis, from the OpenAPI document) against
# a real broker, on new random inputs each time; the test suite runs a short
# derandomized one (tests/admin/test_admin_openapi_fuzz.py).
ADMIN_FUZZ_EXAMPLES ?= 100
ADMIN_FUZZ_BUDGET_S ?= 1800
fuzz-admin: $(STAMP)
	QUASAR_FUZZ_RANDOM=1 QUASAR_ADMIN_FUZZ_EXAMPLES=$(ADMIN_FUZZ_EXAMPLES) \
		QUASAR_ADMIN_FUZZ_BUDGET_S=$(ADMIN_FUZZ_BUDGET_S) \
		$(BIN)/python -m pytest -q -p no:cacheprovider -s tests/admin/test_admin_openapi_fuzz.py

# A long chaos run (docs/reliability.md): a seeded workload under broker kill -9,
# SIGSTOP pauses, worker kills, proxy faults and a full disk (as root); at least CHAOS_OPERATIONS operations and
# CHAOS_FAULTS faults. Exits non-zero on any violation; CHAOS_SEED replays a run.
CHAOS_SEED ?= $(shell date +%s)
CHAOS_OPERATIONS ?= 100000
CHAOS_FAULTS ?= 120
CHAOS_DURATION_S ?= 3600
chaos: $(STAMP)
	$(BIN)/quasar chaos --seed $(CHAOS_SEED) --operations $(CHAOS_OPERATIONS) \
		--faults $(CHAOS_FAULTS) --duration-s $(CHAOS_DURATION_S)

# The memory soak at scale (docs/reliability.md, "Memory under load"): SOAK_MULTIPLE
# times an entry cache of SOAK_CACHE_MB published past stalled consumers, the broker's
# RSS sampled throughout. Exits non-zero on a lost message or growth past the bound.
SOAK_CACHE_MB ?= 8
SOAK_MULTIPLE ?= 100
SOAK_CLIENT ?= quasar
soak: $(STAMP)
	$(BIN)/python benchmarks/memory_soak.py --cache-mb $(SOAK_CACHE_MB) \
		--multiple $(SOAK_MULTIPLE) --client $(SOAK_CLIENT)

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
	find src -name "*.so" -delete
