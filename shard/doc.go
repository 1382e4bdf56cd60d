// SPDX-License-Identifier: Apache-2.0

// Package shard wraps a sluice.Store so that every key's capacity is split
// over sub-keys (shards), spreading one hot key over several Redis Cluster
// masters without ever admitting more than the exact limit.
//
//	store := shard.New(cluster, 4)
//	lim, _ := sluice.NewLimiter(store, p)
//
// New(store, n) (rate_limit.shards: n) splits every key over n sub-keys, so
// on a Redis Cluster one hot key's load spreads over n masters (redisstore
// picks sub-keys whose hash slots fall in n different ranges of the slot
// space). Shard i has limit ⌊Limit/n⌋ and burst ⌊Burst/n⌋, the first
// Limit mod n (Burst mod n) shards one more, so they sum to exactly the
// policy's (Policies); Count clamps n to the limit and the burst.
//
// Contract: shards never admit more than the exact limit: every admitted
// set, replayed through one exact key, is admitted by it, because each
// model's admissible sets are bounded linearly in its limit and burst
// (a token bucket admits at most Burst + Limit·d/Period in any span d, a
// window at most Limit per window) and the shards' bounds sum to the
// policy's. A request tries the shards in turn from a round-robin start,
// each once, until one admits; it is refused only when every shard would
// refuse it, so a refused request of cost c finds fewer than c units in
// each shard: fewer than n·c over the key. Relative to one key it may thus
// be early by up to n·c − 1 units, plus refill a full shard could not
// store while another was short. A cost above every shard's capacity
// (⌈Burst/n⌉, ⌈Limit/n⌉ for the windows) is Impossible. RetryAfter is the
// least over the shards, when that shard admits: never early. A refusal
// costs n round trips. A peek (cost 0) asks the shards as a request of
// cost 1 does, each with a peek, so it is admitted iff that request would
// be. A sharded decision reports the whole policy's Limit,
// and the Remaining and ResetAfter of the shard that answered: Remaining
// is then a lower bound on what the key has left (it can be about n times
// less), so a client that paces itself from it never sends too much;
// reading every shard would cost n round trips per decision. In a TakeAll batch (sluice.AllowAll) a sharded
// policy offers one shard (round-robin) to the atomic batch. leaky-bucket is not sharded (n
// queues do not release one steady stream). storetest.Shards checks all of this on memstore and a real
// 3-master Redis Cluster.
//
// A Store forwards the capabilities of the store it wraps that the packages
// above look for (see sluice.Store), with each one's neutral answer where
// that store lacks it: shard keys (Keyer, so a Store over a lease.Store
// over Redis places its sub-keys where redisstore would) and in-flight
// slots (inflight.Semaphore) are never sharded; a refund (sluice.Refunder)
// and a lease's give-back (lease.Giver) go to the wrapped store for a
// policy that is not sharded, and give nothing back for one that is.
package shard
