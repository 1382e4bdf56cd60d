// SPDX-License-Identifier: Apache-2.0

// Package inflight limits how many requests per key are in flight at once:
// in one process (Concurrency), or across every process sharing a store
// (Limiter, over a Semaphore such as memstore or redisstore).
//
// A rate bounds how often; Limiter bounds how much work is open at once,
// across every process sharing a store that is a Semaphore (memstore,
// redisstore). Each request holds a slot with a TTL (DefaultTTL): a
// holder with expiry e holds a slot at t iff t < e, and Acquire admits iff
// fewer than the limit hold slots at the store's clock, so the holders of
// one limit never exceed it, in any number of processes; the slots of a
// process that dies are back once their TTL has passed. The limit is fixed
// or moved by a Controller (package adaptive); a reserve keeps
// ⌊limit·fraction⌋ slots for critical requests.
//
// A Limiter whose store fails answers by its failure mode
// (WithFailureMode); a release that failed is retried by one bounded
// background worker per Limiter, not a goroutine per request.
package inflight
