// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// Handler returns the HTTP API:
//
//	POST /v1/check   decide (or peek at) descriptors of a domain
//	POST /v1/reset   forget one descriptor's state under its rule
//	                 (both take a deadline in TimeoutHeader)
//	POST /v1/charge  record costs known afterwards, past the limit (charge_http.go)
//	POST /v1/reserve, /v1/commit  hold an estimate, then settle it with the actual cost
//	GET  /v1/usage   a key's use of its limit, its period and its debt (usage.go)
//	GET, PUT, DELETE /v1/limits/...  per-key limits at runtime (limitsapi.go)
//	GET  /healthz    200 while the process serves
//	GET  /readyz     200 once a configuration is in force, 503 before and while stopping
//	GET  /healthcheck, POST /json  envoyproxy/ratelimit's health check and
//	                 RLS in JSON (envoyhttp.go)
//	GET  /metrics    Prometheus metrics
//	GET  /v1/rules   the rules in force, their recent decisions and the keys nearest their limits
//	POST /v1/simulate  run a traffic pattern through a rule on a throwaway store (SVG)
//	GET  /v1/openapi.json  the OpenAPI 3 document of all of these (openapi.go)
//	GET  /           the live page (embedded; no external assets), and its
//	                 scripts and styles beside it
//
// A known path asked with another method answers 405 with an Allow header;
// an unknown path, 404. The OpenAPI document describes every route and
// answer, and tests hold the handlers to it.
//
// The page invites an operator to open this origin in a browser, so the API
// refuses what another site's page could make that browser send or read:
//   - a browser's request (Origin, Sec-Fetch-*, or a Mozilla/ User-Agent)
//     whose Host is not an IP address, localhost (or a name under
//     .localhost) or a name allowed by WithAllowedHosts is answered 403 on
//     every path: a page that rebinds its own name to this address is
//     same-origin, and only its Host gives it away (hosts.go);
//   - a POST from another origin (Sec-Fetch-Site, else Origin against Host;
//     http.CrossOriginProtection) is answered 403;
//   - a POST body must be declared JSON (application/json or a +json
//     type), else 415: a cross-site page can send text/plain without
//     asking, but a JSON type needs a CORS preflight, which this API never
//     grants (it sends no Access-Control-* headers at all);
//   - every answer says X-Content-Type-Options: nosniff,
//     Cross-Origin-Resource-Policy: same-origin (no other origin may embed
//     or read it) and may not be framed (frame-ancestors 'none',
//     X-Frame-Options: DENY).
//
// Clients that are not browsers (Envoy, Prometheus, probes, curl, scripts)
// send no Sec-Fetch-Site or Origin (nor a Mozilla/ User-Agent) and are not
// affected, beyond the content type: they reach the API by any name, such
// as a Kubernetes service's.
func (s *Server) Handler() http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin %s refused: this API answers its own page and clients that are not browsers", r.Method)
	}))
	return secureHeaders(s.hosts.checkHost(cop.Handler(s.mux().ServeMux)))
}

// secureHeaders sets the headers every API answer carries (Handler). The
// page's own Content-Security-Policy (handlePage) replaces the API's.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// routes is the API's ServeMux, and the patterns registered on it, which
// TestOpenAPIRoutes holds against the OpenAPI document.
type routes struct {
	*http.ServeMux
	patterns []string
}

// Handle registers h for pattern.
func (m *routes) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers f for pattern.
func (m *routes) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

func (s *Server) mux() *routes {
	mux := &routes{ServeMux: http.NewServeMux()}
	mux.HandleFunc("GET /v1/openapi.json", s.handleOpenAPI)
	mux.HandleFunc("GET /v1/rules", s.handleRules)
	mux.HandleFunc("GET /v1/status", s.handleStatus) // status.go
	mux.HandleFunc("POST /v1/simulate", s.handleSimulate)
	s.handlePage(mux)
	mux.HandleFunc("POST /v1/check", s.handleCheck)
	mux.HandleFunc("POST /v1/reset", s.handleReset)
	s.quotaRoutes(mux)   // limits.go, usage.go
	s.handleCharges(mux) // charge_http.go
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("GET /healthcheck", s.handleHealthcheck) // envoyhttp.go
	mux.HandleFunc("POST /json", s.handleEnvoyJSON)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	Domain      string          `json:"domain"`
	Descriptors JSONDescriptors `json:"descriptors"`
	// HitsAddend is the cost of every descriptor: 1 when absent, 0 to peek.
	HitsAddend *int64 `json:"hits_addend,omitempty"`
}

