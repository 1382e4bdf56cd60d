// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestFixedTrace: fixed.lua's paths against the model, step by
// step on a caller's clock that moves forward and back: the first
// admission of a window (a new key, an earlier window still in Redis for
// the expiry slack, a count given back to 0), later admissions and their
// refusals, peeks, impossible costs, a stored window ahead of the clock and
// one written under another period (both handed to take.lua), and Gives.
// It fails if a refusal's HINCRBY is not taken back, if an earlier
// window's count is read as this one's, or if a Give reaches a window that
// is over.
func TestFixedTrace(t *testing.T) { fixedTrace(t) }

// TestFixedTraceRedis6: TestFixedTrace where PEXPIRE has no NX, as before
// Redis 7.0 (an unknown option errs alike), so that fixed.lua's other way
// to give a new key its expiry decides.
func TestFixedTraceRedis6(t *testing.T) {
	asRedis6(t)
	fixedTrace(t)
}

// asRedis6 makes singles.lua, until the test ends, use an option of
// PEXPIRE that Redis does not know where it uses NX: it errs alike, as NX
// does before Redis 7.0.
func asRedis6(t *testing.T) {
	if !strings.Contains(singlesText, "'NX'") {
		t.Fatal("singles.lua no longer uses PEXPIRE ... NX")
	}
	saved := singlesScript
	singlesScript = rueidis.NewLuaScript(strings.ReplaceAll(singlesText, "'NX'", "'NO-SUCH-OPTION'"))
	t.Cleanup(func() { singlesScript = saved })
}

func fixedTrace(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.Unix(1_700_000_000, 0)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock))
	policies := []sluice.Policy{
		{Name: "f", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second},
		{Name: "f", Algorithm: sluice.FixedWindow, Limit: 5, Period: 2 * time.Second},
	}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	// First a clock that steps back into the previous window: the stored
	// one, ahead, decides (take.lua's path); then a random trace. The
	// reference is the model on each key's state, kept for ever: Redis
	// keeps every key here for the expiry slack (an hour).
	type step struct {
		p    sluice.Policy
		at   time.Duration
		key  string
		cost int64
	}
	steps := []step{
		{policies[0], 10100 * time.Millisecond, "b", 2}, {policies[0], 9900 * time.Millisecond, "b", 1},
		{policies[0], 9900 * time.Millisecond, "b", 0}, {policies[0], 10500 * time.Millisecond, "b", 3},
		{policies[0], 10500 * time.Millisecond, "b", 2}, {policies[0], 11 * time.Second, "b", 0},
	}
	var at time.Duration
	for range 3000 {
		p := policies[0]
		if rng.IntN(20) == 0 {
			p = policies[1]
		}
		at = max(at+time.Duration(rng.IntN(1500)-500)*time.Millisecond, 0)
		steps = append(steps, step{p, 20*time.Second + at, "k" + strconv.Itoa(rng.IntN(3)), []int64{0, 1, 1, 1, 2, 3, 6}[rng.IntN(7)]})
	}
	state := map[string]model.State{}
	for i, st := range steps {
		p, at, key, cost := st.p, st.at, st.key, st.cost
		clock.Set(t0.Add(at))
		got, gs, err := s.TakeStamped(ctx, p, key, cost)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := s.compile(p)
		if err != nil {
			t.Fatal(err)
		}
		ws, want := cp.model.Take(state[key], t0.Add(at).UnixNano(), cost)
		state[key] = ws
		// A take that writes reports the state it left; one that writes
		// nothing (a peek, a refusal) may report any state the model treats
		// the same from now on: it is probed with a cost of 1.
		wrote := got.Allowed && cost > 0
		_, probe := cp.model.Take(gs, t0.Add(at).UnixNano(), 1)
		_, wantProbe := cp.model.Take(ws, t0.Add(at).UnixNano(), 1)
		if got != want || (wrote && !reflect.DeepEqual(gs, ws)) || probe != wantProbe {
			t.Fatalf("step %d (%v at %v, %s) cost %d:\n got  %+v %+v\n want %+v %+v", i, p, at, key, cost, got, gs, want, ws)
		}
		// Every key expires (-1: a key without an expiry).
		sk, _ := stateKey(s.prefix, s.slot, policyTag(p), key)
		if ttl, err := c.Do(ctx, c.B().Pttl().Key(sk).Build()).AsInt64(); err != nil || ttl == -1 {
			t.Fatalf("step %d: PTTL %s = %d, %v: want an expiry", i, sk, ttl, err)
		}
		if got.Allowed && cost > 0 && rng.IntN(4) == 0 {
			units := 1 + rng.Int64N(cost)
			g, err := s.Give(ctx, p, key, gs, units)
			if err != nil {
				t.Fatal(err)
			}
			next, w := cp.model.Give(state[key], ws, units)
			state[key] = next
			if g != w {
				t.Fatalf("step %d: Give(%d) = %v, want %v", i, units, g, w)
			}
		}
	}
}

