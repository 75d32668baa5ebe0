GO ?= go

.PHONY: test lint cross cross-test msi bench bench-quick bench-fleet bench-go fuzz fuzz-short integration build

build:
	$(GO) build -o bin/patchline ./cmd/patchline

# The whole test suite, after the lint checks, then every fuzz target for a
# few thousand inputs beyond its seed corpus. Tests that need PostgreSQL,
# Redis or Chromium run when PATCHLINE_TEST_POSTGRES, PATCHLINE_TEST_REDIS or
# PATCHLINE_TEST_CHROMIUM are set and skip with a message otherwise.
#
# Two passes: every test without the race detector, then again with it and
# -short, which skips what the detector cannot see into or learns nothing
# from: the end-to-end tests, whose binary runs in processes of its own,
# and the checks of every record of the bundled data, in one goroutine.
# RACEFLAGS turns off checkptr, which -race turns on, for modernc's SQLite
# only: it is C translated to Go, made of unsafe.Pointer conversions, and
# checking each of them doubled the time of every test that opens a
# catalog. The module's own packages keep the check.
RACEFLAGS = -race -gcflags='modernc.org/...=-d=checkptr=0'
test: lint cross-test
	$(GO) test -count=1 -timeout 30m ./...
	$(GO) test $(RACEFLAGS) -short -count=1 -timeout 30m ./...
	@$(MAKE) --no-print-directory fuzz-short

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@sc=$$(command -v staticcheck || echo $$($(GO) env GOPATH)/bin/staticcheck); \
	if [ -x "$$sc" ]; then $$sc ./...; else echo "staticcheck not installed (go install honnef.co/go/tools/cmd/staticcheck@v0.8.2): skipped"; fi

# The end-to-end tests, which build the binary and run it (cmd/patchline).
integration:
	$(GO) test -count=1 -timeout 30m ./cmd/patchline

# The platforms the agent ships for besides Linux: the binary is built,
# the packages whose code differs by platform vetted (the agent and the
# command; make lint vets the rest) and the agent's tests compiled for
# each (they run on Linux, the Windows agent also under Wine: see
# cmd/patchline/windows_e2e_test.go). make test builds one architecture of
# each system: the module has no code that differs by architecture, so the
# other only compiles the dependencies once more.
CROSS = windows/amd64 windows/arm64 darwin/arm64 darwin/amd64
cross-test:
	@$(MAKE) --no-print-directory cross CROSS="windows/amd64 darwin/arm64"
cross:
	@for p in $(CROSS); do \
	  echo "== $$p"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./cmd/patchline ./internal/agent/... || exit 1; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -o /dev/null ./cmd/patchline || exit 1; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) test -c -o /dev/null ./internal/agent || exit 1; \
	done

# The Windows installer of the agent, built with msitools' wixl
# (packaging/windows/patchline.wxs): bin/patchline-agent-amd64.msi.
MSIVERSION ?= 0.1.0
msi:
	mkdir -p bin/msi
	GOOS=windows GOARCH=amd64 $(GO) build -o bin/msi/patchline.exe ./cmd/patchline
	cd bin/msi && wixl -a x64 -D Version=$(MSIVERSION) -o ../patchline-agent-amd64.msi ../../packaging/windows/patchline.wxs

# The full-scale benchmarks: synthetic feeds, ingest, the lookup API beside
# a bare handler, agent check-ins; prints the table of bench/RESULTS.md.
# bench-go runs every Go benchmark of the module.
bench:
	GO=$(GO) sh bench/run.sh

# The same at 30,000 CVEs, in a few minutes, for everyday use.
bench-quick:
	GO=$(GO) CVES=30000 OSV=20000 DURATION=5s ROUNDS=3 AGENTS=1000 BENCH_DIR=/tmp/patchline-bench-quick sh bench/run.sh

# Command delivery through the agents' long polls at 10,000 simulated
# agents over two replicas on PostgreSQL (a database created for the run
# on 127.0.0.1:5432, dropped at the end) and Redis: bench/fleet.sh.
# AGENTS, COMMANDS, RAMP, WAIT, PG and REDIS change it.
bench-fleet:
	GO=$(GO) bash bench/fleet.sh

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The packages that have fuzz targets.
FUZZPKGS = $(shell $(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | \
	while read pkg dir; do grep -qs '^func Fuzz' $$dir/*_test.go && echo $$pkg; done)

# Runs every fuzz target for FUZZTIME each (default 30s). A failing input
# is written to the package's testdata/fuzz, where it stays a test case.
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 60s
fuzz:
	@for pkg in $(FUZZPKGS); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg || exit 1; \
	  done; \
	done

# Every fuzz target for a fixed number of inputs: the smoke run of make test.
# A count rather than a duration: go1.26's fuzzing coordinator can fail a
# duration-bounded run with a spurious "context deadline exceeded" when the
# deadline meets a busy worker (golang/go#75804), which a count never does.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=3000x FUZZMINIMIZETIME=200x
