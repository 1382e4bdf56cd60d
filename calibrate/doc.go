// SPDX-License-Identifier: Apache-2.0

// Package calibrate turns observed traffic into a recommended rate-limiting
// policy: measure first, then set the limit. It is the engine of the sluice
// calibrate command.
//
// Traffic is read in replay's trace format ("SECONDS KEY [COST]", one
// request per line), as an access log of JSON objects, one per line, whose
// time and key fields are named (Envoy's JSON access log, for one), or as a
// text access log: nginx's and Apache's common and combined formats,
// Envoy's default format, or any nginx log_format (Format.Log; Format.Key
// picks the key: client address, user, path, a header or any variable).
// Calibrate reads it in passes
// (the Source is opened once per pass), so its memory is bounded by the
// number of distinct keys, not the number of lines:
//
//   - demand: for each key, the peak units in any aligned window of each
//     report length (1s, 10s, 1m, 1h by default), the key's exact need
//     under the chosen algorithm, and its burst (the token-bucket burst it
//     needs at the recommended rate);
//   - recommendation: a Policy such that at least the chosen share of keys
//     would never have been refused, with notes on what that share means
//     when keys are few and on timestamps as coarse as the period
//     (Report.Notes);
//   - verification: the traffic replayed through the recommendation on a
//     memstore whose clock is the traffic's, counting the refusals it would
//     have caused.
//
// # The contract
//
// With K keys and a share q (Config.Keep), let k = ⌈q·K⌉. Every key has an
// exact need under the algorithm, the smallest parameter under which none of
// its requests would be refused (the other parameters fixed):
//
//   - fixed-window: the largest sum of costs in one aligned window of the
//     period (need = limit);
//   - sliding-log: the largest sum of costs in any window (t−P, t] ending at
//     a request (need = limit);
//   - sliding-window: the largest ⌈prev·(P−e)/P⌉ + cur + c over the key's
//     requests, all admitted (need = limit);
//   - token-bucket, gcra, leaky-bucket: at the rate limit/period, the largest
//     ⌈(max(TAT, t) + c·T − t)/T⌉ over the key's requests, T = period/limit,
//     all admitted (need = burst). The rate is Config.Limit if set, else
//     the sustained rate: the k-th smallest per-key peak in an aligned
//     window of Config.RateWindow (default one minute), per period, rounded
//     up. The burst then covers what a key sends above that rate, so the
//     pair reads as people set it (1/s with a burst of 20 for a client that
//     opens with 20 calls a minute), not as the peak second for a rate.
//
// A request of cost 0 is a peek, as for a Limiter (AllowN with 0, a trace
// line "SECONDS KEY 0"): it takes nothing, but it is admitted only if one
// unit would be. So in the needs above its own c counts as 1, while what it
// adds to the key's sums and TAT is 0: a key that takes 1 unit and then
// peeks needs 2.
//
// The recommended parameter is the k-th smallest need, so exactly the keys
// whose need is at most it, at least k of them, are never refused: a key is
// never refused if and only if its need is at most the parameter, as the
// models decide every request of a key that was never refused exactly as if
// the limit were infinite. Calibrate checks this by replaying the traffic
// through a memstore and returns an error if fewer than k keys came through
// unrefused (TestRecommendationIsExact drives it at several shares, down to
// the key at the edge).
//
// Memory: O(K·W) for K keys and W report windows, plus, for sliding-log, the
// requests each key made within the last period (the log the algorithm
// itself keeps).
package calibrate
