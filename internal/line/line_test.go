// SPDX-License-Identifier: Apache-2.0

package line

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestOrder: callers of one key get their turns in the order they
// arrived, a caller whose context ends leaves the line without a turn,
// and another key's line is not held up.
func TestOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ls Lines
		if err := ls.Enter(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
		var got []int
		done := make(chan struct{})
		cancelled, cancel := context.WithCancel(t.Context())
		for i := range 5 {
			ctx := t.Context()
			if i == 2 {
				ctx = cancelled
			}
			go func() {
				if err := ls.Enter(ctx, "k"); err != nil {
					if i != 2 || !errors.Is(err, context.Canceled) {
						t.Errorf("caller %d: %v", i, err)
					}
					done <- struct{}{}
					return
				}
				got = append(got, i) // the line serialises these
				ls.Leave("k")
				done <- struct{}{}
			}()
			synctest.Wait() // caller i is in line before caller i+1
		}
		if err := ls.Enter(t.Context(), "other"); err != nil {
			t.Fatalf("another key waits for k's line: %v", err)
		}
		ls.Leave("other")
		cancel()
		<-done // caller 2 left the line
		ls.Leave("k")
		for range 4 {
			<-done
		}
		if want := []int{0, 1, 3, 4}; !slices.Equal(got, want) {
			t.Errorf("turns %v, want %v", got, want)
		}
		if len(ls.m) != 0 {
			t.Errorf("%d lines left after every caller left, want 0", len(ls.m))
		}
	})
}

// TestEndedContext: a caller whose context has ended never gets a turn,
// even on an empty line.
func TestEndedContext(t *testing.T) {
	var ls Lines
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ls.Enter(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with an ended context: %v, want context.Canceled", err)
	}
	if err := ls.Enter(context.Background(), "k"); err != nil {
		t.Fatalf("the line is held by a caller that never entered: %v", err)
	}
}

// TestSleepFits: Sleep returns when its time is up or its context ends,
// and Fits compares a wait with the context's deadline.
func TestSleepFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if !Fits(ctx, time.Second) || Fits(ctx, time.Second+1) || !Fits(t.Context(), time.Hour) {
			t.Error("Fits: wrong against a 1 s deadline")
		}
		start := time.Now()
		if err := Sleep(ctx, 300*time.Millisecond); err != nil || time.Since(start) != 300*time.Millisecond {
			t.Errorf("Sleep(300ms): %v after %v", err, time.Since(start))
		}
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) with 700 ms left: %v after %v", err, time.Since(start))
		}
	})
}

// TestHold: once the current turn cannot end before a time (Hold), the
// waiters whose deadline comes first leave the line at once with
// ErrTooLate, whenever they arrived; a caller arriving later with such a
// deadline does not wait at all; the others keep their places, and the
// next turn forgets the bound.
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ls Lines
		if err := ls.Enter(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
		enter := func(d time.Duration) chan error {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			out := make(chan error, 1)
			go func() {
				defer cancel()
				out <- ls.Enter(ctx, "k")
			}()
			synctest.Wait()
			return out
		}
		short, long := enter(100*time.Millisecond), enter(time.Hour)
		start := time.Now()
		ls.Hold("k", start.Add(time.Second))
		synctest.Wait()
		select {
		case err := <-short:
			if !errors.Is(err, ErrTooLate) || time.Since(start) != 0 {
				t.Errorf("a waiter with 100ms behind a 1s hold: %v after %v, want ErrTooLate at once", err, time.Since(start))
			}
		default:
			t.Error("a waiter with 100ms is still in line behind a 1s hold")
		}
		if err := <-enter(500 * time.Millisecond); !errors.Is(err, ErrTooLate) || time.Since(start) != 0 {
			t.Errorf("arriving with 500ms behind a 1s hold: %v after %v, want ErrTooLate at once", err, time.Since(start))
		}
		ls.Leave("k")
		if err := <-long; err != nil {
			t.Fatalf("the waiter with an hour: %v, want its turn", err)
		}
		if err := <-enter(10 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("behind a turn with no hold, a 10ms waiter: %v, want its deadline (the bound was the previous turn's)", err)
		}
		ls.Leave("k")
	})
}
