// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestReplicas: replicas count each other by heartbeats; one that leaves is
// uncounted at once, one that stops beating once its TTL passes; while Redis
// is gone every counter keeps its last count; on a Cluster it works alike.
func TestReplicas(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	s, err := Open("redis://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	a, b, c := newReplicas(t, s, "a", time.Hour), newReplicas(t, s, "b", time.Hour), newReplicas(t, s, "c", 50*time.Millisecond)
	if a.Replicas() != 1 {
		t.Fatalf("before any beat: %d, want 1", a.Replicas())
	}
	for i, r := range []*Replicas{a, b, c} {
		if n, err := r.Beat(ctx); err != nil || n != i+1 {
			t.Fatalf("beat %d: %d, %v; want %d", i, n, err, i+1)
		}
	}
	if n, _ := a.Beat(ctx); n != 3 || a.Replicas() != 3 {
		t.Fatalf("a sees %d (Replicas %d), want 3", n, a.Replicas())
	}
	// c's beat expires after 50ms by Redis TIME; poll until a sees it gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := a.Beat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c still counted 10s after its 50ms TTL: %d", n)
		}
		time.Sleep(10 * time.Millisecond) // polling Redis's clock
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Beat(ctx); n != 1 {
		t.Fatalf("after b left: %d, want 1", n)
	}
	b.Beat(ctx)
	a.Beat(ctx)
	srv.Kill()
	if _, err := a.Beat(ctx); err == nil {
		t.Fatal("a beat on a killed Redis: no error")
	}
	if a.Replicas() != 3 {
		t.Fatalf("during the outage: %d, want the largest count of the last TTL (an hour here), 3", a.Replicas())
	}
}

// TestReplicasCountFalls: Replicas answers the largest count beats saw
// within the last TTL, so it falls no faster than other replicas' beats
// expire: a lower count (a Redis restarted empty, a replica that left) is
// answered once the higher one is a TTL old.
func TestReplicasCountFalls(t *testing.T) {
	r := &Replicas{ttl: 3 * time.Second}
	t0 := time.Unix(1_700_000_000, 0)
	for _, step := range []struct {
		n    int64
		at   time.Duration
		want int64
	}{
		{3, 0, 3},
		{1, time.Second, 3},             // Redis restarted empty: still 3
		{2, 2 * time.Second, 3},         // the others beat again
		{1, 3 * time.Second, 2},         // the 3 is a TTL old; the 2 is not
		{1, 5 * time.Second, 1},         // and now the 2 is
		{0, 6 * time.Second, 1},         // never below 1
		{4, 6500 * time.Millisecond, 4}, // a rise counts at once
	} {
		if got := r.record(step.n, t0.Add(step.at)); got != step.want {
			t.Fatalf("a beat seeing %d at +%v: Replicas %d, want %d", step.n, step.at, got, step.want)
		}
	}
}

func TestReplicasCluster(t *testing.T) {
	nodes := sluicetest.StartRedisCluster(t, 3)
	s, err := Open("redis+cluster://" + nodes[0] + "," + nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i, id := range []string{"x", "y"} {
		if n, err := newReplicas(t, s, id, time.Hour).Beat(ctx); err != nil || n != i+1 {
			t.Fatalf("beat %s: %d, %v; want %d", id, n, err, i+1)
		}
	}
}

// newReplicas is NewReplicas with an interval of a tenth of ttl.
func newReplicas(t *testing.T, s *Store, id string, ttl time.Duration) *Replicas {
	t.Helper()
	r, err := NewReplicas(s, id, ttl/10, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReplicasIntervalBelowTTL: an interval not shorter than the TTL is
// refused, naming both: a replica would drop out between its beats.
func TestReplicasIntervalBelowTTL(t *testing.T) {
	s, err := Open("redis://127.0.0.1:1") // never dialled: NewReplicas does no I/O
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct{ interval, ttl time.Duration }{
		{3 * time.Second, 3 * time.Second},
		{5 * time.Second, 0}, // the default TTL, 3s
		{0, time.Second},     // the default interval, 1s
	} {
		_, err := NewReplicas(s, "a", tc.interval, tc.ttl)
		if err == nil || !strings.Contains(err.Error(), "interval") || !strings.Contains(err.Error(), "TTL") {
			t.Errorf("interval %v, ttl %v: %v; want an error naming both", tc.interval, tc.ttl, err)
		}
	}
	if _, err := NewReplicas(s, "a", time.Second, 1001*time.Millisecond); err != nil {
		t.Errorf("interval 1s, ttl 1.001s: %v", err)
	}
}

// TestBeatTimeoutIsNoCallerTimeout: a heartbeat that runs out of its own
// deadline on a stalled Redis (Run bounds each beat by the interval) is
// counted in Stats.HeartbeatTimeouts, not in CallerTimeouts: no caller
// waited for it, and no failure mode answered anyone. Like a caller's
// timeout it is no error and leaves the breaker closed.
func TestBeatTimeoutIsNoCallerTimeout(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	s, err := Open("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := newReplicas(t, s, "a", time.Hour)
	if _, err := r.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, addr)
	if err := admin.Do(t.Context(), admin.B().ClientPause().Timeout(800).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err := r.Beat(ctx)
		cancel()
		if err == nil {
			t.Fatalf("beat %d on a paused Redis: no error", i)
		}
	}
	if st := s.Stats(); st.HeartbeatTimeouts != 3 || st.CallerTimeouts != 0 || st.Errors != 0 || st.BreakerOpens != 0 {
		t.Fatalf("3 beats timed out on a paused Redis: %+v; want 3 heartbeat timeouts, no caller timeout, no error, the breaker closed", st)
	}
}

// TestZeroReplicas: the zero Replicas (a field of a struct, say) and a nil
// *Replicas count 1, and Beat, Leave and Run neither panic nor block: Beat
// and Leave fail with an error wrapping sluice.ErrStoreClosed, as the zero
// stores do, and Run reports it once and returns. (Beat and Leave
// dereferenced the nil store; Run panicked on a ticker of interval 0.) It
// needs no Redis.
func TestZeroReplicas(t *testing.T) {
	for _, z := range []struct {
		name string
		r    *Replicas
	}{{"the zero Replicas", new(Replicas)}, {"a nil *Replicas", nil}} {
		r := z.r
		synctest.Test(t, func(t *testing.T) {
			ctx := t.Context()
			call := func(name string, f func() error) {
				t.Helper()
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s: %s panicked: %v", z.name, name, p)
					}
				}()
				if err := f(); !errors.Is(err, sluice.ErrStoreClosed) {
					t.Errorf("%s: %s: %v, want an error wrapping sluice.ErrStoreClosed", z.name, name, err)
				}
			}
			if n := r.Replicas(); n != 1 {
				t.Errorf("%s: Replicas() = %d, want 1", z.name, n)
			}
			call("Beat", func() error {
				n, err := r.Beat(ctx)
				if n != 1 {
					t.Errorf("%s: Beat counted %d, want 1", z.name, n)
				}
				return err
			})
			call("Leave", func() error { return r.Leave(ctx) })
			call("Run", func() error {
				var errs []error
				r.Run(ctx, func(err error) { errs = append(errs, err) })
				if len(errs) != 1 {
					t.Errorf("%s: Run reported %d errors, want 1: %v", z.name, len(errs), errs)
				}
				return errors.Join(errs...)
			})
		})
	}
}
