// SPDX-License-Identifier: Apache-2.0

package calibrate

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay"
)

// WriteText writes the report for people: the demand distributions, the
// recommendation and what it would have refused.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	span := time.Duration(r.Last - r.First)
	fmt.Fprintf(&b, "traffic: %d requests (%d units) from %d keys over %ss\n\n", r.Requests, r.Units, r.Keys, replay.AppendSeconds(nil, span))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "\t"
	for _, q := range Quantiles {
		head += quantileName(q) + "\t"
	}
	b.WriteString("peak units per key in one aligned window (quantiles over keys):\n")
	fmt.Fprintln(tw, "window"+head)
	for _, d := range r.Peaks {
		row := d.Window.String() + "\t"
		for _, v := range d.At {
			row += strconv.FormatInt(v, 10) + "\t"
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	p := r.Policy
	need := "limit"
	if p.Algorithm.IsBucket() {
		need = fmt.Sprintf("burst at %d per %v", p.Limit, p.Period)
	}
	fmt.Fprintf(&b, "\nneed per key under %s (%s; quantiles over keys):\n", p.Algorithm, need)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "need"+head)
	row := "units\t"
	for _, v := range r.Need.At {
		row += strconv.FormatInt(v, 10) + "\t"
	}
	fmt.Fprintln(tw, row)
	tw.Flush()
	if !p.Algorithm.IsBucket() {
		fmt.Fprintf(&b, "\nburst per key (the token-bucket burst it needs at %d per %v; quantiles over keys):\n", p.Limit, p.Period)
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "burst"+head)
		row := "units\t"
		for _, v := range r.Burst.At {
			row += strconv.FormatInt(v, 10) + "\t"
		}
		fmt.Fprintln(tw, row)
		tw.Flush()
	}
	fmt.Fprintf(&b, "\nrecommendation (at least %s of keys, %d of %d, never refused):\n  %s\n", percent(r.Keep), r.MustKeep, r.Keys, describe(p))
	if p.Algorithm.IsBucket() {
		if r.RateUnits > 0 {
			fmt.Fprintf(&b, "  rate %d per %v: what %d of %d keys need over their busiest %v (at most %d units), rounded up\n", p.Limit, p.Period, r.MustKeep, r.Keys, r.RateWindow, r.RateUnits)
		} else {
			fmt.Fprintf(&b, "  rate %d per %v: as --limit set it\n", p.Limit, p.Period)
		}
		fmt.Fprintf(&b, "  burst %d: the most those keys sent at once above that rate\n", p.Burst)
	}
	for _, n := range r.Notes() {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	o := r.Replay
	fmt.Fprintf(&b, "\nreplayed through it: %d of %d requests refused (%d units); %d of %d keys refused at least once\n", o.Refused, r.Requests, o.RefusedUnits, o.KeysRefused, r.Keys)
	for _, k := range o.Top {
		fmt.Fprintf(&b, "  %q: %d refused\n", k.Key, k.Count)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Notes are what a reader of the recommendation should know: what the
// share of keys means when keys are few, and timestamps too coarse for
// the period.
func (r *Report) Notes() []string {
	var notes []string
	if spare := int64(r.Keys) - r.MustKeep; spare == 0 && r.Keep < Billion && r.Keys >= 2 {
		notes = append(notes, fmt.Sprintf("with %d keys, keeping %s of them means keeping every key: the recommendation fits the busiest one; to leave the busiest n keys limited, use --keep (K-n)/K (%s leaves the busiest one limited)", r.Keys, percent(r.Keep), keepFor(r.Keys)))
	} else if spare > 0 {
		notes = append(notes, fmt.Sprintf("--keep %s of %d keys: the %d busiest keys may be refused", percent(r.Keep), r.Keys, spare))
	}
	if r.Resolution > 0 && r.Resolution >= r.Policy.Period {
		notes = append(notes, fmt.Sprintf("the times are in whole multiples of %v, not finer than the %v period: requests within one %v look simultaneous, so the needs and bursts above are overstated (log finer times, e.g. nginx $msec, or calibrate a longer period)", r.Resolution, r.Policy.Period, r.Resolution))
	}
	return notes
}

// keepFor returns a --keep share that keeps exactly k−1 of k keys (k ≥ 2),
// the roundest there is: the fewest decimals of a percentage that lie in
// ((k−2)/k, (k−1)/k].
func keepFor(k int) string {
	hi := int64(k-1) * Billion / int64(k) // ⌊(k−1)/k⌋ in ppb
	for step := int64(10_000_000); step >= 1; step /= 10 {
		if v := hi / step * step; v*int64(k) > int64(k-2)*Billion {
			return percent(v)
		}
	}
	return percent(hi)
}

func describe(p sluice.Policy) string {
	s := fmt.Sprintf("algorithm %s, limit %d, period %v", p.Algorithm, p.Limit, p.Period)
	if p.Algorithm.IsBucket() {
		s += fmt.Sprintf(", burst %d", p.Burst)
	}
	return s
}

func quantileName(q int64) string {
	if q == Billion {
		return "max"
	}
	return "p" + strings.TrimSuffix(percent(q), "%")
}

// percent formats parts per billion as a percentage: 999000000 is "99.9%".
func percent(ppb int64) string {
	s := string(replay.AppendSeconds(nil, time.Duration(ppb*100)))
	return s + "%"
}

// ParseShare parses a share of keys: a percentage ("99.9%") or a fraction
// ("0.999"), exactly, in parts per billion. It must be in (0, 100 %].
func ParseShare(s string) (int64, error) {
	pct := strings.HasSuffix(s, "%")
	d, err := replay.ParseSeconds(strings.TrimSuffix(s, "%"))
	if err != nil {
		return 0, fmt.Errorf("share %q: want a percentage such as 99.9%% or a fraction such as 0.999", s)
	}
	v := int64(d)
	if pct {
		if v%100 != 0 {
			return 0, fmt.Errorf("share %q: at most 7 decimals in a percentage", s)
		}
		v /= 100
	}
	if !pct && v > Billion {
		if v <= 100*Billion { // the same digits as a percentage would do
			return 0, fmt.Errorf("share %q: a bare number is a fraction of the keys (0.999 is 99.9%%), at most 1; for %s percent write %s%%", s, s, s)
		}
		return 0, fmt.Errorf("share %q: a bare number is a fraction of the keys (0.999 is 99.9%%): must be more than 0 and at most 1", s)
	}
	if v <= 0 || v > Billion {
		return 0, fmt.Errorf("share %q: must be more than 0 and at most 100%%", s)
	}
	return v, nil
}

// Rule says where a recommended policy goes in a sluice serve
// configuration.
type Rule struct {
	Domain string // the file's domain
	Key    string // the descriptor key the limit applies to, per value
	Shadow bool   // write shadow_mode: true, to dark-launch it
}

// WriteYAML writes p as a sluice serve configuration file: one domain with
// one descriptor key whose every value gets the limit.
func WriteYAML(w io.Writer, p sluice.Policy, r Rule) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Calibrated by sluice calibrate: %s.\n", describe(p))
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n  - key: %s\n", strconv.Quote(r.Domain), strconv.Quote(r.Key))
	if r.Shadow {
		b.WriteString("    shadow_mode: true\n")
	}
	b.WriteString("    rate_limit:\n")
	if p.Name != "" {
		fmt.Fprintf(&b, "      name: %s\n", strconv.Quote(p.Name))
	}
	fmt.Fprintf(&b, "      period: %s\n      requests_per_unit: %d\n      algorithm: %s\n", p.Period, p.Limit, p.Algorithm)
	if p.Algorithm.IsBucket() {
		fmt.Fprintf(&b, "      burst: %d\n", p.Burst)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