// JSONDescriptors is the descriptors of a CheckRequest: at most
// MaxDescriptors of at most config.MaxDepth entries each. Decoding builds
// no more than that: past a bound it only counts the elements and fails
// naming the field and the count, so a body of many small descriptors (a
// 1 MiB body holds 349,505 empty ones) costs no more than one at the
// bounds.
type JSONDescriptors []JSONDescriptor

// JSONDescriptor is one descriptor of a CheckRequest.
type JSONDescriptor struct {
	Entries jsonEntries `json:"entries"`
	// HitsAddend, when set, overrides the request's for this descriptor.
	HitsAddend *int64 `json:"hits_addend,omitempty"`
}

// jsonEntries is a JSONDescriptor's entries, decoded up to config.MaxDepth.
type jsonEntries []config.Entry

// errEntries is what decoding jsonEntries fails with past config.MaxDepth:
// the descriptor's index is the caller's to add.
type errEntries struct{ n int }

func (e errEntries) Error() string { return entriesBound(-1, e.n) }

func (es *jsonEntries) UnmarshalJSON(b []byte) error {
	list, n, err := decodeList[config.Entry](b, config.MaxDepth, nil)
	if err == nil && n > config.MaxDepth {
		return errEntries{n}
	}
	*es = list
	return err
}

func (ds *JSONDescriptors) UnmarshalJSON(b []byte) error {
	list, n, err := decodeList[JSONDescriptor](b, MaxDescriptors, func(i int, err error) error {
		if e := (errEntries{}); errors.As(err, &e) {
			return errors.New(entriesBound(i, e.n))
		}
		return err
	})
	if err == nil && n > MaxDescriptors {
		return errors.New(descriptorsBound(n))
	}
	*ds = list
	return err
}

// decodeList decodes the JSON array b (or null) into at most most
// elements, unknown fields refused, each element's error passed through
// elemErr (when not nil) with its index. Past most it decodes nothing more
// and only counts the elements: n is their number.
func decodeList[T any](b []byte, most int, elemErr func(int, error) error) (list []T, n int, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	tok, err := dec.Token()
	if err != nil {
		return nil, 0, err
	}
	if tok == nil {
		return nil, 0, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		var zero []T
		return nil, 0, &json.UnmarshalTypeError{Value: jsonKind(tok), Type: reflect.TypeOf(zero)}
	}
	for ; dec.More(); n++ {
		if n >= most {
			if err := skipValue(dec); err != nil {
				return nil, 0, err
			}
			continue
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			if elemErr != nil {
				err = elemErr(n, err)
			}
			return nil, 0, err
		}
		list = append(list, v)
	}
	return list, n, nil
}

// skipValue reads one JSON value of dec's and keeps nothing of it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// CheckResponse is the answer to POST /v1/check.
type CheckResponse struct {
	// OverallCode is "OK" or "OVER_LIMIT", as in Envoy's RLS.
	OverallCode string       `json:"overall_code"`
	Allowed     bool         `json:"allowed"`
	Statuses    []JSONStatus `json:"statuses"`
	// QuotaModeViolations lists the indices of the quota-mode descriptors
	// over their quota (envoyproxy/ratelimit's quotaModeViolations), when
	// the request matched any quota-mode rule.
	QuotaModeViolations []int `json:"quota_mode_violations,omitzero"`
}

