# cpd: `make run` starts the server on the embedded database; `make test` runs the whole suite.
# Bun comes from the npm registry (pinned `bun` package) when it is not on PATH.

BUN_VERSION := 1.4.5
LOCAL_BUN := .tools/node_modules/.bin/bun
BUN ?= $(shell command -v bun 2>/dev/null || echo $(LOCAL_BUN))
DEPS_STAMP := node_modules/.deps-installed

.PHONY: run test test-fast test-timings build check lint typecheck bench soak migrations clean deps test-tools console release release-check release-tools

# Command-line tools the tests drive as users would (unzip -t, xmllint against the sitemap XSD,
# cc for the FFI fixtures, python3 whose csv module reads the usage export, chromium for the web
# console's browser tests, promtool for the alert rules and the metrics format, jq for the README
# walkthrough, flock so parallel test files build one at a time), installed from Debian's packages when missing.
TEST_TOOLS := unzip:unzip xmllint:libxml2-utils cc:gcc python3:python3 chromium:chromium promtool:prometheus jq:jq flock:util-linux
# `make release-check` runs the linux-arm64 artifact under qemu with Debian's arm64 glibc as its root.
RELEASE_TOOLS := qemu-aarch64-static:qemu-user-static /usr/aarch64-linux-gnu/lib/libc.so.6:libc6-arm64-cross \
  /usr/aarch64-linux-gnu/lib/libgcc_s.so.1:libgcc-s1-arm64-cross

# The web console and the OpenAPI UI, bundled for the browser by Bun.build and embedded in the binary
# as one generated module (git-ignored); see scripts/build-console.ts.
CONSOLE_BUNDLE := src/console/bundle.generated.ts

run: build
	DATA_DIR=$${DATA_DIR:-./data} exec ./dist/cpd serve

# The static checks first (4 s): a type error in a test file is not caught by running it.
# Test files run in parallel worker processes, the slowest first (their durations are in
# tests/timings.json; `make test-timings` measures them again). The files named in TEST_APART run
# afterwards, one at a time: they restart PostgreSQL clusters, cut the database away or measure time,
# wakes and memory, which other files running beside them would disturb. Both parts always run;
# `make test` fails if either has a failing test.
TEST_WORKERS ?= 4
TEST_TIMINGS := tests/timings.json
# File names, not paths, so a file keeps its place when it moves to another directory.
TEST_APART := idle.binary.test.ts stranger-bodies.binary.test.ts hardening.binary.test.ts \
  database-refused.binary.test.ts replicas.pg-restart.binary.test.ts
TEST_PARALLEL = $(BUN) test --timeout 60000 --parallel=$(TEST_WORKERS) --timings=$(TEST_TIMINGS) \
  $(foreach f,$(TEST_APART),--path-ignore-patterns='**/$(f)')

test: check build test-tools
	@status=0; \
	$(TEST_PARALLEL) || status=1; \
	$(BUN) test --timeout 60000 $(TEST_APART) || status=1; \
	exit $$status

# Unit and integration tests on PostgreSQL only (under a minute): no compiled binary, browser,
# end-to-end, PGlite or large-data (*.large.test.ts) runs. `make test` runs them all before a commit
# is called finished. Six workers, as most of these files wait on PostgreSQL and timers rather than
# compute, and without a fresh module registry per file (--no-isolate: each file's app and database
# are its own already; 51 s against 82 s with four isolated workers on two cores).
TEST_FAST_WORKERS ?= 6
test-fast: $(DEPS_STAMP) $(CONSOLE_BUNDLE)
	TEST_DB_KINDS=postgres $(BUN) test --timeout 60000 --parallel=$(TEST_FAST_WORKERS) --no-isolate --timings=$(TEST_TIMINGS) \
	  --path-ignore-patterns='**/*.binary.test.ts' --path-ignore-patterns='**/*.browser.test.ts' \
	  --path-ignore-patterns='**/*.pglite.test.ts' --path-ignore-patterns='tests/e2e/**' --path-ignore-patterns='**/*.large.test.ts'

# Measures every parallel file's duration again into tests/timings.json (after files were added,
# moved or made slower), so the slowest start first; commit the result.
test-timings: build test-tools
	rm -f $(TEST_TIMINGS)
	$(TEST_PARALLEL) --update-timings

