// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"strconv"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/shard"
)

var _ shard.Keyer = (*Store)(nil)

// ShardKey returns the key of shard i of n of key under the shard policy p:
// key + "~i.j" for the least j ≥ 0 whose Redis key's hash slot is in
// [i·16384/n, (i+1)·16384/n), so that n shards occupy n different ranges of
// the slot space, and a cluster whose masters hold equal ranges holds them
// on different masters when it has n masters (and spreads them evenly when
// it has more). Each j hits with probability 1/n, so the search looks at n
// candidates on average; after 64·n misses it gives up and returns the last
// one, which is correct but may share a master. With WithSingleSlot every
// key is in one slot, and ShardKey is key + "~i".
func (s *Store) ShardKey(p sluice.Policy, key string, i, n int) string {
	base := key + "~" + strconv.Itoa(i)
	if s.slot != "" || n <= 1 {
		return base
	}
	tag := policyTag(p)
	lo, hi := i*16384/n, (i+1)*16384/n
	var cand string
	for j := range 64 * n {
		cand = base + "." + strconv.Itoa(j)
		state, _ := stateKey(s.prefix, "", tag, cand)
		if sl := int(keySlot(state)); lo <= sl && sl < hi {
			return cand
		}
	}
	return cand
}
