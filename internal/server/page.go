// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/simulate"
)

// page is the live page: HTML, JavaScript and CSS, with no external
// references, so it works offline.
//
//go:embed page/*
var page embed.FS

// maxSimulated bounds the requests one POST /v1/simulate may run.
const maxSimulated = 10_000

// MaxSimulations is the most POST /v1/simulate requests that run at once.
// One at a time: a simulation of maxSimulated requests holds a CPU for tens
// of milliseconds, and sixteen at once made two of three RLS calls miss
// Envoy's 20 ms deadline (Envoy then admits without a limit). The page asks
// for one at a time anyway.
const MaxSimulations = 1

// handlePage routes the live page's files on mux: the page at "/" exactly
// and each other file at its own name, so that no catch-all "GET /" turns a
// wrong method on an API path (GET /v1/check) into a 404 instead of a 405.
func (s *Server) handlePage(mux *routes) {
	sub, _ := fs.Sub(page, "page")
	files := http.FileServerFS(sub)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	mux.Handle("GET /{$}", h)
	names, _ := fs.ReadDir(sub, ".")
	for _, e := range names {
		if !e.IsDir() && e.Name() != "index.html" { // index.html is "/"
			mux.Handle("GET /"+e.Name(), h)
		}
	}
}

func (s *Server) handleRules(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.rulesView(s.now()))
}

// SimulateRequest is the body of POST /v1/simulate: a traffic pattern
// (simulate.ParsePattern) and either a rule in force (Rule, its key, which
// starts with its domain and names one rule; Domain, the older form's, is
// optional and must then be the rule's) or a policy (Algorithm, Limit,
// Period, Burst).
type SimulateRequest struct {
	Domain    string `json:"domain,omitempty"`
	Rule      string `json:"rule,omitempty"`
	Algorithm string `json:"algorithm,omitempty"`
	Limit     int64  `json:"limit,omitempty"`
	// Period is a Go duration ("1s").
	Period  string `json:"period,omitempty"`
	Burst   int64  `json:"burst,omitempty"`
	Pattern string `json:"pattern"`
}

// SimulateResponse is the answer to POST /v1/simulate.
type SimulateResponse struct {
	Policy   string `json:"policy"`
	Admitted int    `json:"admitted"`
	Delayed  int    `json:"delayed"`
	Refused  int    `json:"refused"`
	// SVG is the picture (simulate.Result.WriteSVG).
	SVG string `json:"svg"`
}

// handleSimulate runs a pattern through a policy on a throwaway memstore
// with a virtual clock: it never touches the store the server decides with.
//
// It is CPU-bound work any HTTP client can ask for, beside the decisions
// Envoy waits on under a deadline of its own: MaxSimulations run at once,
// and one more is answered 503 with Retry-After (simulationBusy), not
// queued.
func (s *Server) handleSimulate(w http.ResponseWriter, r *http.Request) {
	select {
	case s.simulating <- struct{}{}:
		defer func() { <-s.simulating }()
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "%d simulations are running, the most this service runs at once; retry later", MaxSimulations)
		return
	}
	var req SimulateRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	var p sluice.Policy
	switch {
	case req.Rule != "" && (req.Algorithm != "" || req.Limit != 0 || req.Period != "" || req.Burst != 0):
		writeError(w, http.StatusBadRequest, "rule %q and a policy (algorithm, limit, period, burst): give one, not both", req.Rule)
		return
	case req.Rule == "" && req.Domain != "":
		writeError(w, http.StatusBadRequest, "domain %q without rule: domain only says whose rule; give rule (its key)", req.Domain)
		return
	case req.Rule != "":
		sn := s.snap.Load()
		if sn == nil {
			writeError(w, http.StatusServiceUnavailable, "%v", errUnavailable)
			return
		}
		var found *config.Rule // a rule's key names one rule (config refuses two)
		for _, ru := range sn.cfg.Rules() {
			if ru.FullKey == req.Rule && (req.Domain == "" || ru.Domain == req.Domain) {
				found = ru
				break
			}
		}
		if found != nil && (found.Unlimited || found.Deny) {
			writeError(w, http.StatusBadRequest, "rule %q: unlimited and deny rules have no policy to simulate", req.Rule)
			return
		}
		if found == nil || found.Policy.Algorithm == "" { // an in-flight rule has no rate to simulate
			where := ""
			if req.Domain != "" {
				where = fmt.Sprintf(" in domain %q", req.Domain)
			}
			writeError(w, http.StatusNotFound, "rule %q: no such rule in force%s", req.Rule, where)
			return
		}
		p = found.Policy
	default:
		d, err := time.ParseDuration(req.Period)
		if err != nil {
			writeError(w, http.StatusBadRequest, "period %q: want a duration such as 1s", req.Period)
			return
		}
		p = sluice.Policy{Algorithm: sluice.Algorithm(req.Algorithm), Limit: req.Limit, Period: d, Burst: req.Burst}
		if err := p.Validate(); err != nil {
			writeError(w, http.StatusBadRequest, "%s", strings.TrimPrefix(err.Error(), `sluice: policy "": `))
			return
		}
	}
	reqs, err := simulate.ParsePattern(req.Pattern)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if len(reqs) > maxSimulated {
		writeError(w, http.StatusBadRequest, "pattern: %d requests, more than the %d the service simulates", len(reqs), maxSimulated)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	res, err := simulate.Run(ctx, p, reqs)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var b strings.Builder
	title := p.Name
	if title == "" {
		title = string(p.Algorithm)
	}
	res.WriteSVG(&b, title+": "+req.Pattern)
	resp := SimulateResponse{Policy: p.String(), SVG: b.String()}
	resp.Admitted, resp.Delayed, resp.Refused = res.Counts()
	writeJSON(w, http.StatusOK, resp)
}
