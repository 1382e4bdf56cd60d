// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// This file serves envoyproxy/ratelimit's two HTTP endpoints on the API's
// port, so that what probes it and asks it keeps working after the move:
//
//	GET  /healthcheck  200 "OK" while healthy, 500 once shutdown has begun
//	                   (or before a configuration is in force)
//	POST /json         RLS's ShouldRateLimit, the request and the answer in
//	                   protobuf's JSON: 200 when OK, 429 when over a limit
//
// /json decides exactly as RLS over gRPC does, and is held to the API's
// cross-site rules (Handler): a browser's POST from another site is 403,
// and the body must be declared JSON (415), which envoyproxy/ratelimit does
// not ask (its README's curl example sends a form type).

// handleHealthcheck is envoyproxy/ratelimit's /healthcheck: "OK" while the
// service decides, 500 when it does not (its health checker fails after
// SIGTERM). A store that does not answer leaves it healthy, as /readyz:
// every rule's failure mode decides.
func (s *Server) handleHealthcheck(w http.ResponseWriter, r *http.Request) {
	if why := s.notReady(); why != "" {
		http.Error(w, why, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "OK")
}

// handleEnvoyJSON is envoyproxy/ratelimit's /json: the body a
// RateLimitRequest in protobuf's JSON (field names in either form,
// "hitsAddend" or "hits_addend"), the answer the RateLimitResponse, 200
// when its overall code is OK and 429 when OVER_LIMIT. A request RLS
// refuses (no domain, a negative hit) is 400, as there, with the reason;
// no configuration yet is 503, and a Sluice-Timeout that passes, 504.
func (s *Server) handleEnvoyJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := withTimeout(w, r)
	if !ok {
		return
	}
	defer cancel()
	body, ok := readBody(w, r, " (curl: -H 'Content-Type: application/json')")
	if !ok {
		return
	}
	if msg := jsonOverBounds(body); msg != "" {
		writeError(w, http.StatusBadRequest, "%s", msg)
		return
	}
	var req rls.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		// A value of the wrong type named as the client wrote it, as
		// decodeJSON names it; anything else in protojson's words.
		if msg := protoErrorText(body, req.ProtoReflect().Descriptor()); msg != "" {
			writeError(w, http.StatusBadRequest, "%s", msg)
			return
		}
		writeError(w, http.StatusBadRequest, "body: %v", err)
		return
	}
	resp, err := rlsServer{s: s}.ShouldRateLimit(context.WithValue(ctx, apiKey{}, "http"), &req)
	if err != nil {
		switch status.Code(err) {
		case codes.Canceled, codes.DeadlineExceeded:
			if r.Context().Err() == nil { // the caller's own Sluice-Timeout passed; it still listens
				writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered: not admitted", TimeoutHeader)
			}
		case codes.Unavailable:
			writeError(w, http.StatusServiceUnavailable, "%s", status.Convert(err).Message())
		default:
			writeError(w, http.StatusBadRequest, "%s", status.Convert(err).Message())
		}
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "the answer: %v", err)
		return
	}
	code := http.StatusOK
	if resp.GetOverallCode() == rls.RateLimitResponse_OVER_LIMIT {
		code = http.StatusTooManyRequests
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(out)
}

// apiKey is the context key of the API a decision came through, for the
// latency metric's api label (apiOf).
type apiKey struct{}

// apiOf returns the API ctx's decision came through: "http" for /json,
// which decides through RLS's handler, else "grpc".
func apiOf(ctx context.Context) string {
	if api, ok := ctx.Value(apiKey{}).(string); ok {
		return api
	}
	return "grpc"
}

// jsonOverBounds returns why the RateLimitRequest in JSON b is refused
// for its size (more than MaxDescriptors descriptors, or a descriptor of
// more than config.MaxDepth entries), or "", as overBounds does for the
// gRPC message: it counts the descriptors and their entries without
// building them (a 1 MiB body holds 349,525 empty descriptors). A body
// that is not JSON of that shape is left to the decoder to refuse.
func jsonOverBounds(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key != "descriptors" {
			if skipValue(dec) != nil {
				return ""
			}
			continue
		}
		n, deep, entries, ok := countDescriptors(dec)
		if !ok {
			return ""
		}
		if msg := descriptorsBound(n); msg != "" {
			return msg
		}
		if deep >= 0 {
			return entriesBound(deep, entries)
		}
	}
	return ""
}

// countDescriptors reads the descriptors array at dec and returns how
// many it holds and the first descriptor with more than config.MaxDepth
// entries (deep; -1: none) and their number. ok is false for JSON that is
// not of that shape.
func countDescriptors(dec *json.Decoder) (n, deep, entries int, ok bool) {
	deep = -1
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return 0, 0, 0, false
	}
	for ; dec.More(); n++ {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, 0, false
		}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return 0, 0, 0, false
			}
			if key != "entries" || deep >= 0 {
				if skipValue(dec) != nil {
					return 0, 0, 0, false
				}
				continue
			}
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return 0, 0, 0, false
			}
			e := 0
			for ; dec.More(); e++ {
				if skipValue(dec) != nil {
					return 0, 0, 0, false
				}
			}
			if _, err := dec.Token(); err != nil { // ]
				return 0, 0, 0, false
			}
			if entriesBound(n, e) != "" {
				deep, entries = n, e
			}
		}
		if _, err := dec.Token(); err != nil { // }
			return 0, 0, 0, false
		}
	}
	if _, err := dec.Token(); err != nil { // ]
		return 0, 0, 0, false
	}
	return n, deep, entries, true
}
