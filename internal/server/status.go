// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/buildinfo"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// StoreFailingFor is how long after its last failed decision the store is
// reported "failing" on the live page and in GET /v1/status.
const StoreFailingFor = 10 * time.Second

// buildVersion is buildinfo.Version, read once.
var buildVersion = sync.OnceValue(buildinfo.Version)

// maxErrorBytes bounds the last store error GET /v1/status shows.
const maxErrorBytes = 256

// Store states in StoreStatus.State.
const (
	StoreOK          = "ok"
	StoreFailing     = "failing"
	StoreBreakerOpen = "breaker_open"
)

// WithStoreName names the store in GET /v1/status and on the live page, as
// the operator gave it (serve passes --store without its password). The
// default is the store's kind ("memory", "redis").
func WithStoreName(name string) Option { return func(s *Server) { s.storeName = name } }

// storeHealth counts the decisions whose store call failed (the rules'
// failure modes decided them), per second over the last HistorySeconds,
// whatever the store.
type storeHealth struct {
	mu      sync.Mutex
	ring    [HistorySeconds]struct{ sec, n int64 }
	total   int64
	lastErr string
	lastAt  time.Time
}

// failed counts one failed decision at now.
func (h *storeHealth) failed(now time.Time, err error) {
	sec := now.Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	slot := &h.ring[sec%HistorySeconds]
	if slot.sec != sec {
		slot.sec, slot.n = sec, 0
	}
	slot.n++
	h.total++
	h.lastAt = now
	if err != nil {
		h.lastErr = cut(err.Error(), maxErrorBytes)
	}
}

// StatusResponse is the answer to GET /v1/status: what runs, since when,
// and how its store is.
type StatusResponse struct {
	// Version is what sluice was built from, as `sluice version` prints
	// it; GoVersion the Go toolchain.
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	// StartedAt is when the server was created; UptimeSeconds the time
	// since.
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	// Now is the server's time, Unix seconds.
	Now      int64         `json:"now"`
	Store    StoreStatus   `json:"store"`
	Replicas ReplicaStatus `json:"replicas"`
}

// StoreStatus is the store in use and its health.
type StoreStatus struct {
	// Kind is "memory", "redis" or "other".
	Kind string `json:"kind"`
	// Name is the store as the operator named it (WithStoreName), else
	// Kind.
	Name string `json:"name"`
	// State is StoreBreakerOpen while Redis's circuit breaker is open,
	// else StoreFailing when a decision failed in the last
	// StoreFailingFor, else StoreOK.
	State string `json:"state"`
	// Failures counts the requests whose store calls failed since start,
	// once each (a decision's failure modes decided it; a reset or a usage
	// read answered an error): sluice_store_errors_total summed over
	// domains. FailuresLastMinute counts those of the last 60 seconds.
	Failures           int64 `json:"failures"`
	FailuresLastMinute int64 `json:"failures_last_minute"`
	// FailureSeries counts them per second over the last HistorySeconds
	// seconds, oldest first, ending at Now.
	FailureSeries []int64 `json:"failure_series"`
	// LastError is the last failure's error (cut at 256 bytes), and
	// LastErrorAt when it happened; absent before the first.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Redis is set for a Redis store: its own counters.
	Redis *RedisStatus `json:"redis,omitempty"`
}

// RedisStatus is a Redis store's breaker and counters
// (redisstore.Stats); each count is the sluice_redis_<name>_total metric
// of the same name.
type RedisStatus struct {
	BreakerOpen       bool   `json:"breaker_open"`
	Calls             uint64 `json:"calls"`
	Errors            uint64 `json:"errors"`
	Timeouts          uint64 `json:"timeouts"`
	CallerTimeouts    uint64 `json:"caller_timeouts"`
	HeartbeatTimeouts uint64 `json:"heartbeat_timeouts"`
	ShortCircuited    uint64 `json:"short_circuited"`
	BreakerOpens      uint64 `json:"breaker_opens"`
	DialErrors        uint64 `json:"dial_errors"`
}