# Each entry is command-or-file:debian-package.
test-tools: TOOLS = $(TEST_TOOLS)
release-tools: TOOLS = $(RELEASE_TOOLS)
test-tools release-tools:
	@missing=$$(for t in $(TOOLS); do c=$${t%%:*}; command -v $$c >/dev/null 2>&1 || [ -e $$c ] || echo $${t#*:}; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi
	@# A Chinese font, so the console's screenshots of the China site show its text (assertions read the DOM, not pixels).
	@if ! fc-list :lang=zh family 2>/dev/null | grep -q .; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y -qq fonts-wqy-microhei || { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq fonts-wqy-microhei; }; \
	fi

build: dist/cpd

console: $(CONSOLE_BUNDLE)

$(CONSOLE_BUNDLE): $(DEPS_STAMP) scripts/build-console.ts $(shell find src/console/app -type f 2>/dev/null)
	$(BUN) scripts/build-console.ts

# Worker threads' entry points: each is built into the binary beside src/main.ts.
WORKERS := src/modules/metering/metering.tokens.worker.ts

# `cpd version` names the commit and target (scripts/release.ts sets the same for each release target).
BUILD_DEFINES = --define CPD_BUILD_COMMIT='"$(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"' \
  --define CPD_BUILD_TARGET='"$(shell uname -s | tr A-Z a-z)-$(shell uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')"'

dist/cpd: $(DEPS_STAMP) $(CONSOLE_BUNDLE) $(shell find src migrations -type f 2>/dev/null) CHANGELOG.md package.json Makefile
	@mkdir -p dist
	@# Build to a private name, then rename: running copies keep their file, parallel builds do not clash.
	@# Why each flag:
	@#  --compile                 one self-contained executable (runtime, code, migrations, assets).
	@#  --bytecode --format=esm   precompiled bytecode (cold start ~96 -> ~28 ms); bytecode needs ESM.
	@#  --splitting               modules imported only with import() (other commands, PGlite, SDKs used
	@#                            at first use) go into their own embedded chunks, loaded when imported;
	@#                            in one chunk they cost ~8 ms at every start.
	@#  --minify-whitespace --minify-syntax   smaller bundle, same names.
	@#  $(WORKERS)                 worker threads' entry points, kept at their paths under src/ in the binary.
	@# Never plain minify: it implies identifier minification (bun's minify-identifiers), and with renamed
	@# identifiers Elysia/TypeBox silently stop coercing and range-checking query values (limit=0 or
	@# limit=201 pass as strings), so the shipped binary would accept what the API documents as 400.
	@# tests/e2e/validation.binary.test.ts holds the binary to every schema constraint.
	tmp=dist/.cpd.$$$$ && $(BUN) build src/main.ts $(WORKERS) --compile --bytecode --splitting --format=esm --minify-whitespace --minify-syntax --sourcemap=none $(BUILD_DEFINES) --outfile $$tmp && mv -f $$tmp dist/cpd

# One executable per supported host in dist/release/ with SHA256SUMS (scripts/release.ts says how).
release: $(DEPS_STAMP) $(CONSOLE_BUNDLE)
	$(BUN) scripts/release.ts

# The linux-arm64 artifact under qemu: version, /healthz, register and login on the embedded database.
release-check: release release-tools
	$(BUN) test --timeout 60000 ./tests/release/arm64.check.ts

check: typecheck lint

typecheck: $(DEPS_STAMP) $(CONSOLE_BUNDLE)
	$(BUN) x tsc --noEmit -p .
	$(BUN) x tsc --noEmit -p src/console/app

lint: $(DEPS_STAMP)
	$(BUN) x biome lint src tests bench scripts

bench: build
	$(BUN) run bench/run.ts

# Ten minutes at c=64 on the built binary, the server's RSS sampled (not part of bench: too long).
soak: build
	$(BUN) run bench/soak.ts

# After changing a *.tables.ts: generate SQL with drizzle-kit and embed it in the binary.
migrations: $(DEPS_STAMP)
	$(BUN) x drizzle-kit generate $(if $(NAME),--name $(NAME))
	$(BUN) scripts/embed-migrations.ts

deps: $(DEPS_STAMP)

$(DEPS_STAMP): package.json bun.lock $(wildcard patches/*.patch) | $(BUN)
	@# A changed patch (a new hash) makes bun install that package again, patched.
	$(BUN) install --frozen-lockfile
	@touch $@

$(LOCAL_BUN):
	npm install --prefix .tools --no-save --no-package-lock --no-audit --no-fund bun@$(BUN_VERSION)
	@# If npm skipped bun's postinstall (ignore-scripts), .bin/bun is a placeholder: link the platform package's binary.
	@$(LOCAL_BUN) --version >/dev/null 2>&1 || for b in .tools/node_modules/@oven/bun-*/bin/bun; do \
	  "$$b" --version >/dev/null 2>&1 && ln -sf "../$${b#.tools/node_modules/}" $(LOCAL_BUN) && break; done
	@echo "using bun $$($(LOCAL_BUN) --version) from $(LOCAL_BUN)"

clean:
	rm -rf dist node_modules .tools
