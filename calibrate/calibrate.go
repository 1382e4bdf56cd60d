// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/replay"
)

// Config says what to calibrate for.
type Config struct {
	// Algorithm is the algorithm to recommend parameters for.
	Algorithm sluice.Algorithm
	// Period is the policy's period; default one second.
	Period time.Duration
	// Limit, if positive, fixes the limit (for the bucket kinds: the rate);
	// only the burst is calibrated then. Window kinds ignore it.
	Limit int64
	// RateWindow is, for the bucket kinds, the window over which the
	// sustained rate is measured: the rate is the Keep quantile over keys
	// of the peak units in one aligned RateWindow, scaled to the period
	// (rounded up). The burst then absorbs what that rate leaves over.
	// Default one minute, and never shorter than the period.
	RateWindow time.Duration
	// Keep is the share of keys, in (0, 1], that the recommendation must
	// never have refused, in parts per billion (999_000_000 is 99.9 %).
	// Default 99.9 %.
	Keep int64
	// Windows are the report's window lengths; default 1s, 10s, 1m, 1h.
	Windows []time.Duration
	// Name names the recommended policy; default "calibrated".
	Name string
}

// Billion is Config.Keep for 100 %.
const Billion = 1_000_000_000

// Quantiles are the shares of keys a Distribution reports, in parts per
// billion: p50, p90, p99, p99.9 and the maximum.
var Quantiles = []int64{500_000_000, 900_000_000, 990_000_000, 999_000_000, Billion}

// Distribution is a per-key quantity over the keys: At[i] is the smallest
// value that at least Quantiles[i] of the keys do not exceed.
type Distribution struct {
	Window time.Duration // the window length, for the peak distributions
	At     []int64
}

// Report is what Calibrate found.
type Report struct {
	Keys     int   // distinct keys
	Requests int64 // requests read
	Units    int64 // their total cost
	First    int64 // first request's time (ns since the epoch)
	Last     int64 // last request's time
	// Resolution is the coarsest of 1h, 1m, 1s, 100ms, ..., 1ns that
	// divides every request's time: whole-second access-log times have 1s.
	// Zero when all requests share one time.
	Resolution time.Duration
	// RateWindow is Config.RateWindow for the bucket kinds, zero otherwise.
	RateWindow time.Duration
	// RateUnits is, for the bucket kinds without Config.Limit, the peak
	// units in one aligned RateWindow of the MustKeep-th key: the rate is
	// RateUnits per RateWindow, per period, rounded up.
	RateUnits int64
	// Peaks are the distributions of each key's peak units in an aligned
	// window, one per Config.Windows.
	Peaks []Distribution
	// Need is the distribution of each key's exact need (see the package
	// documentation): its limit for the window kinds, its burst at the
	// recommended rate for the bucket kinds.
	Need Distribution
	// Burst is the distribution of each key's burst: the smallest
	// token-bucket burst that would never have refused it at the
	// recommended rate, Policy.Limit per Policy.Period (the same as Need
	// for the bucket kinds).
	Burst Distribution
	// Keep is Config.Keep; MustKeep = ⌈Keep·Keys⌉ keys must never have been
	// refused.
	Keep, MustKeep int64
	// Policy is the recommendation.
	Policy sluice.Policy
	// Replay is what the recommendation would have done to the traffic.
	Replay Outcome
}

// Outcome counts the decisions of a replay.
type Outcome struct {
	Refused, RefusedUnits int64
	// KeysRefused is the number of keys refused at least once.
	KeysRefused int
	// Top are the keys refused most, most first (at most 10).
	Top []KeyCount
}

// KeyCount is a key and a count of its requests.
type KeyCount struct {
	Key   string
	Count int64
}

// window is one key's running aligned-window peak.
type window struct{ idx, count, peak int64 }

// keyState is one key's running demand.
type keyState struct {
	need int64
	// sliding-window: the current aligned window and the two counts.
	start, cur, prev int64
	// bucket kinds: the debt max(TAT−t, 0) after the last request, in
	// units of 1/den ns, and that request's time.
	debt uint64
	last int64
	// sliding-log: the requests within the last period.
	log       []logEntry
	logHead   int
	logSum    int64
	windowOff int // index of the key's first window in demand.windows
}

type logEntry struct{ at, cost int64 }

// demand is the per-key state of one pass.
type demand struct {
	cfg     *Config
	alg     sluice.Algorithm
	period  int64
	wins    []int64 // window lengths: the report's, the period, the rate window
	num     uint64  // bucket kinds: the emission interval is num/den ns
	den     uint64
	keys    map[string]*keyState
	windows []window
	res     int // index in resolutions of the coarsest that fits so far
	rep     Report
}

