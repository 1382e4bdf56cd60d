// SPDX-License-Identifier: Apache-2.0

package config

import (
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
)

// leaseShards validates a rate_limit's lease and shards (sluice extensions)
// against its policy and sets them on rule; false means it reported an
// error.
func (p *parser) leaseShards(r *rawLimit, rule *Rule, field string, at func(*yaml.Node) *yaml.Node) bool {
	ok := true
	alg := rule.Policy.Algorithm
	if r.lease {
		if !lease.Supported(alg) {
			p.errorf(at(r.leaseNode), field+".lease", "true: not supported for algorithm %s (leases keep the exact limit only for token-bucket, gcra and fixed-window)", alg)
			ok = false
		}
		rule.Lease = true
	}
	if r.shardsNode == nil {
		return ok
	}
	capacity := rule.Policy.Limit
	if alg.IsBucket() && rule.Policy.Burst != 0 {
		capacity = min(capacity, rule.Policy.Burst)
	}
	switch n := r.shards; {
	case n < 1 || n > shard.Max:
		p.errorf(at(r.shardsNode), field+".shards", "%d: must be between 1 and %d", n, shard.Max)
		return false
	case n > 1 && alg == sluice.LeakyBucket:
		p.errorf(at(r.shardsNode), field+".shards", "%d: not supported for algorithm leaky-bucket (n queues do not release one steady stream)", n)
		return false
	case n > 1 && r.lease:
		p.errorf(at(r.shardsNode), field+".shards", "%d: cannot be combined with lease: true", n)
		return false
	case n > capacity:
		p.errorf(at(r.shardsNode), field+".shards", "%d: more than the limit or burst %d (every shard needs at least one unit)", n, capacity)
		return false
	}
	rule.Shards = int(r.shards)
	return ok
}
