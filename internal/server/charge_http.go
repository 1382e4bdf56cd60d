// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/decide"
)

// Costs known only after the response (LLM tokens), over the JSON API:
//
//   - POST /v1/charge records hits_addend on each descriptor's rule even
//     past its limit (sluice.Limiter.Charge): the key is then in debt and
//     refuses until the debt is paid back.
//   - POST /v1/reserve is a check of the estimate (hits_addend) that, when
//     admitted, keeps a reservation in the server for ReservationTTL, at
//     most MaxReservations at once.
//   - POST /v1/commit settles a reservation with the actual cost: what
//     exceeds a descriptor's estimate is charged; a smaller cost gives
//     nothing back (the estimate stays spent, as Envoy's debits do).
//
// A reservation lives in the memory of the replica that made it: commit it
// on the same one. One that expires uncommitted is dropped; its estimate
// stays spent.
//
// A reservation settles once, and only by a commit that recorded every
// charge it had to make (answered 200): it is then gone, and another
// commit of it is answered 404. A commit that did not (its Sluice-Timeout
// passed, 504; the store failed, 502; no configuration yet, 503) leaves
// the reservation open until it expires, for a retry of the commit with
// the same hits_addend: the retry charges what is not recorded yet, and a
// descriptor whose charge the store recorded is not charged again (also
// when the store's answer came after the deadline). A store call that the
// deadline or a store error cut off while the store was running it may
// have been recorded all the same, unbeknown to the server: the retry
// charges it again, erring towards counting twice rather than never. One
// commit of a reservation runs at a time: another, while it does, is
// answered 409 and charges nothing, and so is a retry with another
// hits_addend once part of the charge is recorded.
const (
	// ReservationTTL is how long a reservation waits for its commit.
	ReservationTTL = 10 * time.Minute
	// MaxReservations is the most reservations a server keeps at once;
	// beyond it, /v1/reserve answers 503 and takes nothing.
	MaxReservations = 100_000
	// MaxReservationBytes bounds the memory the open reservations hold
	// (their descriptors' keys and values, and a fixed cost per entry and
	// per reservation); beyond it, /v1/reserve answers 503.
	MaxReservationBytes = 64 << 20
)

// ReserveResponse is the answer to POST /v1/reserve: the check's, and for
// an admitted request the reservation to commit.
type ReserveResponse struct {
	CheckResponse
	// ReservationID names the reservation in POST /v1/commit; absent when
	// the request was refused (nothing is held then).
	ReservationID string `json:"reservation_id,omitempty"`
	// ExpiresIn is the seconds left to commit it.
	ExpiresIn float64 `json:"expires_in,omitempty"`
}

// CommitRequest is the body of POST /v1/commit.
type CommitRequest struct {
	ReservationID string `json:"reservation_id"`
	// HitsAddend is the actual cost of every descriptor of the
	// reservation.
	HitsAddend *int64 `json:"hits_addend"`
}

// reservations are the server's open reservations, by ID.
type reservations struct {
	mu    sync.Mutex
	m     map[string]*reservation
	bytes int // the size of every reservation of m
}

type reservation struct {
	domain  string
	descs   []descriptor // with each descriptor's estimate as hits
	expires time.Time
	size    int

	// A commit's progress, under reservations.mu. committing: a commit
	// is under way (claim). recorded[i]: descriptor i's charge is
	// recorded; cost is then the hits_addend it was charged for, which a
	// retry must repeat.
	committing bool
	recorded   []bool
	cost       int64
}

// partly reports whether part of r's charge is recorded.
func (r *reservation) partly() bool {
	return slices.Contains(r.recorded, true)
}

// sizeOf returns what a reservation of domain and descs counts toward
// MaxReservationBytes.
func sizeOf(domain string, descs []descriptor) int {
	n := 128 + len(domain)
	for _, d := range descs {
		n += 64
		for _, e := range d.entries {
			n += 32 + len(e.Key) + len(e.Value)
		}
	}
	return n
}

