// SPDX-License-Identifier: Apache-2.0

// Package rlqs is sluice serve's rate limit quota service (RLQS,
// envoy.service.rate_limit_quota.v3): Envoys report, per bucket, how many
// requests they allowed and denied, and sluice answers with assignments
// that divide each rule's one limit among all the Envoys that report the
// bucket, across every sluice replica that shares the store.
//
// # Matching
//
// A stream's domain is the YAML domain. A bucket id is a map, which has no
// order; its entries are matched as RLS matches a descriptor, in the order
// of the configuration's tree: for each rule of the domain whose path has
// exactly the bucket's keys, in configuration order, the entries are put in
// that path's key order, and the first order under which RLS matching finds
// a rule wins. A bucket no rule matches is assigned allow-all (Envoy's own
// default) and counted (sluice_rlqs_unmatched_buckets_total); unlimited,
// shadow-mode and in-flight rules assign allow-all, requests_per_unit 0
// deny-all.
//
// # Division
//
// A rule's limit is one limit per bucket for the whole fleet. Its budget is
// the limit over a fill interval F, the rule's period rounded up to whole
// seconds (Envoy reads whole seconds): L = ⌊limit·F/period⌋ whole tokens,
// at least the limit, so a rule slower than one a second with a period that
// is not whole seconds (1 per 1.5 s: F = 2 s, L = 1) still admits, and L/F
// is at most the rule's rate. Each stream's demand d is measured with
// sluice's clock (Envoy's time_elapsed is whole seconds): the requests it
// reported, allowed and denied, over the time since its previous report (at
// least half a second apart). A stream wants d·F plus an eighth (at least
// one token), so noise in its own measurement does not refuse it; a stream
// whose demand is not yet known wants without bound. Divide shares L
// max-min fairly: a stream wanting no more than an equal share of what the
// smaller ones leave gets what it wants, the others split the rest equally.
//
// Every replica re-divides the buckets its streams report every tick C
// (DefaultTick), from the records in the store (Board): each stream's
// demand and grant, living for the assignment TTL A (DefaultTTL) after its
// last claim. A stream that stays open but has not reported a bucket for
// 3·A (Envoy reports every bucket every 5 s) claims nothing for it and is
// not re-issued its assignment, so its record lives out A after its last
// claim, when its Envoy's assignment (issued at that claim at the latest)
// has expired too, and its share goes to the others at the tick after; when
// it reports again its demand is measured afresh. A division's round (a
// read and a claim) has a deadline of its own, one tick after it starts,
// and rounds of different divisions run side by side (at most 64 at once),
// so only a store that does not answer a division within a tick is a
// failure; a division whose round is still in progress at a tick is skipped
// then, so each is re-divided at most once per tick. A replica's claims are
// atomic in the store and keep the invariant Σ grants ≤ L: a stream gets at
// most L less the others' grants, decreases are claimed before increases,
// so a share moves from one stream to another only after the first gave it
// up. A stream that ends drops its record at once, so the next tick (≤ C,
// within one report interval) gives its share to the others. A grant
// changes at most once per tick per stream and not when the new one is
// within a sixteenth of it (no flapping); a reload that changes a bucket's
// rule, and the store's failures, aside.
//
// Assignments are token buckets (Envoy ignores requests_per_time_unit):
// tokens_per_fill = the grant, fill_interval = F, max_tokens = the grant's
// rate over T (DefaultBurstWindow, at least 1; the rule's burst does not
// apply, since Envoy starts every changed bucket full and a large one
// would overshoot by as much), assignment_time_to_live = A
// (Envoy reads whole seconds, and an unset TTL as expired at once). They
// are sent when they change (the grant, or the fill after a reload) and
// re-sent unchanged when half of A has passed, which Envoy takes as an
// extension (it keeps its bucket). Envoy also keeps its bucket when the
// new one differs in fill_interval's whole seconds alone (it compares
// max_tokens, tokens_per_fill and the nanos), so such a one follows a
// deny-all of its bucket in the same response: Envoy applies both in
// order and replaces its bucket, and no request sees the deny-all. A
// grant of 0 is max_tokens 0: refuse.
//
// # The bound
//
// Envoy starts a changed token bucket full. Over any window of length w,
// the fleet admits at most rate·w + Excess, where rate is the rule's limit
// per second and
//
//	Excess = (J + 1 + k·(⌊w/C⌋ + 1)) · (rate·T + n)
//
// for n streams reporting the bucket through k replicas and J streams that
// join during the window: at every instant the grants in force sum to at
// most L, so the buckets' refills admit at most rate·w; what else is
// admitted is the tokens buckets hold, at most rate·T + n for the buckets in
// force at the window's start, and as much again for each batch of
// assignments a replica issues (each replica issues at most one per tick,
// and one per joining stream). The edge is reached by Envoys that spend
// every token at once while the division flips every tick
// (TestExcessAtItsEdge). Reports every few seconds do not enter it: Envoy
// hard-codes 5 s today (envoy#46033), and a slower report only delays the
// division. Not in it: messages in flight (an increase sent by one replica
// may reach its Envoy before another replica's decrease reaches its own:
// at most rate × the delivery delay), and an Envoy whose stream ended but
// which keeps enforcing its last assignment until A runs out.
//
// Early refusal: once demands have held for one report interval plus two
// ticks (k > 1: plus one tick per replica step), a stream below its fair
// share is granted its want, and the others the equal split of the rest
// less at most a sixteenth (the hysteresis) and one token per F (whole
// tokens), so the fleet uses at least L − Σ(headroom of the small streams)
// − Σ(grant/16 + 1) of the large ones. A new stream is granted at once what
// the others leave (0 if they hold all of L) and its equal share within two
// ticks (the edge: TestJoinAtItsEdge); on one replica at once, unless the
// others' grants changed less than a tick ago. A dead replica's records
// hold their grants until A runs out.
//
// # Failure modes
//
// When the store fails, the rule's failure_mode decides: open assigns
// allow-all, closed deny-all, local (the default) divides among this
// replica's streams of the bucket what they held at its last claim, H (the
// sum of their grants then, at most L; 0 for a bucket first reported, or
// reported again after all of this replica's streams of it ended, while the
// store fails). It divides as the board would, at each tick and each new
// stream (Divide(H, wants), the hysteresis, decreases first), and keeps
// the board's invariant here: a stream gets at most
//
//	g = H − Σ grants in force of this replica's other streams of the bucket
//
// where a grant in force is the last one sent (an Envoy keeps it until it
// is replaced or expires, and each is re-issued before its TTL). So a
// stream that joins gets what the others do not hold (0 while they hold
// all of H) and its share once they are lowered, in the same batch: at
// once if their grants changed a tick ago or more, else at the first tick
// after that (within two ticks).
// This replica's grants in force sum to at most H, which the board holds
// for it, so while the store fails for every replica the fleet's sum to at
// most L. Not covered: a replica cut off from a store the others still
// reach keeps its grants past its records' expiry (A after its last claim),
// when the others may claim them; and after a failure longer than A, the
// first replica to claim again sees no record of the others, which hold
// their grants until their own next claim (a tick).
//
// An assignment that expires in Envoy is Envoy's expired_assignment_behavior;
// deploy/envoy's example sets it and no_assignment_behavior to match.
//
// # Bounds
//
// A replica serves at most DefaultMaxStreams streams and a stream reports
// at most DefaultMaxBuckets buckets (WithLimits); beyond, the stream is
// ended with RESOURCE_EXHAUSTED, counted in sluice_rlqs_refused_total. A
// bucket id has at most MaxBucketIDEntries entries and MaxBucketIDBytes
// bytes of keys and values (Envoy's bucket_id_builder makes a few entries
// of tens of bytes); a report with a larger one ends its stream with
// INVALID_ARGUMENT, counted there too. A replica keeps one copy of each
// bucket id, to send back in its assignments; its part, its division and
// the division's records in the store are named by its key, the entries
// length-prefixed in key order, or past 64 bytes '#' and the SHA-256 of
// that (two bucket ids never share a division), so what a stream holds is
// O(DefaultMaxBuckets × MaxBucketIDBytes) whatever Envoy reports.
// Divisions sorts by those keys, and keeps of each rule at most the
// divisions its caller asks for.
// Envoy forgets a bucket only when told to and reports every bucket it
// has, so a bucket whose reports carry no requests for I = 6·A (a minute
// by default; not reported at all counts the same) is abandoned: it is
// sent abandon_action (Envoy forgets it until its next request, whose
// report makes it anew, with a first assignment) and leaves its division,
// its record dropped at once. A report of no requests that names it within
// A of the abandon crossed it (Envoy had already forgotten the bucket) and
// does not make it anew.
package rlqs
