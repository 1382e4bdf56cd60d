# sluice: `make test` is what CI runs (.ci/run) and what README tells you to run.

GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.6.1
FUZZTIME    ?= 200000x
# redisstore's fuzz targets run every input against a real redis-server
# (about 150 inputs a second here, against tens of thousands in process):
# they get a smaller count, so that make test stays within minutes.
FUZZTIME_REDIS ?= 10000x
BENCHTIME   ?= 1s

.PHONY: test quick quick-check redis chromium fmt-check spdx vet staticcheck unit fuzz bench bench-redis bench-serve bench-envoy pictures image-binary bench-hotkey

test: redis chromium fmt-check spdx vet staticcheck unit fuzz

# The developer's loop, on a laptop, without root or apt: gofmt, SPDX, vet
# and every test without the race detector, except the live page's Chromium
# test and the Redis Cluster and Sentinel tests (QUICK_SKIP). It uses the
# redis-server already on PATH (brew install redis, apt install
# redis-server, ...); set SLUICE_CHROMIUM to a Chromium binary and run
# `go test -run Chromium ./internal/server/` for the page. make test stays
# what CI runs, and what to run before asking for a merge.
QUICK_SKIP ?= Cluster|Sentinel|Chromium
quick: quick-check fmt-check spdx vet
	$(GO) test -count=1 -skip '$(QUICK_SKIP)' ./...

quick-check:
	@command -v redis-server >/dev/null 2>&1 || { 		echo "make quick: redis-server is not on PATH; the Redis store's tests start their own."; 		echo "  Install Redis (brew install redis, or apt install redis-server) and retry."; exit 1; }

# The Redis store's tests start real redis-server processes (standalone and a
# 3-master Cluster): install them when missing (apt-get, as root) or fail.
redis:
	@bash .ci/install-redis

# The live page's test (internal/server) drives a real headless Chromium:
# install it when missing (apt-get, as root) or fail.
chromium:
	@bash .ci/install-chromium

# The pictures of README's "See what a policy does" (docs/*.svg): each seed
# worked example, and one burst through every algorithm.
pictures:
	bash docs/pictures.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Every .go file starts with an SPDX license line (see .ci/spdx; add the
# missing ones with .ci/spdx --fix).
spdx:
	@bash .ci/spdx

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

# internal/rawconn makes raw system calls only without the race detector
# (under it, it goes through package syscall, which the detector sees), so
# its package and sluice serve end to end (gRPC and Redis) also run without.
unit:
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 ./internal/rawconn/ ./cmd/sluice/

# A short pass of every fuzz target in the tree (their seed corpora also run
# in `unit`). Targets are found by name, so a new Fuzz function is included.
# The budget is a count of executions, not a duration: go1.26's fuzzing
# coordinator can report its own -fuzztime deadline as a failure on a loaded
# machine (golang/go#75804, fixed in go1.27); a count has no deadline to race.
fuzz:
	@set -e; for f in $$(git ls-files '*_test.go'); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			n=$(FUZZTIME); [ "$$(dirname $$f)" = redisstore ] && n=$(FUZZTIME_REDIS); \
			echo "fuzz $$t ($$(dirname $$f), $$n)"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $$n ./$$(dirname $$f); \
		done; \
	done

# The binary the container image copies (Dockerfile): static (no cgo, so no
# libc to find at run time), without the builder's paths. GOOS and GOARCH
# pass through the environment; the deploy package's tests check the result.
IMAGE_BINARY ?= bin/sluice
image-binary:
	CGO_ENABLED=0 GOOS=$${GOOS:-linux} $(GO) build -trimpath -ldflags='-s -w' -o $(IMAGE_BINARY) ./cmd/sluice

# The comparative benchmarks of BENCHMARKS.md (they take minutes; run them on
# a quiet machine).
bench:
	$(GO) test -run '^$$' -bench '^BenchmarkCompare' -benchtime $(BENCHTIME) -count 3 -cpu 1 -timeout 60m ./memstore/

bench-redis: redis
	for i in 1 2 3 4 5 6; do \
		$(GO) test -run '^$$' -bench 'Take/store=/alg=gcra/' -benchtime 2s ./redisstore/; \
	done
	bash redisstore/testdata/ceiling.sh 200000

# sluice serve under gRPC load, memory and Redis, with the CPUs shared and
# split (BenchmarkServe); needs taskset (util-linux) for the split cases.
bench-serve: redis
	$(GO) test -run '^$$' -bench 'BenchmarkServe(Memory)?$$' -benchtime 100000x -count 3 ./cmd/sluice/

# sluice serve beside envoyproxy/ratelimit on one Redis load
# (BenchmarkServeVsEnvoy; it builds envoy ratelimit with go install from the
# Go module proxy on first use).
bench-envoy: redis
	$(GO) test -run '^$$' -bench 'BenchmarkServeVsEnvoy' -benchtime 100000x -count 2 ./cmd/sluice/

# Leases and shards on a hot key (BENCHMARKS.md, "Leases and shards"): 3
# sluice serve processes on one Redis with and without rate_limit.lease
# (round trips from Redis's INFO commandstats), the same through the
# library, and shards 1 vs 3 on a 3-master Redis Cluster.
bench-hotkey: redis
	$(GO) test -run '^$$' -bench 'BenchmarkHotKey' -benchtime 20000x -count 3 ./cmd/sluice/
	$(GO) test -run '^$$' -bench 'BenchmarkHotKey' -benchtime 100000x -count 3 ./redisstore/