// redisStatus is x as GET /v1/status shows it.
func redisStatus(x redisstore.Stats) *RedisStatus {
	return &RedisStatus{BreakerOpen: x.BreakerOpen, Calls: x.Calls, Errors: x.Errors, Timeouts: x.Timeouts,
		CallerTimeouts: x.CallerTimeouts, HeartbeatTimeouts: x.HeartbeatTimeouts, ShortCircuited: x.ShortCircuited,
		BreakerOpens: x.BreakerOpens, DialErrors: x.DialErrors}
}

// ReplicaStatus is the replica count that sizes each fail-local rule's
// share of its limit while the store fails (⌊limit/Count⌋).
type ReplicaStatus struct {
	Count int `json:"count"`
	// CountedBy is "heartbeats" (the replicas count each other in Redis)
	// or "fixed" (--replicas, or 1 on the memory store).
	CountedBy string `json:"counted_by"`
	// FailLocalRules counts the rules in force that fail local.
	FailLocalRules int `json:"fail_local_rules"`
}

// unwrapStore finds the store under wrappers that have an Unwrap()
// sluice.Store method (the tracing wrapper), as rlqs.BoardFor does.
func unwrapStore(st sluice.Store) sluice.Store {
	for range 8 {
		u, ok := st.(interface{ Unwrap() sluice.Store })
		if !ok {
			break
		}
		st = u.Unwrap()
	}
	return st
}

// statusView builds GET /v1/status's answer.
func (s *Server) statusView(now time.Time) StatusResponse {
	resp := StatusResponse{
		Version: buildVersion(), GoVersion: runtime.Version(),
		StartedAt: s.started.UTC(), UptimeSeconds: max(0, now.Sub(s.started).Seconds()), Now: now.Unix(),
	}
	st := &resp.Store
	switch rs := unwrapStore(s.base).(type) {
	case *memstore.Store:
		st.Kind = "memory"
	case *redisstore.Store:
		st.Kind = "redis"
		st.Redis = redisStatus(rs.Stats())
	default:
		st.Kind = "other"
	}
	st.Name = s.storeName
	if st.Name == "" {
		st.Name = st.Kind
	}
	h := &s.health
	nowSec := now.Unix()
	st.FailureSeries = make([]int64, HistorySeconds)
	h.mu.Lock()
	for i := range HistorySeconds {
		sec := nowSec - HistorySeconds + 1 + int64(i)
		if c := h.ring[((sec%HistorySeconds)+HistorySeconds)%HistorySeconds]; c.sec == sec {
			st.FailureSeries[i] = c.n
			if i >= HistorySeconds-60 {
				st.FailuresLastMinute += c.n
			}
		}
	}
	st.Failures, st.LastError = h.total, h.lastErr
	if !h.lastAt.IsZero() {
		at := h.lastAt.UTC()
		st.LastErrorAt = &at
	}
	failing := !h.lastAt.IsZero() && now.Sub(h.lastAt) < StoreFailingFor
	h.mu.Unlock()
	switch {
	case st.Redis != nil && st.Redis.BreakerOpen:
		st.State = StoreBreakerOpen
	case failing:
		st.State = StoreFailing
	default:
		st.State = StoreOK
	}

	resp.Replicas.Count = s.replicas.Replicas()
	switch s.replicas.(type) {
	case *redisstore.Replicas:
		resp.Replicas.CountedBy = "heartbeats"
	case sluice.FixedReplicas:
		resp.Replicas.CountedBy = "fixed"
	default:
		resp.Replicas.CountedBy = fmt.Sprintf("%T", s.replicas)
	}
	if sn := s.snap.Load(); sn != nil {
		for _, r := range sn.cfg.Rules() {
			if r.FailureMode == sluice.FailLocal && !r.Unlimited && !r.Deny && r.InFlight == nil {
				resp.Replicas.FailLocalRules++
			}
		}
	}
	return resp
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.statusView(s.now()))
}
