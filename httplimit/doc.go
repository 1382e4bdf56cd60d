// SPDX-License-Identifier: Apache-2.0

// Package httplimit is net/http middleware that rate-limits requests with
// sluice: per-route policies, several limits per request checked
// all-or-nothing, client IPs resolved safely behind trusted proxies, and
// refusals answered with 429 and the standard headers.
//
// # Wiring
//
// A Limit pairs a sluice.Limiter (a policy over a store, with its failure
// mode) with a KeyFunc that says which key a request counts against: the
// client IP (ClientIP, resolved by a clientip.Resolver), a header such as
// an API key (Header), or any function of the request (a JWT subject, a
// tenant). Routes are Go 1.22
// ServeMux patterns, matched by an internal http.ServeMux, each with a cost
// and its limits; Global limits apply to every request and Default to
// requests no route matches:
//
//	ip, _ := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, "10.0.0.0/8"))
//	perIP := httplimit.Limit{Limiter: ipLimiter, Key: httplimit.ClientIP(ip)}
//	perKey := httplimit.Limit{Limiter: keyLimiter, Key: httplimit.Header("X-API-Key")}
//	m, err := httplimit.New(
//		httplimit.Global(perIP),
//		httplimit.Route("POST /v1/uploads", 10, perKey),
//		httplimit.Route("GET /v1/items/{id}", 1, perKey),
//	)
//	...
//	http.ListenAndServe(addr, m.Handler(mux))
//
// Routes are matched by the middleware's own ServeMux, not by the
// application's: middleware usually runs before the application's router,
// so http.Request.Pattern is not set yet, and the application may not use
// a ServeMux at all. A request that ServeMux would redirect to a cleaned
// path counts under the route it is redirected to.
//
// All the limits that apply to a request are checked in one
// sluice.AllowAll batch, so a request refused by one consumes nothing from
// the others. Their limiters must therefore share one store.
//
// # Responses
//
// Every limited response carries RateLimit-Policy and RateLimit as defined
// by draft-ietf-httpapi-ratelimit-headers-10: one Structured Field Values
// list item per enforced policy, named by the policy's Name, with q (the
// policy's capacity) and w (the seconds that capacity takes to refill or
// the window length) on the policy, and r (remaining units) and t on the
// state. On an admitted request t is the seconds until the key is idle
// again (a full bucket, an empty window); on a refusal only the violated
// policies carry a t, the seconds until the same request would be
// admitted, so that Retry-After never precedes a reset. The header has no
// fractions of a second: a window that is not a whole number of seconds is
// rounded up (to at least 1) with the same q, which understates the rate
// but never invites a refusal. A refused request gets 429
// Too Many Requests, Retry-After in whole seconds rounded up (never earlier
// than the store's RetryAfter, plus optional jitter) and an RFC 9457
// application/problem+json body of type quota-exceeded listing the
// violated policies. WithLegacyHeaders adds X-RateLimit-Limit, -Remaining
// and -Reset for the most constrained policy.
//
// For a leaky-bucket policy an admitted request is held for its Delay
// before the handler runs, so the handler sees a steady rate; a request
// whose delay would exceed WithMaxDelay is refused in the same store call,
// without taking a place in the queue (WithMaxDelay states the bound), and
// the headers advertise the queue a request may take within it.
//
// # Shadow mode and failures
//
// A Shadow limit decides and records but never refuses or delays: requests
// it would have refused are counted in Stats and reported to the
// OnShadowRefusal hook, and the request proceeds as if the limit were
// absent. When the store fails (OnError sees the error), each limiter's
// failure mode decides: the request is answered 503 Service Unavailable with
// Retry-After if an enforced limit fails closed (sluice.FailClosed), 429 as
// above if a limit that fails local (sluice.FailLocal) refused it on its
// local share, and admitted otherwise (limits that fail open, and local
// shares that admit it).
//
// # Requests without a key
//
// A request a limit has no key for (no API key header, a peer that is no
// IP address) is never let through that limit unlimited by default: under
// the zero Limit.Missing, MissingShared, every such request counts under one
// key shared by all of them, so together they get the limit's rate.
// MissingRefused answers them 400 Bad Request instead (an API that demands
// a key), and MissingSkipped lets them past that limit (only where another
// limit, per IP say, covers them). The same holds for keyed in-flight limits.
//
// # Clients that go away
//
// A request whose context has ended (its client closed the connection, or
// its deadline passed) before it is decided, or while it is held for a
// leaky-bucket delay or waits for an in-flight slot, is counted in
// Stats.Gone and answered 503 (a client that has gone never reads it; one
// whose deadline an outer handler set does): it never reaches the handler,
// and it is not a store error (OnError does not see it), whatever the
// failure modes. So is a request whose leaky-bucket delay would pass its
// deadline, at once and without taking a place in the queue.
//
// # The in-flight reserve
//
// An in-flight limit may keep slots for critical requests
// (inflight.WithReserve). No request is critical unless WithCriticalFunc says
// so: a header a client sets grants nothing by itself. CriticalFrom builds
// the usual trust function, which believes CriticalHeader only from the
// peers a function vouches for (clientip.Resolver.TrustsPeer: your own
// proxies). The RateLimit fields describe the slots open to the request
// they answer: q is the limit less the reserve unless the request is
// critical (inflight.Limiter.LimitFor), and r what is left of that, so a
// client that paces itself from them (package pace) never counts on the
// reserve.
//
// # Client IPs
//
// Client addresses are resolved by package clientip: from RemoteAddr, and
// from X-Forwarded-For, Forwarded (RFC 7239) or X-Real-IP only when the
// peer is a configured trusted proxy, aggregating IPv6 clients to a prefix
// (/64 by default). See that package.
package httplimit