// Calibrate reads the traffic (in three passes of src) and returns
// the report with its recommendation, verified by a replay. It returns an
// error if the traffic is empty or malformed, or if the verification fails.
func Calibrate(ctx context.Context, src Source, cfg Config) (*Report, error) {
	if _, err := sluice.ParseAlgorithm(string(cfg.Algorithm)); err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	if cfg.Period == 0 {
		cfg.Period = time.Second
	}
	if cfg.Period < 0 {
		return nil, fmt.Errorf("calibrate: period %v: must be positive", cfg.Period)
	}
	if cfg.Keep == 0 {
		cfg.Keep = 999_000_000
	}
	if cfg.Keep < 0 || cfg.Keep > Billion {
		return nil, fmt.Errorf("calibrate: keep %d ppb: must be in (0, 100%%]", cfg.Keep)
	}
	if len(cfg.Windows) == 0 {
		cfg.Windows = []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour}
	}
	for _, w := range cfg.Windows {
		if w <= 0 {
			return nil, fmt.Errorf("calibrate: window %v: must be positive", w)
		}
	}
	if cfg.Name == "" {
		cfg.Name = "calibrated"
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = max(time.Minute, cfg.Period)
	}
	if cfg.RateWindow < cfg.Period {
		return nil, fmt.Errorf("calibrate: rate window %v: must not be shorter than the period, %v", cfg.RateWindow, cfg.Period)
	}
	bucket := cfg.Algorithm.IsBucket()
	// Pass 1: peaks (and, for the window kinds, the needs). The bucket
	// kinds also track the peak at the period, for the rate.
	wins := make([]int64, 0, len(cfg.Windows)+1)
	for _, w := range cfg.Windows {
		wins = append(wins, int64(w))
	}
	wins = append(wins, int64(cfg.Period), int64(cfg.RateWindow))
	d1 := &demand{cfg: &cfg, alg: cfg.Algorithm, period: int64(cfg.Period), wins: wins, keys: map[string]*keyState{}}
	if bucket {
		d1.alg = "" // needs come in pass 2
	}
	if err := d1.pass(ctx, src); err != nil {
		return nil, err
	}
	rep := d1.rep
	if rep.Requests == 0 {
		return nil, errors.New("calibrate: the traffic has no requests")
	}
	rep.Keys = len(d1.keys)
	rep.Keep = cfg.Keep
	rep.MustKeep = mustKeep(cfg.Keep, rep.Keys)
	nw := len(cfg.Windows)
	peaks := make([][]int64, len(wins))
	for _, k := range d1.keys {
		for i := range wins {
			peaks[i] = append(peaks[i], d1.windows[k.windowOff+i].peak)
		}
	}
	for i := 0; i < nw; i++ {
		rep.Peaks = append(rep.Peaks, distribution(peaks[i], cfg.Windows[i]))
	}
	p := sluice.Policy{Name: cfg.Name, Algorithm: cfg.Algorithm, Period: cfg.Period}
	needs := make([]int64, 0, rep.Keys)
	if bucket {
		rep.RateWindow = cfg.RateWindow
		p.Limit = cfg.Limit
		if p.Limit <= 0 {
			rep.RateUnits = kth(peaks[nw+1], rep.MustKeep)
			p.Limit = rateFor(rep.RateUnits, cfg.Period, cfg.RateWindow)
		}
		b, err := bursts(ctx, src, &cfg, p.Limit)
		if err != nil {
			return nil, err
		}
		needs = b
		p.Burst = max(1, kth(needs, rep.MustKeep))
		rep.Need = distribution(needs, 0)
		rep.Burst = rep.Need
	} else {
		for _, k := range d1.keys {
			needs = append(needs, k.need)
		}
		p.Limit = max(1, kth(needs, rep.MustKeep))
		rep.Need = distribution(needs, 0)
		// A limit sluice cannot hold is the error to report, not the
		// burst column's backlog at that rate.
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("calibrate: the traffic needs a policy sluice cannot hold: %w", err)
		}
		b, err := bursts(ctx, src, &cfg, p.Limit)
		if err != nil {
			return nil, err
		}
		rep.Burst = distribution(b, 0)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("calibrate: the traffic needs a policy sluice cannot hold: %w", err)
	}
	rep.Policy = p
	out, err := Replay(ctx, src, p)
	if err != nil {
		return nil, err
	}
	rep.Replay = out
	if kept := int64(rep.Keys - out.KeysRefused); kept < rep.MustKeep {
		return nil, fmt.Errorf("calibrate: internal error: the recommendation %v refused %d of %d keys, more than the %d allowed", p, out.KeysRefused, rep.Keys, int64(rep.Keys)-rep.MustKeep)
	}
	return &rep, nil
}

