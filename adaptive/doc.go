// SPDX-License-Identifier: Apache-2.0

// Package adaptive moves an in-flight limit from what requests observe:
// latency and failures. Its controllers implement inflight.Controller; give
// one to inflight.New with inflight.WithController, and the limit each
// process applies follows the backend's health between a floor and a
// ceiling.
//
// Every controller keeps its limit L, a real number, in [Floor, Ceiling]
// at all times (tested at both edges), and reports ⌊L⌋ (at least 1). A
// controller only raises L while the work is using it: a sample whose
// InFlight is below L/2 never raises L, so an idle service does not drift
// to its ceiling.
//
// # AIMD
//
// Additive increase, multiplicative decrease, as TCP's congestion window:
//
//	on a sample that is Dropped or has RTT > Threshold:
//	    L ← max(Floor, L·Backoff), at most once per Cooldown
//	on any other sample with RTT > 0 and InFlight ≥ L/2:
//	    L ← min(Ceiling, L + 1/L)          (about +1 per L samples: +1 per round trip)
//
// Parameters: Floor, Ceiling, Threshold (the latency that counts as
// overload; required), Backoff (default 0.75), Cooldown (default 500ms: one
// burst of slow answers is one decrease, not one per answer).
//
// # Gradient
//
// In the spirit of Netflix's Gradient2 and Envoy's adaptive concurrency
// filter: compare the latency now with the latency the backend gives when
// it is not queueing, and scale the limit by the ratio. Samples are
// gathered in windows of at least Window (default 250ms) and MinSamples
// (default 10); at the end of each window, with s the window's mean RTT and
// b the baseline:
//
//	b ← s                                   if s < b (or no baseline yet)
//	b ← b + (s − b)/BaselineWindows         otherwise (default 40 windows ≈ 10 s)
//	g ← clamp(Tolerance·b/s, 0.5, 1)        (Tolerance default 1.5)
//	L' ← L·g + √L                           (the √L headroom lets a healthy backend grow)
//	L ← clamp(L·(1−Smoothing) + L'·Smoothing, Floor, Ceiling)   (Smoothing default 0.2)
//
// A window where a sample was Dropped uses g = 0.5. When the window's
// largest InFlight is below L/2, L' is at most L (it can fall, not rise).
//
// So while latency stays under Tolerance times the baseline, L grows by
// about Smoothing·√L per window; when latency rises by a factor k >
// Tolerance the limit shrinks by a factor of about 1 − Smoothing·(1 −
// max(Tolerance/k, 0.5)) per window until the baseline catches up (a 5×
// rise: about −10% per 250 ms window, more than halving the limit within 5 s
// in the simulation of BENCHMARKS.md). The baseline follows a lasting change
// of the backend upwards over BaselineWindows windows, and at once
// downwards, so the limit recovers as soon as a fault clears.
//
// # Clocks
//
// A sample's At and RTT come from the Limiter's clock (inflight.WithClock),
// which need not be monotonic; a clock that steps back does not stop a
// controller. The time from the last decrease (Cooldown) and from a
// window's first sample (Window) is the distance between the two At,
// either way round. So two decreases are at least Cooldown apart on the
// clock; a sample a little out of order (concurrent releases) ends neither
// a cooldown nor a window early; and after a step back a decrease is
// possible again within 2·Cooldown of the step, and a window ends within
// 2·Window (given MinSamples), instead of only once the clock passes its
// old reading.
//
// A sample with RTT ≤ 0 measured no latency (the clock stepped back, or
// did not move, while the request ran): it never raises L, is not part of
// a Gradient window (its mean, MinSamples, InFlight) and never becomes the
// baseline. If Dropped it still counts as a drop: AIMD decreases, and the
// current Gradient window uses g = 0.5.
//
// # Fleets
//
// A controller sees its own process's requests, and the limit it reports
// is what that process asks the shared store for: a process admits a
// request iff fewer than its limit are held by the whole fleet. With every
// process seeing the same backend, their limits agree to within their
// noise, and the fleet never holds more than the largest of them (and never
// more than Ceiling).
package adaptive