func (s *Server) handleCharges(mux *routes) {
	mux.HandleFunc("POST /v1/charge", s.handleCharge)
	mux.HandleFunc("POST /v1/reserve", s.handleReserve)
	mux.HandleFunc("POST /v1/commit", s.handleCommit)
}

// readCheck reads the request of /v1/check, /v1/charge and /v1/reserve:
// its deadline (TimeoutHeader), its JSON body and its descriptors. When
// one is wrong it answers 400 (or what decodeJSON answers) and ok is false;
// otherwise the caller must call cancel.
func readCheck(w http.ResponseWriter, r *http.Request) (ctx context.Context, cancel context.CancelFunc, req CheckRequest, descs []descriptor, ok bool) {
	ctx, cancel, ok = withTimeout(w, r)
	if !ok {
		return nil, nil, req, nil, false
	}
	if !decodeJSON(w, r, &req) {
		cancel()
		return nil, nil, req, nil, false
	}
	descs, msg := descriptorsOf(&req)
	if msg != "" {
		cancel()
		writeError(w, http.StatusBadRequest, "%s", msg)
		return nil, nil, req, nil, false
	}
	return ctx, cancel, req, descs, true
}

// descriptorsOf returns req's descriptors with their costs, or a message
// naming what is wrong.
func descriptorsOf(req *CheckRequest) ([]descriptor, string) {
	switch {
	case req.Domain == "":
		return nil, "domain: must not be empty"
	case len(req.Descriptors) == 0:
		return nil, "descriptors: must not be empty"
	case len(req.Descriptors) > MaxDescriptors:
		return nil, descriptorsBound(len(req.Descriptors))
	}
	hits := int64(1)
	if req.HitsAddend != nil {
		hits = *req.HitsAddend
		if hits < 0 {
			return nil, fmt.Sprintf("hits_addend %d: must be >= 0", hits)
		}
	}
	descs := make([]descriptor, len(req.Descriptors))
	for i, d := range req.Descriptors {
		if msg := entriesBound(i, len(d.Entries)); msg != "" {
			return nil, msg
		}
		descs[i] = descriptor{entries: d.Entries, hits: hits}
		if d.HitsAddend != nil {
			descs[i].hits = *d.HitsAddend
		}
		if descs[i].hits < 0 {
			return nil, fmt.Sprintf("descriptors[%d]: hits_addend %d: must be >= 0", i, descs[i].hits)
		}
	}
	return descs, ""
}

// charge records each descriptor's hits on its rule past the limit and
// returns the state after, as check's outcomes: a descriptor is over when
// its key no longer admits a unit. When the store fails a descriptor is
// failed, and failure is the first such error. recorded, when not nil,
// is set for each descriptor whose hits (more than 0) the store recorded,
// also when err (errGone) ends the charge before the others are tried.
func (s *Server) charge(ctx context.Context, domain string, descs []descriptor, recorded []bool) (outs []outcome, failure, err error) {
	sn := s.snap.Load()
	if sn == nil {
		return nil, nil, errUnavailable
	}
	outs = make([]outcome, len(descs))
	for i, d := range descs {
		var lim *sluice.Limiter
		if s.resolve(ctx, sn, domain, d.entries, &outs[i], &lim) == nil {
			continue
		}
		r := outs[i].rule // the rule that decides the key: its override's, its shadow copy
		switch {
		case r.Unlimited:
			continue
		case r.Deny:
			outs[i].over = d.hits > 0 && !r.ShadowMode
			continue
		}
		dd, err := lim.Charge(ctx, storeKey(r, d.entries), d.hits)
		if err == nil && recorded != nil && d.hits > 0 {
			recorded[i] = true // even if the deadline has passed since
		}
		if v := decide.Classify(ctx, nil, sluice.Result{}, err); v.Outcome == decide.Gone {
			return nil, nil, errGone
		}
		if err != nil {
			s.storeFailed(domain, err, r.Title)
			outs[i].failed = true
			if failure == nil {
				failure = err
			}
		}
		outs[i].decision = dd
		outs[i].over = !dd.Allowed && !r.ShadowMode
		outs[i].shadowOver = !dd.Allowed && r.ShadowMode
		s.quota.crossings.observe(domain, d.entries, &outs[i]) // usage.go
	}
	return outs, failure, nil
}

