# dsync: make test runs every check CI runs; make zk starts a ZooKeeper to
# try dsync by hand. Both install what is missing first (make deps).

GO ?= go

# Debian packages the tests need: ZooKeeper, a JDK (java runs the servers and
# the Curator peer, javac compiles that peer), and Curator's recipes.
APT_PACKAGES := zookeeper default-jdk-headless libcurator-recipes-java
ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
CURATOR_JAR := /usr/share/java/curator-recipes.jar

# check_deps sets $$missing to what is not installed. A JDK counts from
# $$JAVA_HOME or $$PATH; ZooKeeper counts from $$DSYNC_ZOOKEEPER_CLASSPATH too.
check_deps = missing=""; \
	have() { { [ -n "$$JAVA_HOME" ] && [ -x "$$JAVA_HOME/bin/$$1" ]; } || command -v "$$1" >/dev/null 2>&1; }; \
	have java || missing="$$missing java"; \
	have javac || missing="$$missing javac"; \
	[ -n "$$DSYNC_ZOOKEEPER_CLASSPATH" ] || [ -f $(ZOOKEEPER_JAR) ] || missing="$$missing $(ZOOKEEPER_JAR)"; \
	[ -f $(CURATOR_JAR) ] || missing="$$missing $(CURATOR_JAR)"

.PHONY: deps test zk demo

deps:
	@$(check_deps); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "deps: missing:$$missing" >&2; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "deps: installing $(APT_PACKAGES)" >&2; \
		apt-get update || exit 1; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y $(APT_PACKAGES) || exit 1; \
		$(check_deps); \
		if [ -z "$$missing" ]; then exit 0; fi; \
		echo "deps: still missing after apt-get install:$$missing" >&2; \
		exit 1; \
	fi; \
	echo "deps: install them with: sudo apt-get install $(APT_PACKAGES)" >&2; \
	exit 1

# About 9 to 12 minutes on 2 cores: the root package takes 8 to 11 (half
# of it in serial tests that bound how long calls take), the others
# about as long in all, one after another beside it; the timeout catches a
# test that hangs, with room for a slower machine.
test: deps
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need gofmt -w:" >&2; \
		echo "$$unformatted" >&2; \
		exit 1; \
	fi
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# Prints the server's connect string on the first line of stdout and runs
# until Ctrl-C.
zk: deps
	@$(GO) run ./internal/cmd/zkserver

# A demo to watch in a terminal: three worker processes under one global
# bound, then two `dsync lock` commands taking turns. It starts and stops its
# own ZooKeeper; `make demo ZK=host:port` uses an existing one instead.
ZK ?=
demo: deps
	@$(GO) run ./examples/demo -zk "$(ZK)"

# Measures dsync against go-zookeeper's zk.Lock and Curator on 1, 8 and 32
# sessions in one run (about 12 minutes), on loopback and through proxies
# that delay every packet by 1 ms and 5 ms each way: prints Markdown tables
# and writes them to bench/results.md, with a chart to bench/chart.svg, and
# the 1 ms table to README.md.
.PHONY: bench
bench: deps
	$(GO) run ./bench

# The chaos suite (several minutes): worker processes hold dsync locks on a
# 3-server ensemble while faults strike, until 10,000 holds and 5 faults of
# each kind; then the checks (chaos/main.go says which). Writes
# chaos/results.md and the table of README.md's Reliability section, and
# fails if a check did.
.PHONY: chaos
chaos: deps
	$(GO) run ./chaos -holds 10000 -faults 5 -report chaos/results.md -readme README.md
