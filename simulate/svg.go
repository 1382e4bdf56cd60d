// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay"
)

// The picture's geometry, in SVG user units.
const (
	width       = 860
	left        = 70
	right       = 840
	reqTop      = 56
	reqBottom   = 196
	stateTop    = 236
	stateBottom = 346
	height      = 396
)

// Mark classes: every request is one rect with class "req" and one of these.
const (
	ClassAdmitted = "admitted"
	ClassDelayed  = "delayed"
	ClassRefused  = "refused"
)

// WriteSVG draws r: the requests (one mark each, stacked when they arrive
// together; green admitted, orange admitted with a delay and a line to its
// release, red refused) over the first key's state, from r.Start to r.End.
// For the aligned-window kinds (fixed-window, sliding-window) a dashed line
// marks each window boundary; a shaded band marks the densest period, the
// one window (t−P, t] with the most admitted cost (Densest), and a line
// under the title gives that cost beside the limit: a boundary attack on a
// fixed window shows as twice the limit within one period. title heads
// the picture. The SVG is self-contained (no external references).
func (r *Result) WriteSVG(w io.Writer, title string) error {
	var b strings.Builder
	p := r.Policy
	start, end := r.Start, r.End
	if end <= start {
		end = start + 1
	}
	x := func(t time.Duration) float64 {
		return left + float64(right-left)*float64(t-start)/float64(end-start)
	}
	inView := func(t time.Duration) bool { return t >= start && t <= end }
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	if r.Desc != "" {
		fmt.Fprintf(&b, "<desc>%s</desc>\n", descEscaper.Replace(xmlChars(r.Desc)))
	}
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	adm, del, ref := r.Counts()
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(xmlChars(title)))
	fmt.Fprintf(&b, `<text x="%d" y="38">%s: %d admitted, %d delayed, %d refused of %d requests</text>`+"\n", left, html.EscapeString(xmlChars(p.String())), adm, del, ref, len(r.Steps))
	units, dFrom, dTo := r.Densest()
	if units > 0 {
		fmt.Fprintf(&b, `<text class="densest" x="%d" y="52" text-anchor="end" fill="#6a1b9a">most admitted within one %v: %d (%ss to %ss), limit %d</text>`+"\n",
			right, p.Period, units, replay.AppendSeconds(nil, dFrom), replay.AppendSeconds(nil, dTo), p.Limit)
	}

	// Time axis and grid, shared by both panels.
	tick := niceTick(end - start)
	for t := (start + tick - 1) / tick * tick; t <= end; t += tick {
		xt := x(t)
		fmt.Fprintf(&b, `<line class="grid" stroke="#ddd" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, xt, reqTop, xt, stateBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#222">%ss</text>`+"\n", xt, stateBottom+16, replay.AppendSeconds(nil, t))
	}
	fmt.Fprintf(&b, `<line class="axis" stroke="#555" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", left, reqBottom, right, reqBottom)
	fmt.Fprintf(&b, `<line class="axis" stroke="#555" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", left, stateBottom, right, stateBottom)
	fmt.Fprintf(&b, `<text x="8" y="%d">requests</text>`+"\n", (reqTop+reqBottom)/2)

	// The densest period, shaded behind the requests.
	if units > 0 && dTo >= start && dFrom <= end {
		x0, x1 := x(max(dFrom, start)), x(min(dTo, end))
		fmt.Fprintf(&b, `<rect class="densest" fill="#6a1b9a" opacity="0.12" x="%.2f" y="%d" width="%.2f" height="%d"/>`+"\n", x0-4, reqTop, x1-x0+8, reqBottom-reqTop)
	}
	// Requests, stacked per instant.
	stack := 1
	shown := 0
	for i, n := 0, 0; i < len(r.Steps); i++ {
		if inView(r.Steps[i].At) {
			shown++
		}
		if i > 0 && r.Steps[i].At == r.Steps[i-1].At {
			n++
		} else {
			n = 1
		}
		stack = max(stack, n)
	}
	h := math.Min(10, float64(reqBottom-reqTop)/float64(stack))
	mw := math.Max(1.5, math.Min(6, float64(right-left)/float64(shown+1)))
	for i, n := 0, 0; i < len(r.Steps); i++ {
		s := r.Steps[i]
		if i > 0 && s.At == r.Steps[i-1].At {
			n++
		} else {
			n = 0
		}
		if !inView(s.At) {
			continue
		}
		class := ClassAdmitted
		switch {
		case !s.Decision.Allowed:
			class = ClassRefused
		case s.Decision.Delay > 0:
			class = ClassDelayed
		}
		y := float64(reqBottom) - float64(n+1)*h
		if class == ClassDelayed {
			fmt.Fprintf(&b, `<line class="release" stroke="#ef6c00" opacity="0.5" x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f"/>`, x(s.At), y+h/2, x(min(s.At+s.Decision.Delay, end)), y+h/2)
		}
		fmt.Fprintf(&b, `<rect class="req %s" fill="%s" x="%.2f" y="%.2f" width="%.2f" height="%.2f" data-t="%s" data-cost="%d"><title>%ss %s cost %d: %s</title></rect>`+"\n",
			class, legendColor[class], x(s.At)-mw/2, y, mw, math.Max(h*0.8, 0.5), replay.AppendSeconds(nil, s.At), s.Cost, replay.AppendSeconds(nil, s.At), html.EscapeString(xmlChars(s.Key)), s.Cost, class)
	}

	// Window boundaries, over the requests: where an aligned window's count starts again.
	if p.Algorithm == sluice.FixedWindow || p.Algorithm == sluice.SlidingWindow {
		first := (start + p.Period - 1) / p.Period * p.Period
		if n := (end - first) / p.Period; n <= 12 {
			for t := first; t <= end; t += p.Period {
				fmt.Fprintf(&b, `<line class="boundary" stroke="#c62828" stroke-dasharray="6 4" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><text class="boundary" x="%.1f" y="%d" fill="#c62828">window boundary (%ss)</text>`+"\n",
					x(t), reqTop, x(t), stateBottom, x(t)+4, stateTop-8, replay.AppendSeconds(nil, t))
			}
		}
	}

	// The state.
	capacity := Capacity(p)
	yl := func(v int64) float64 {
		return float64(stateBottom) - float64(stateBottom-stateTop)*float64(v)/float64(max(capacity, 1))
	}
	fmt.Fprintf(&b, `<text x="8" y="%d">%s</text>`+"\n", stateTop-8, html.EscapeString(xmlChars(StateName(p))))
	fmt.Fprintf(&b, `<line class="cap" stroke="#1565c0" stroke-dasharray="4 3" opacity="0.6" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/><text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n", left, yl(capacity), right, yl(capacity), left-4, yl(capacity)+4, capacity)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", left-4, stateBottom+4)
	if len(r.Samples) > 0 {
		b.WriteString(`<path class="state" fill="none" stroke="#1565c0" stroke-width="2" d="`)
		for i, s := range r.Samples {
			if i == 0 {
				fmt.Fprintf(&b, "M%.2f %.2f", x(s.At), yl(s.Level))
				continue
			}
			fmt.Fprintf(&b, " H%.2f V%.2f", x(s.At), yl(s.Level))
		}
		b.WriteString(`"/>` + "\n")
	}
	// Legend.
	lx := right - 300
	for i, c := range []string{ClassAdmitted, ClassDelayed, ClassRefused} {
		fmt.Fprintf(&b, `<rect class="legend %s" x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`, c, lx+i*100, height-22, legendColor[c], lx+i*100+14, height-13, c)
	}
	b.WriteString("\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// xmlChars returns s with every byte that is not valid UTF-8, and every
// character XML 1.0 does not allow in a document (the C0 controls other than
// tab, newline and carriage return; the surrogates; U+FFFE and U+FFFF),
// replaced by U+FFFD, so that escaping it gives well-formed XML.
func xmlChars(s string) string {
	ok := func(r rune) bool {
		return r == '\t' || r == '\n' || r == '\r' ||
			r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
	}
	clean := true
	for i, r := range s {
		if !ok(r) || r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if !ok(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

var descEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

var legendColor = map[string]string{ClassAdmitted: "#2e7d32", ClassDelayed: "#ef6c00", ClassRefused: "#c62828"}

// niceTick returns a grid step giving about 5 to 12 ticks over [0, end].
func niceTick(end time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
		if end/s <= 12 {
			return s
		}
	}
	return end / 10
}