// bursts returns every key's burst at the rate limit per cfg.Period: the
// token-bucket burst under which none of its requests would be refused.
func bursts(ctx context.Context, src Source, cfg *Config, limit int64) ([]int64, error) {
	g := gcd(int64(cfg.Period), limit)
	d := &demand{cfg: cfg, alg: sluice.TokenBucket, period: int64(cfg.Period), num: uint64(int64(cfg.Period) / g), den: uint64(limit / g), keys: map[string]*keyState{}}
	if err := d.pass(ctx, src); err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(d.keys))
	for _, k := range d.keys {
		out = append(out, k.need)
	}
	return out, nil
}

// rateFor returns the limit per period that sustains units per window:
// ⌈units·period/window⌉, at least 1.
func rateFor(units int64, period, window time.Duration) int64 {
	hi, lo := bits.Mul64(uint64(units), uint64(period))
	q, r := bits.Div64(hi%uint64(window), lo, uint64(window))
	if hi >= uint64(window) {
		return math.MaxInt64
	}
	if r != 0 {
		q++
	}
	return max(1, int64(min(q, math.MaxInt64)))
}

// resolutions are the candidates for Report.Resolution, coarsest first.
var resolutions = []int64{int64(time.Hour), int64(time.Minute), int64(time.Second),
	1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 100, 10, 1}

// mustKeep returns ⌈keep·keys/10⁹⌉, at least 1.
func mustKeep(keep int64, keys int) int64 {
	hi, lo := bits.Mul64(uint64(keep), uint64(keys))
	lo, c := bits.Add64(lo, Billion-1, 0)
	hi += c
	q, _ := bits.Div64(hi, lo, Billion)
	return max(1, int64(q))
}

// kth returns the k-th smallest of v (1-based), reordering v.
func kth(v []int64, k int64) int64 {
	slices.Sort(v)
	return v[min(int(k), len(v))-1]
}

func distribution(v []int64, w time.Duration) Distribution {
	d := Distribution{Window: w}
	for _, q := range Quantiles {
		d.At = append(d.At, kth(v, mustKeep(q, len(v))))
	}
	return d
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pass reads the whole traffic once.
func (d *demand) pass(ctx context.Context, src Source) error {
	r, c, err := src()
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	defer c.Close()
	d.rep = Report{}
	defer func() {
		// A reader that knows its times' resolution (a text log's
		// $time_local is whole seconds, whatever $request_time adds).
		if rr, ok := r.(interface{ Resolution() time.Duration }); ok && d.rep.Resolution > 0 {
			d.rep.Resolution = max(d.rep.Resolution, rr.Resolution())
		}
	}()
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("calibrate: %w", err)
			}
		}
		q, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		if err := d.add(q); err != nil {
			return fmt.Errorf("calibrate: line %d: %w", q.Line, err)
		}
	}
}

