#!/usr/bin/env bash
# Draws docs/*.svg with sluice simulate (run from the repository root, or
# via `make pictures`). Each is computed with the exact model on a virtual
# clock, so the pictures change only when the models do.
set -euo pipefail
cd "$(dirname "$0")/.."
sim() { go run ./cmd/sluice simulate "$@"; }
mkdir -p docs
go build -o /dev/null ./cmd/sluice

# The seed worked examples (examples/README.md).
sim --algorithm token-bucket --limit 5 --period 1s --burst 10 examples/rider.trace \
	--title "rider.trace: a rider app opening (token bucket 5/s, burst 10)" -o docs/rider.svg
for alg in fixed-window sliding-log sliding-window token-bucket; do
	sim --algorithm $alg --limit 100 --period 1m examples/boundary.trace --from 50 --to 70 \
		--title "boundary.trace: 100 at 59 s, 100 at 60 s ($alg, 100 per minute)" -o docs/boundary-$alg.svg
done
sim --algorithm sliding-window --limit 50 --period 1m examples/weighted.trace \
	--title "weighted.trace: the sliding-window counter's weighted count (50 per minute)" -o docs/weighted.svg
sim --algorithm leaky-bucket --limit 3000 --period 1s --burst 5000 examples/gps.trace \
	--title "gps.trace: GPS bursts into a leaky-bucket queue (5000, drains 3000/s)" -o docs/gps.svg

# One burst, every algorithm: 5 per second (burst 10 for the buckets).
pattern="burst 12 at 0.5, then 1 every 100ms for 2s, burst 6 at 3.2"
for alg in token-bucket leaky-bucket fixed-window sliding-log sliding-window; do
	burst=()
	case $alg in token-bucket | leaky-bucket) burst=(--burst 10) ;; esac
	sim --algorithm $alg --limit 5 --period 1s "${burst[@]}" --pattern "$pattern" \
		--title "$alg: $pattern" -o docs/burst-$alg.svg
done