// answer writes outs as a CheckResponse (with extra, a ReserveResponse,
// when not nil), or err.
func answer(w http.ResponseWriter, r *http.Request, outs []outcome, err error, extra *ReserveResponse) {
	if errors.Is(err, errGone) {
		if r.Context().Err() == nil {
			writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered", TimeoutHeader)
		}
		return
	}
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errUnavailable) {
			code = http.StatusServiceUnavailable
		}
		writeError(w, code, "%v", err)
		return
	}
	resp := CheckResponse{OverallCode: "OK", Allowed: true, Statuses: make([]JSONStatus, len(outs))}
	for i := range outs {
		resp.Statuses[i] = toJSON(&outs[i])
		if outs[i].over {
			resp.OverallCode, resp.Allowed = "OVER_LIMIT", false
		}
	}
	if extra == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	extra.CheckResponse = resp
	writeJSON(w, http.StatusOK, extra)
}

func (s *Server) handleCharge(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, req, descs, ok := readCheck(w, r)
	if !ok {
		return
	}
	defer cancel()
	outs, _, err := s.charge(ctx, req.Domain, descs, nil)
	answer(w, r, outs, err, nil)
}

func (s *Server) handleReserve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, req, descs, ok := readCheck(w, r)
	if !ok {
		return
	}
	defer cancel()
	now := s.now()
	size := sizeOf(req.Domain, descs)
	if !s.holds.room(now, size) {
		writeError(w, http.StatusServiceUnavailable, "too many open reservations (at most %d, of %d MiB): commit some first", MaxReservations, MaxReservationBytes>>20)
		return
	}
	allowed, outs, err := s.check(ctx, "http", req.Domain, descs)
	var resp ReserveResponse
	if err == nil && allowed {
		resp.ReservationID = s.holds.add(&reservation{domain: req.Domain, descs: descs, expires: now.Add(ReservationTTL), size: size})
		resp.ExpiresIn = ReservationTTL.Seconds()
	}
	answer(w, r, outs, err, &resp)
}

func (s *Server) handleCommit(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := withTimeout(w, r)
	if !ok {
		return
	}
	defer cancel()
	var req CommitRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	switch {
	case req.ReservationID == "":
		writeError(w, http.StatusBadRequest, "reservation_id: must not be empty")
		return
	case req.HitsAddend == nil:
		writeError(w, http.StatusBadRequest, "hits_addend: missing (the actual cost)")
		return
	case *req.HitsAddend < 0:
		writeError(w, http.StatusBadRequest, "hits_addend %d: must be >= 0", *req.HitsAddend)
		return
	}
	cost := *req.HitsAddend
	res, recorded, charged, why := s.holds.claim(req.ReservationID, cost, s.now())
	switch why {
	case claimNone:
		writeError(w, http.StatusNotFound, "reservation_id %q: no open reservation (committed already, expired, or made on another replica)", req.ReservationID)
		return
	case claimBusy:
		writeError(w, http.StatusConflict, "reservation_id %q: another commit of it is under way; nothing charged (retry once it has answered)", req.ReservationID)
		return
	case claimCost:
		writeError(w, http.StatusConflict, "hits_addend %d: reservation_id %q is partly charged for hits_addend %d by an earlier commit; nothing charged (retry with %[3]d)", cost, req.ReservationID, charged)
		return
	}
	// What a descriptor's charge recorded already is not charged again: a
	// peek gives its state.
	descs := make([]descriptor, len(res.descs))
	for i, d := range res.descs {
		descs[i] = descriptor{entries: d.entries, hits: max(0, cost-d.hits)}
		if recorded[i] {
			descs[i].hits = 0
		}
	}
	done := slices.Clone(recorded)
	released := false
	defer func() { // a panic too leaves the reservation open
		if !released {
			s.holds.release(req.ReservationID, res, done, cost, false)
		}
	}()
	outs, failure, err := s.charge(ctx, res.domain, descs, done)
	var missed []int // charges the store failed to record
	for i := range outs {
		if outs[i].failed && descs[i].hits > 0 {
			missed = append(missed, i)
		}
	}
	settled := err == nil && len(missed) == 0
	// Released before the answer, so that a retry sent on it finds the
	// reservation free.
	s.holds.release(req.ReservationID, res, done, cost, settled)
	released = true
	if settled {
		answer(w, r, outs, nil, nil)
		return
	}
	open := fmt.Sprintf("the reservation stays open until it expires, in %v: retry the commit with hits_addend %d", res.expires.Sub(s.now()).Round(time.Second), cost)
	switch {
	case errors.Is(err, errGone):
		if r.Context().Err() == nil { // the caller's own Sluice-Timeout passed; it still listens
			writeError(w, http.StatusGatewayTimeout, "%s passed before the store answered: %s", TimeoutHeader, open)
		}
	case err != nil: // errUnavailable, charge's only other error
		writeError(w, http.StatusServiceUnavailable, "%v: %s", err, open)
	default:
		writeError(w, http.StatusBadGateway, "the store failed charging descriptors %v: %v; %s", missed, failure, open)
	}
}

