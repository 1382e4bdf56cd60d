# sluice: `make test` is what CI runs (.ci/run) and what README tells you to run.

GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.6.1
FUZZTIME    ?= 10s
BENCHTIME   ?= 1s

.PHONY: test fmt-check vet staticcheck unit fuzz bench

test: fmt-check vet staticcheck unit fuzz

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

unit:
	$(GO) test -race -count=1 ./...

# A short pass of every fuzz target (the seed corpora also run in `unit`).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzModels$$' -fuzztime $(FUZZTIME) .
	@if [ -d replay ]; then $(GO) test -run '^$$' -fuzz '^FuzzParseTrace$$' -fuzztime $(FUZZTIME) ./replay; fi

# The comparative benchmarks of BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./memstore/