// JSONStatus is one descriptor's decision. Durations are in seconds.
type JSONStatus struct {
	Code string `json:"code"`
	// Rule is the key of the matched rule in the configuration; empty when
	// no rule applies (the descriptor is OK).
	Rule       string  `json:"rule,omitempty"`
	Name       string  `json:"name,omitempty"`
	Algorithm  string  `json:"algorithm,omitempty"`
	Unlimited  bool    `json:"unlimited,omitempty"`
	Shadow     bool    `json:"shadow_mode,omitempty"`
	Allowed    bool    `json:"allowed"`
	Impossible bool    `json:"impossible,omitempty"`
	Limit      int64   `json:"limit"`
	Remaining  int64   `json:"remaining"`
	RetryAfter float64 `json:"retry_after,omitempty"`
	ResetAfter float64 `json:"reset_after"`
	Delay      float64 `json:"delay,omitempty"`
	// StoreError is set when the store failed and the rule's failure
	// mode decided.
	StoreError bool `json:"store_error,omitempty"`
	// QuotaMode is set for a quota-mode rule: its OVER_LIMIT alone does
	// not refuse the request.
	QuotaMode bool `json:"quota_mode,omitempty"`
	// Metadata is the matched descriptor's metadata, while it is under
	// its limit.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// ResetRequest is the body of POST /v1/reset: a domain and one descriptor,
// written as in a CheckRequest ({"descriptors":[{"entries":[...]}]}, so a
// check's body resets what it took) or, the older form, as its entries
// alone ({"entries":[...]}). Exactly one of the two.
type ResetRequest struct {
	Domain string `json:"domain"`
	// Descriptors holds the one descriptor to reset.
	Descriptors []ResetDescriptor `json:"descriptors,omitempty"`
	// Entries is the descriptor's entries (the older form).
	Entries jsonEntries `json:"entries,omitempty"`
}

// ResetDescriptor is the descriptor of a ResetRequest: a JSONDescriptor
// without a cost.
type ResetDescriptor struct {
	Entries jsonEntries `json:"entries"`
}

// entries returns the descriptor's entries, or a 400's message.
func (req *ResetRequest) entries() ([]config.Entry, string) {
	switch {
	case req.Domain == "":
		return nil, "domain: must not be empty"
	case req.Entries != nil && req.Descriptors != nil:
		return nil, "entries and descriptors: give the descriptor in one form, not both"
	case req.Descriptors != nil && len(req.Descriptors) != 1:
		return nil, fmt.Sprintf("descriptors: %d given; a reset takes exactly one", len(req.Descriptors))
	case req.Descriptors != nil && len(req.Descriptors[0].Entries) == 0:
		return nil, "descriptors[0].entries: must not be empty"
	case req.Descriptors != nil:
		return req.Descriptors[0].Entries, ""
	case len(req.Entries) == 0:
		return nil, "descriptors (or entries): must not be empty"
	}
	return req.Entries, ""
}

const maxBody = 1 << 20

// readBody reads r's body, of at most maxBody bytes, declared JSON. When it
// cannot, it answers 415 (another Content-Type, whose message ends with
// hint), 413 (too large) or 400, and ok is false.
func readBody(w http.ResponseWriter, r *http.Request, hint string) (b []byte, ok bool) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type %q: want application/json%s", ct, hint)
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		code := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		writeError(w, code, "body: %v", err)
		return nil, false
	}
	return b, true
}

// decodeJSON decodes r's JSON body into v (decodeBody); when it cannot, it
// answers (readBody's answers, or 400 with decodeBody's message) and
// returns false. Every JSON body of the API but /json's (protojson) is
// decoded here.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, ok := readBody(w, r, "")
	if !ok {
		return false
	}
	if msg := decodeBody(b, v); msg != "" {
		writeError(w, http.StatusBadRequest, "%s", msg)
		return false
	}
	return true
}

// decodeBody decodes the JSON document b into v, unknown fields refused,
// and returns "" or what is wrong. A value of the wrong type is named as
// the client wrote it, with the value and what the field takes
// (typeErrorText), not by Go's names.
func decodeBody(b []byte, v any) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if typeErr := (*json.UnmarshalTypeError)(nil); errors.As(err, &typeErr) {
			return typeErrorText(b, typeErr)
		}
		return "body: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	if dec.More() {
		return "body: more than one JSON value"
	}
	return ""
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// TimeoutHeader is the HTTP API's deadline: a Go duration ("50ms") after
// which the caller no longer wants the answer, as gRPC's grpc-timeout is
// for RLS. A store call ends by it (redisstore: less its margin), and the
// rule's failure mode answers in time. Without it, a call is bounded only
// by the store's own ceiling: --store-timeout, 3 s by default on Redis.
const TimeoutHeader = "Sluice-Timeout"