// room reports whether another reservation of size fits at now, dropping
// the expired ones when the bounds are reached. (Reservations being made
// meanwhile may pass the bounds by what they hold.)
func (rs *reservations) room(now time.Time, size int) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	fits := func() bool { return len(rs.m) < MaxReservations && rs.bytes+size <= MaxReservationBytes }
	if fits() {
		return true
	}
	for id, r := range rs.m {
		if !now.Before(r.expires) {
			delete(rs.m, id)
			rs.bytes -= r.size
		}
	}
	return fits()
}

// add keeps r and returns its new ID.
func (rs *reservations) add(r *reservation) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*reservation{}
	}
	rs.m[id] = r
	rs.bytes += r.size
	return id
}

// Why claim refused a commit.
const (
	claimed   = iota
	claimNone // no reservation id is open
	claimBusy // another commit of it is under way
	claimCost // part of it is charged for another cost
)

// claim starts a commit of the reservation id, open at now, for cost: it
// returns the reservation and which of its descriptors' charges are
// recorded (a copy), or why not (claimNone, claimBusy, claimCost; with
// claimCost, charged is the cost part of it is recorded for). A claimed
// commit must end with release. An expired reservation is dropped.
func (rs *reservations) claim(id string, cost int64, now time.Time) (r *reservation, recorded []bool, charged int64, why int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r = rs.m[id]
	switch {
	case r == nil:
		return nil, nil, 0, claimNone
	case !now.Before(r.expires):
		if !r.committing {
			delete(rs.m, id)
			rs.bytes -= r.size
		}
		return nil, nil, 0, claimNone
	case r.committing:
		return nil, nil, 0, claimBusy
	case r.partly() && r.cost != cost:
		return nil, nil, r.cost, claimCost
	}
	r.committing = true
	recorded = make([]bool, len(r.descs))
	copy(recorded, r.recorded)
	return r, recorded, 0, claimed
}

// release ends the commit of r (the reservation id) that claim started:
// recorded says which descriptors' charges are now recorded, for cost; a
// settled reservation is gone, another is open again for a retry. (One
// that expired meanwhile may be gone already.)
func (rs *reservations) release(id string, r *reservation, recorded []bool, cost int64, settled bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r.committing = false
	r.recorded = recorded
	if slices.Contains(recorded, true) {
		r.cost = cost
	}
	if settled && rs.m[id] == r {
		delete(rs.m, id)
		rs.bytes -= r.size
	}
}