// TestFixedLayoutKey: the fixed window's state layout is named in its keys,
// so a process of an earlier version (fields t and c) never shares a key
// with this one.
func TestFixedLayoutKey(t *testing.T) {
	for _, p := range []sluice.Policy{
		{Name: "n", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second},
		{Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second},
	} {
		if tag := policyTag(p); !strings.Contains(tag, ":fixed-window.2") {
			t.Errorf("policyTag(%+v) = %q, want the layout fixed-window.2 in it", p, tag)
		}
	}
	if tag := policyTag(sluice.Policy{Algorithm: sluice.SlidingWindow, Limit: 5, Period: time.Second}); strings.Contains(tag, ".2") {
		t.Errorf("sliding-window's tag %q names a layout; only fixed-window's changed", tag)
	}
}

// TestFixedOneCall: a later admission in a fixed window costs Redis one
// command inside the script (an HINCRBY), and the window's first on a new
// key two (HINCRBY and PEXPIRE): INFO commandstats.
func TestFixedOneCall(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	clock := sluicetest.NewClock(time.Unix(1_700_000_000, 0))
	s := newStore(t, c, WithClock(clock))
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Minute}
	ctx := t.Context()
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for k := range 10 {
		take(t, s, p, strconv.Itoa(k), 1)
	}
	for range 5 {
		for k := range 10 {
			take(t, s, p, strconv.Itoa(k), 1)
		}
	}
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	want := map[string]int{"hincrby": 60, "pexpire": 10}
	for cmd, n := range calls {
		if cmd == "evalsha" || cmd == "eval" || cmd == "script|load" || cmd == "config|resetstat" || cmd == "hello" || cmd == "client|tracking" {
			continue
		}
		if n != want[cmd] {
			t.Errorf("%s: %d calls, want %d (all: %v)", cmd, n, want[cmd], calls)
		}
	}
}

// TestFixedHugeCount: a count of 2⁵³+1 (a debt a charge left, or a limit
// lowered under the same name) is refused, and the state reported is the
// count exactly, not the nearest double.
func TestFixedHugeCount(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.Unix(1_700_000_000, 0)
	clock := sluicetest.NewClock(t0.Add(100 * time.Millisecond))
	s := newStore(t, c, WithClock(clock))
	p := sluice.Policy{Name: "huge", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second}
	key, _ := stateKey(s.prefix, s.slot, policyTag(p), "k")
	ctx := t.Context()
	f := strconv.FormatInt(t0.UnixNano(), 10) + ":" + strconv.FormatInt(t0.Add(time.Second).UnixNano(), 10)
	if err := c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(f, "9007199254740993").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Pexpire().Key(key).Milliseconds(60_000).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, cost := range []int64{1, 0} {
		d, st, err := s.TakeStamped(ctx, p, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed || st.Count != 9007199254740993 || st.Time != t0.UnixNano() {
			t.Fatalf("cost %d: %+v, state %+v; want refused, count 9007199254740993", cost, d, st)
		}
	}
}
