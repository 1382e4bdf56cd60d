// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"
	"time"
)

// reloadsDuring runs Watch's timing (reloadDue, and a timer reset on every
// change) over changes every `every` for `span` on a virtual clock, and
// returns the times of the reloads, from the first change.
func reloadsDuring(every, span time.Duration) []time.Duration {
	due := reloadDue{debounce: DefaultReloadDebounce, maxWait: max(MaxReloadWait, DefaultReloadDebounce)}
	var (
		reloads  []time.Duration
		deadline time.Duration = -1 // the timer; -1: stopped
	)
	for now := time.Duration(0); now <= span+time.Minute; now += time.Millisecond {
		if deadline >= 0 && now >= deadline {
			due.fired()
			reloads = append(reloads, now)
			deadline = -1
		}
		if now <= span && now%every == 0 {
			deadline = now + due.change(time.Unix(0, 0).Add(now))
		}
	}
	return reloads
}

// TestReloadWhileWritten: a file rewritten every 50 ms for 10 s is
// reloaded at least once every MaxReloadWait while the writes go on, and
// once after they stop. Watch waited for 250 ms of quiet, with no longest
// wait: it reloaded only after the writes stopped.
func TestReloadWhileWritten(t *testing.T) {
	reloads := reloadsDuring(50*time.Millisecond, 10*time.Second)
	if len(reloads) < 10 {
		t.Fatalf("%d reloads in 10 s of writes every 50 ms: %v", len(reloads), reloads)
	}
	prev := time.Duration(0)
	for _, r := range reloads {
		if r-prev > MaxReloadWait+50*time.Millisecond {
			t.Errorf("reloads at %v and %v: more than %v apart while writes went on", prev, r, MaxReloadWait)
		}
		prev = r
	}
	if last := reloads[len(reloads)-1]; last != 10*time.Second+DefaultReloadDebounce {
		t.Errorf("last reload at %v, want the debounce after the last write, %v", last, 10*time.Second+DefaultReloadDebounce)
	}
	// One change alone waits only the debounce.
	if r := reloadsDuring(time.Hour, 0); len(r) != 1 || r[0] != DefaultReloadDebounce {
		t.Errorf("one change: reloads %v", r)
	}
}
