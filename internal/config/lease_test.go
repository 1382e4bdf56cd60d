// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

func TestLeaseShards(t *testing.T) {
	c := mustLoad(t, `domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: gcra, lease: true}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 100, shards: 3}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 100, lease: false, shards: 1}
`)
	if a := c.Match("d", []Entry{{"a", "x"}}); !a.Lease || a.Shards != 0 {
		t.Errorf("a: lease %v shards %d, want true 0", a.Lease, a.Shards)
	}
	if b := c.Match("d", []Entry{{"b", "x"}}); b.Lease || b.Shards != 3 {
		t.Errorf("b: lease %v shards %d, want false 3", b.Lease, b.Shards)
	}
	if x := c.Match("d", []Entry{{"c", "x"}}); x.Lease || x.Shards != 1 {
		t.Errorf("c: lease %v shards %d, want false 1", x.Lease, x.Shards)
	}
}

func TestLeaseShardsErrors(t *testing.T) {
	const head = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: "
	for _, tc := range []struct{ limit, want string }{
		{"{unit: second, requests_per_unit: 5, algorithm: sliding-log, lease: true}",
			`f0.yaml:4: descriptors[0].rate_limit.lease: true: not supported for algorithm sliding-log`},
		{"{unit: second, requests_per_unit: 5, algorithm: sliding-window, lease: true}",
			`descriptors[0].rate_limit.lease: true: not supported for algorithm sliding-window`},
		{"{unit: second, requests_per_unit: 5, algorithm: leaky-bucket, lease: true}",
			`descriptors[0].rate_limit.lease: true: not supported for algorithm leaky-bucket`},
		{"{unit: second, requests_per_unit: 5, lease: maybe}",
			`f0.yaml:4: descriptors[0].rate_limit.lease: want true or false`},
		{"{unit: second, requests_per_unit: 5, shards: 0}",
			`f0.yaml:4: descriptors[0].rate_limit.shards: 0: must be between 1 and 64`},
		{"{unit: second, requests_per_unit: 500, shards: 65}",
			`descriptors[0].rate_limit.shards: 65: must be between 1 and 64`},
		{"{unit: second, requests_per_unit: 5, shards: 6}",
			`descriptors[0].rate_limit.shards: 6: more than the limit or burst 5`},
		{"{unit: second, requests_per_unit: 50, algorithm: token-bucket, burst: 2, shards: 3}",
			`descriptors[0].rate_limit.shards: 3: more than the limit or burst 2`},
		{"{unit: second, requests_per_unit: 50, algorithm: leaky-bucket, shards: 3}",
			`descriptors[0].rate_limit.shards: 3: not supported for algorithm leaky-bucket`},
		{"{unit: second, requests_per_unit: 50, lease: true, shards: 3}",
			`descriptors[0].rate_limit.shards: 3: cannot be combined with lease: true`},
		{"{unlimited: true, lease: true}",
			`descriptors[0].rate_limit.lease: must not be set on an unlimited rate_limit`},
		{"{unit: second, requests_per_unit: 0, shards: 2}",
			`descriptors[0].rate_limit.shards: must not be set when requests_per_unit is 0`},
	} {
		_, err := Load(fsOf(head + tc.limit + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.limit, err, tc.want)
		}
	}
}