func (d *demand) add(q Request) error {
	if d.rep.Requests == 0 {
		d.rep.First = q.At
	}
	for d.res < len(resolutions)-1 && q.At%resolutions[d.res] != 0 {
		d.res++
	}
	if q.At != d.rep.First {
		d.rep.Resolution = time.Duration(resolutions[d.res])
	}
	d.rep.Last = q.At
	// Every per-key sum below is at most the total, so this bounds them
	// all.
	if q.Cost > math.MaxInt64-d.rep.Units {
		return fmt.Errorf("the traffic's total cost passes %d units, the most calibrate counts", int64(math.MaxInt64))
	}
	d.rep.Requests++
	d.rep.Units += q.Cost
	k := d.keys[q.Key]
	if k == nil {
		k = &keyState{windowOff: len(d.windows), last: q.At}
		for range d.wins {
			d.windows = append(d.windows, window{idx: -1})
		}
		d.keys[q.Key] = k
	}
	for i, w := range d.wins {
		ws := &d.windows[k.windowOff+i]
		if idx := q.At / w; idx != ws.idx {
			ws.idx, ws.count = idx, 0
		}
		ws.count += q.Cost
		ws.peak = max(ws.peak, ws.count)
	}
	// A request of cost 0 is a peek: it takes nothing, but it is admitted
	// only if one unit would be (as the models judge it), so it needs room
	// for one unit.
	judged := max(q.Cost, 1)
	switch d.alg {
	case sluice.FixedWindow:
		// The period's count before the request, plus what it is judged at.
		k.need = max(k.need, d.windows[k.windowOff+len(d.wins)-2].count-q.Cost+judged)
	case sluice.SlidingLog:
		for k.logHead < len(k.log) && k.log[k.logHead].at <= q.At-d.period {
			k.logSum -= k.log[k.logHead].cost
			k.logHead++
		}
		if k.logHead > 32 && k.logHead*2 > len(k.log) {
			k.log = append(k.log[:0], k.log[k.logHead:]...)
			k.logHead = 0
		}
		k.need = max(k.need, k.logSum+judged)
		if q.Cost > 0 {
			k.log = append(k.log, logEntry{q.At, q.Cost})
			k.logSum += q.Cost
		}
	case sluice.SlidingWindow:
		p := d.period
		start := q.At / p * p
		switch k.start {
		case start:
		case start - p:
			k.prev, k.cur = k.cur, 0
		default:
			k.prev, k.cur = 0, 0
		}
		k.start = start
		hi, lo := bits.Mul64(uint64(k.prev), uint64(p-(q.At-start)))
		w, r := bits.Div64(hi, lo, uint64(p))
		if r != 0 {
			w++
		}
		k.need = max(k.need, int64(w)+k.cur+judged)
		k.cur += q.Cost
	case sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket:
		gap := uint64(q.At - k.last)
		k.last = q.At
		if gap >= (k.debt+d.den-1)/d.den {
			k.debt = 0
		} else {
			k.debt -= gap * d.den
		}
		hi, add := bits.Mul64(uint64(judged), d.num)
		sum, carry := bits.Add64(k.debt, add, 0)
		if hi != 0 || carry != 0 || sum > math.MaxInt64 {
			return d.backlogError(q.Key)
		}
		k.need = max(k.need, int64((sum+d.num-1)/d.num))
		if q.Cost > 0 {
			k.debt = sum
		}
	}
	return nil
}

// backlogError says that a key's token-bucket backlog at the rate d
// computes bursts at passed what sluice can hold.
func (d *demand) backlogError(key string) error {
	// The rate is den·period/num, exactly: num/den is period/limit in
	// lowest terms, so the quotient is the limit and fits.
	hi, lo := bits.Mul64(d.den, uint64(d.period))
	rate, _ := bits.Div64(hi, lo, d.num)
	if d.cfg.Algorithm.IsBucket() {
		return fmt.Errorf("key %q: its backlog at rate %d/%v exceeds what sluice can hold", key, rate, time.Duration(d.period))
	}
	// A window kind has no backlog: this is the report's burst column.
	return fmt.Errorf("key %q: the token-bucket burst it would need at the limit's rate, %d per %v (the report's burst column), exceeds what sluice can hold", key, rate, time.Duration(d.period))
}

// Replay takes every request of the traffic from a memstore running policy
// p on the traffic's clock, and counts the refusals.
func Replay(ctx context.Context, src Source, p sluice.Policy) (Outcome, error) {
	var out Outcome
	r, c, err := src()
	if err != nil {
		return out, fmt.Errorf("calibrate: %w", err)
	}
	defer c.Close()
	clock := new(replay.Clock)
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer store.Close()
	refused := map[string]int64{}
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return out, fmt.Errorf("calibrate: %w", err)
			}
			store.Sweep()
		}
		q, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, fmt.Errorf("calibrate: %w", err)
		}
		clock.Set(time.Unix(0, q.At))
		dec, err := store.Take(ctx, p, q.Key, q.Cost)
		if err != nil {
			return out, fmt.Errorf("calibrate: line %d: replay: %w", q.Line, err)
		}
		if !dec.Allowed {
			out.Refused++
			out.RefusedUnits += q.Cost
			refused[q.Key]++
		}
	}
	out.KeysRefused = len(refused)
	for k, n := range refused {
		out.Top = append(out.Top, KeyCount{k, n})
	}
	sort.Slice(out.Top, func(i, j int) bool {
		a, b := out.Top[i], out.Top[j]
		return a.Count > b.Count || a.Count == b.Count && a.Key < b.Key
	})
	if len(out.Top) > 10 {
		out.Top = out.Top[:10]
	}
	return out, nil
}
