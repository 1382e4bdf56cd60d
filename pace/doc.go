// SPDX-License-Identifier: Apache-2.0

// Package pace is an http.RoundTripper that paces a client from the rate
// limit headers a server sends (draft-ietf-httpapi-ratelimit-headers-10:
// RateLimit-Policy and RateLimit, and Retry-After), so that a well-behaved
// client waits on its side instead of being refused.
//
// A Transport keeps, for each host, what the last responses said of every
// policy the server named: the units remaining (r), when the key is idle
// again (t), and the policy's capacity (q of RateLimit-Policy). Before a
// request it works out whether every policy can take one more unit, counting
// the requests still in flight as spent; if not, it waits until the earliest
// instant at which they can (a reset, a Retry-After), or until a response
// in flight brings news. It never reads a response body and never retries:
// a 429 or 503 that does come back goes to the caller, and its Retry-After
// holds the host's later requests.
//
// # The guarantee
//
// If
//
//   - the Transport is the only client of the keys its requests are counted
//     under (one Transport per client, shared by all its goroutines),
//   - every request costs one unit of every policy the host names, and
//   - the server's fields are truthful: r is exactly what is left after the
//     request, and t is never earlier than the instant the key is idle again
//     (sluice's httplimit middleware and sluice serve send them so),
//
// then no request sent through the Transport is refused, whatever the number
// of goroutines using it: the first request to a host goes alone (nothing is
// known yet), and after that a request is sent only when the last reported
// r, less the requests in flight, is at least 1, or a reset has passed (then
// the capacity q, less those in flight, is available). When a policy
// refills continuously the Transport does not count the refill before its
// reset: it trades a little throughput for never being early. Against a
// bucket of capacity q refilled over w seconds that is q requests every
// reset, t = w seconds: a client of a 10 per second policy (q=10, w=1)
// sends 1,000 requests in 99 seconds, the least the policy allows, with no
// 429 (TestThousandRequests).
//
// A policy whose RateLimit-Policy item has qu="concurrent-requests" (an
// in-flight limit, as httplimit.InFlight sends) bounds requests in flight,
// not units: the Transport keeps at most its q requests in flight to the
// host at once and holds the next until a response comes back. Other
// clients' requests hold slots too, so such a limit can still refuse
// (see below).
//
// When the conditions do not hold (other clients spend the same key, or
// requests cost more than one unit), 429s can come back; each one holds the
// host for its Retry-After, and then one request at a time probes the
// policy until a response tells the state again.
//
// # Memory
//
// What a Transport remembers is bounded whatever its servers send: at most
// MaxPolicies policies per host (a server that names more, say one per
// tenant, loses the state of those it named least recently, which then go
// as if nothing were known of them), and at most MaxHosts hosts no request
// is using (the least recently used is forgotten first).
//
// # Deadlines
//
// A request waits under its context. If the wait the Transport knows it
// needs would end after the context's deadline, RoundTrip returns an error
// wrapping ErrDeadline at once instead of waiting; if the context ends
// while the request waits for responses in flight, RoundTrip returns the
// context's error. Either way the request is not sent.
package pace