// withTimeout returns r's context bounded by its TimeoutHeader, if any. A
// header that is not a positive duration is answered 400, and ok is false.
func withTimeout(w http.ResponseWriter, r *http.Request) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	v := r.Header.Get(TimeoutHeader)
	if v == "" {
		return r.Context(), func() {}, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		writeError(w, http.StatusBadRequest, "%s %q: want a positive duration such as 50ms", TimeoutHeader, v)
		return nil, nil, false
	}
	ctx, cancel = context.WithTimeout(r.Context(), d)
	return ctx, cancel, true
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, req, descs, ok := readCheck(w, r)
	if !ok {
		return
	}
	defer cancel()
	allowed, outs, err := s.check(ctx, "http", req.Domain, descs)
	if errors.Is(err, errGone) {
		if r.Context().Err() == nil { // the caller's own Sluice-Timeout passed; it still listens
			writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered: not admitted", TimeoutHeader)
		}
		return // otherwise the client has gone: nobody to answer
	}
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errUnavailable) {
			code = http.StatusServiceUnavailable
		}
		writeError(w, code, "%v", err)
		return
	}
	resp := CheckResponse{OverallCode: "OK", Allowed: allowed, Statuses: make([]JSONStatus, len(outs))}
	if !allowed {
		resp.OverallCode = "OVER_LIMIT"
	}
	for i := range outs {
		resp.Statuses[i] = toJSON(&outs[i])
	}
	if enabled, over := quotaViolations(outs); enabled {
		resp.QuotaModeViolations = over
		if over == nil {
			resp.QuotaModeViolations = []int{}
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func toJSON(o *outcome) JSONStatus {
	st := JSONStatus{Code: "OK", Allowed: true}
	r := o.rule
	if r == nil {
		return st
	}
	st.Rule, st.Name, st.Shadow, st.QuotaMode = r.FullKey, r.Title(), r.ShadowMode, r.QuotaMode
	if !o.over {
		st.Metadata = r.Metadata
	}
	if r.Unlimited {
		st.Unlimited = true
		return st
	}
	if o.over {
		st.Code, st.Allowed = "OVER_LIMIT", false
	}
	if r.Deny {
		return st
	}
	d := o.decision
	st.Algorithm = string(r.Policy.Algorithm)
	st.Impossible = d.Impossible
	st.Limit, st.Remaining = d.Limit, d.Remaining
	st.RetryAfter, st.ResetAfter, st.Delay = seconds(d.RetryAfter), seconds(d.ResetAfter), seconds(d.Delay)
	st.StoreError = o.failed
	return st
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := withTimeout(w, r)
	if !ok {
		return
	}
	defer cancel()
	var req ResetRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	entries, msg := req.entries()
	if msg != "" {
		writeError(w, http.StatusBadRequest, "%s", msg)
		return
	}
	sn := s.snap.Load()
	if sn == nil {
		writeError(w, http.StatusServiceUnavailable, "%v", errUnavailable)
		return
	}
	rule := sn.cfg.Match(req.Domain, entries)
	if rule == nil || rule.Unlimited || rule.Deny || rule.InFlight != nil {
		writeError(w, http.StatusNotFound, "domain %q, entries %v: no rule with state matches", req.Domain, entries)
		return
	}
	key := storeKey(rule, entries)
	if err := s.store.Reset(ctx, s.effectivePolicy(ctx, rule, entries), key); err != nil {
		if ctx.Err() != nil { // the caller's deadline or departure: no store failure
			if r.Context().Err() == nil {
				writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered: reset %s not done", TimeoutHeader, rule.FullKey)
			}
			return
		}
		s.storeFailed(req.Domain, err, rule.Title)
		writeError(w, http.StatusBadGateway, "reset %s: %v", rule.FullKey, err)
		return
	}
	s.log.Info("key reset", "domain", req.Domain, "rule", rule.FullKey, "entries", fmt.Sprint(cutEntries(entries)))
	writeJSON(w, http.StatusOK, map[string]string{"reset": rule.FullKey})
}

// readyProbe is the policy /readyz peeks at to see whether the store answers.
var readyProbe = sluice.Policy{Name: "sluice.readyz", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}

// notReady returns why the service does not decide, or "" when it does:
// it is shutting down, has no configuration yet, or a gateway domain has no
// HTTP policies in force.
func (s *Server) notReady() string {
	switch {
	case s.stopping.Load():
		return "shutting down"
	case s.snap.Load() == nil:
		return "no configuration loaded yet"
	}
	s.applyMu.Lock()
	gateways := s.gateways
	s.applyMu.Unlock()
	for _, g := range gateways {
		if !g.ready() {
			return "gateway domain " + g.domain + ": no HTTP policies in force"
		}
	}
	return ""
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if why := s.notReady(); why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if _, err := s.store.Take(ctx, readyProbe, "probe", 0); err != nil {
		// Every rule has a failure mode, which answers while the store is
		// down: the service is still ready, but say so.
		io.WriteString(w, "ready: store unreachable, failure modes in force: "+err.Error()+"\n")
		return
	}
	io.WriteString(w, "ready\n")
}

// The HTTP API server's timeouts (NewHTTPServer); the gRPC port's bounds
// are GRPCServerOptions'. A client that reaches the port holds a
// connection, a goroutine and its buffers only this long:
//   - ReadHeaderTimeout: the request line and headers, a few hundred bytes.
//   - ReadTimeout: the whole request, a body of at most 1 MiB (maxBody) at
//     100 KiB/s or faster.
//   - WriteTimeout: from the end of the headers to the end of the answer:
//     the longest handler, a simulation, stops at 5 s, and its picture (a
//     few hundred KiB) is written in the rest; a client that does not read
//     its answer is cut off then.
//   - IdleTimeout: a kept-alive connection between requests; the live page
//     asks every second or two.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 15 * time.Second
	IdleTimeout       = 60 * time.Second
)

// NewHTTPServer returns an http.Server for h (the API: Handler) with the
// timeouts above.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
	}
}

// isJSON reports whether the media type ct is JSON: application/json or
// another application/*+json type, with any parameters.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}
