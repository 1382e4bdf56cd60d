#!/usr/bin/env bash
# ceiling.sh measures what redis-server itself can do on this machine, for
# BENCHMARKS.md: redis-benchmark sending EVALSHA, at 64 clients with and
# without pipelining, of
#   - a trivial script (return 1): the ceiling of any one-script limiter;
#   - singles.lua (with bucket.lua and fixed.lua) deciding one GCRA and one
#     fixed-window request (100/s) on Redis TIME over 100k keys, with the
#     arguments redisstore sends for a lone Take(policy, key, 1);
#   - INCRBY and EXPIRE, envoyproxy/ratelimit's two commands per decision.
# It starts its own redis-server on a free loopback port and kills it on
# exit. Usage: bash redisstore/testdata/ceiling.sh [requests per run]
set -euo pipefail

n=${1:-200000}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

# A free port: not listening now, and our server says it is ready on it.
for _ in $(seq 20); do
	port=$((20000 + RANDOM % 40000))
	if [ -n "$(ss -Hltn "sport = :$port")" ]; then
		continue
	fi
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$dir" --logfile "$dir/log" &
	pid=$!
	for _ in $(seq 100); do
		if grep -q 'Ready to accept connections' "$dir/log" 2>/dev/null || ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null && grep -q 'Ready to accept connections' "$dir/log"; then
		break
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
done
if [ -z "$pid" ]; then
	echo "ceiling.sh: could not start redis-server" >&2
	exit 1
fi

cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }
# redis-benchmark -q still draws progress with carriage returns: keep the
# result line only.
bench() {
	timeout 120 redis-benchmark -h 127.0.0.1 -p "$port" -n "$n" -c 64 "$@" |
		tr '\r' '\n' | grep 'requests per second'
}

echo "# $(redis-server --version)"
echo "# $(nproc) CPUs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
trivial=$(cli SCRIPT LOAD 'return 1')
singles=$(cat "$here/../fixed.lua" "$here/../bucket.lua" "$here/../singles.lua" | cli -x SCRIPT LOAD)
key='sluice:{u:gcra:100:1000000000:0:__rand_int__}'
bucketArgs=("$key" '' '' 0 b 10000000 0 1000000000 0 1 1)
fkey='sluice:{u:fixed-window:100:1000000000:0:__rand_int__}'
fixedArgs=("$fkey" '' '' 0 f 1 100 1000000)

echo "## trivial script, -P 16"
bench -P 16 -q EVALSHA "$trivial" 1 key
echo "## trivial script, -P 1"
bench -P 1 -q EVALSHA "$trivial" 1 key
for s in bucket fixed; do
	cli CONFIG RESETSTAT >/dev/null
	sha=$singles args=("${bucketArgs[@]}")
	if [ "$s" = fixed ]; then args=("${fixedArgs[@]}"); fi
	echo "## $s.lua (100k keys), -P 16"
	bench -P 16 -r 100000 -q EVALSHA "$sha" 1 "${args[@]}"
	echo "## $s.lua (100k keys), -P 1"
	bench -P 1 -r 100000 -q EVALSHA "$sha" 1 "${args[@]}"
	echo "## server time per $s.lua call and per command inside it (INFO commandstats)"
	cli INFO commandstats | grep -E '^cmdstat_(evalsha|hset|hmget|hincrby|pexpire|time):' | cut -d, -f1-3
done
cli CONFIG RESETSTAT >/dev/null
echo "## INCRBY and EXPIRE (100k keys), -P 1"
bench -P 1 -r 100000 -q INCRBY 'envoy:__rand_int__' 1
bench -P 1 -r 100000 -q EXPIRE 'envoy:__rand_int__' 60
cli INFO commandstats | grep -E '^cmdstat_(incrby|expire):' | cut -d, -f1-3
