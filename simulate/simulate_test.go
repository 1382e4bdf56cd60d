// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // times in ms, cost after x when not 1
	}{
		{"burst 6 at 0, then 1 every 100ms for 0.3", "0 0 0 0 0 0 100 200 300"},
		{"burst 2, wait 1s, burst 1 cost 3", "0 0 1000x3"},
		{"2 every 0.5 times 2; burst 1 at 5s", "500 500 1000 1000 5000"},
		{"then burst 1 at 1.5", "1500"},
	} {
		reqs, err := ParsePattern(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		var got []string
		for _, r := range reqs {
			v := strconv.FormatInt(r.At.Milliseconds(), 10)
			if r.Cost != 1 {
				v += "x" + strconv.FormatInt(r.Cost, 10)
			}
			got = append(got, v)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%q: got %s, want %s", tc.in, g, tc.want)
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "empty",
		"burst x":                    `clause 1 "burst x": "x": want a whole number`,
		"burst 2 at 1, burst 1 at 0": `clause 2 "burst 1 at 0": at 0 is before the end of the previous clause, 1s`,
		"1 every 0s for 1s":          "every 0s: must be positive",
		"1 every 1ms for 1000s":      "more than 100000 requests",
		"jump 3":                     `clause 1 "jump 3": want "burst N [at TIME]"`,
		"burst 1 cost -1":            `cost "-1"`,
		"wait 1s":                    "makes no requests",
		"burst 1 at soon":            `time "soon": want seconds`,
	} {
		_, err := ParsePattern(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePattern(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// svgDoc is the part of the picture the tests read.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Rects   []struct {
		Class string `xml:"class,attr"`
		T     string `xml:"data-t,attr"`
	} `xml:"rect"`
	Paths []struct {
		Class string `xml:"class,attr"`
		D     string `xml:"d,attr"`
	} `xml:"path"`
}

func decodeSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	if err := d.Decode(&doc); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v", err)
	}
	// The whole document must decode token by token too.
	d = xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("SVG token: %v", err)
		}
	}
	return doc
}

// TestSVGMarksMatchDecisions draws the same burst through every algorithm
// and checks that each request has one mark whose class is its decision.
func TestSVGMarksMatchDecisions(t *testing.T) {
	reqs, err := ParsePattern("burst 12 at 0, then 1 every 100ms for 2s, burst 8 at 2.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range sluice.Algorithms() {
		p := sluice.Policy{Algorithm: alg, Limit: 5, Period: time.Second}
		if alg.IsBucket() {
			p.Burst = 10
		}
		r, err := Run(context.Background(), p, reqs)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := r.WriteSVG(&buf, "test <&> "+string(alg)); err != nil {
			t.Fatal(err)
		}
		doc := decodeSVG(t, buf.Bytes())
		var marks []string
		for _, rc := range doc.Rects {
			if c, ok := strings.CutPrefix(rc.Class, "req "); ok {
				marks = append(marks, c)
			}
		}
		if len(marks) != len(r.Steps) {
			t.Fatalf("%s: %d marks for %d requests", alg, len(marks), len(r.Steps))
		}
		counts := map[string]int{}
		for i, s := range r.Steps {
			want := ClassAdmitted
			switch {
			case !s.Decision.Allowed:
				want = ClassRefused
			case s.Decision.Delay > 0:
				want = ClassDelayed
			}
			if marks[i] != want {
				t.Errorf("%s: request %d at %v: mark %q, want %q", alg, i, s.At, marks[i], want)
			}
			counts[want]++
		}
		// The decisions are the model's: token bucket admits the 10 of the
		// burst then refills 5/s; fixed window admits 5 per aligned second.
		switch alg {
		case sluice.TokenBucket, sluice.GCRA:
			if counts[ClassRefused] == 0 || counts[ClassAdmitted] < 10 {
				t.Errorf("%s: counts %v", alg, counts)
			}
		case sluice.LeakyBucket:
			if counts[ClassDelayed] == 0 {
				t.Errorf("%s: no delayed requests: %v", alg, counts)
			}
		case sluice.FixedWindow:
			// [0,1s): 12+9 ticks (0.1..0.9) → 5 admitted; [1s,2s): 10 ticks
			// (1.0..1.9) → 5; [2s,3s): 2.0 and 8 at 2.5 → 5.
			if counts[ClassAdmitted] != 15 {
				t.Errorf("%s: admitted %d, want 15", alg, counts[ClassAdmitted])
			}
		}
		if len(doc.Paths) != 1 || doc.Paths[0].Class != "state" || !strings.HasPrefix(doc.Paths[0].D, "M") {
			t.Errorf("%s: want one state path, got %+v", alg, doc.Paths)
		}
	}
}

func TestStateLevels(t *testing.T) {
	reqs := []Request{{0, "k", 4}, {time.Second, "k", 1}}
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second, Burst: 5}
	r, err := Run(context.Background(), p, reqs)
	if err != nil {
		t.Fatal(err)
	}
	// After 4 of 5 tokens at 0: 1 left; at 1s two refilled, one taken: 2.
	var at0, at1 int64 = -1, -1
	for _, s := range r.Samples {
		switch s.At {
		case 0:
			at0 = s.Level
		case time.Second:
			at1 = s.Level
		}
	}
	if at0 != 1 || at1 != 2 {
		t.Errorf("levels at 0 and 1s = %d, %d; want 1, 2", at0, at1)
	}
	last := r.Samples[len(r.Samples)-1]
	if last.At != r.End || last.Level != 5 {
		t.Errorf("last sample %+v, want the full bucket (5) at the end %v", last, r.End)
	}
}

// TestSVGWellFormedForAnyText: keys, the title and the description may hold
// any bytes; the picture is still well-formed XML 1.0, with invalid UTF-8
// and the characters XML does not allow drawn as U+FFFD.
func TestSVGWellFormedForAnyText(t *testing.T) {
	odd := []string{"k\x01x", "\xff", "a\x00b", "\x1b[31m", "\xed\xa0\x80", "\uFFFE", "\uFFFF", "t\tab", "<&'\">", "ok\uFFFD"}
	reqs := make([]Request, len(odd))
	for i, k := range odd {
		reqs[i] = Request{At: time.Duration(i) * time.Second, Key: k, Cost: 1}
	}
	r, err := Run(context.Background(), sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 5}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	r.Desc = "sluice simulate --title 'a\x01b\xfe'"
	var buf bytes.Buffer
	if err := r.WriteSVG(&buf, "a\x01b\xff\x00"); err != nil {
		t.Fatal(err)
	}
	decodeSVG(t, buf.Bytes())
	for _, want := range []string{"a\uFFFDb\uFFFD\uFFFD", "k\uFFFDx", "t\tab", "ok\uFFFD", "&lt;&amp;&#39;&#34;&gt;"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("picture lacks %q", want)
		}
	}
}

// TestPatternTimeSaysWhyItIsRefused checks that a time written as seconds
// but refused for its range or precision says so, as sluice replay does,
// rather than that it is not seconds.
func TestPatternTimeSaysWhyItIsRefused(t *testing.T) {
	for in, want := range map[string]string{
		"burst 1 at 9223372036":   `clause 1 "burst 1 at 9223372036": time "9223372036": later than the latest supported offset, 4611686018.427387904 seconds`,
		"burst 1 at 4611686019":   `time "4611686019": later than the latest supported offset`,
		"burst 1 at 0.0000000001": `time "0.0000000001": more than 9 digits after the decimal point`,
		"burst 1 at 1.5.2":        `time "1.5.2": want seconds (1.5) or a duration (100ms, 2s)`,
		"burst 1 at 2h":           "", // a duration still parses
	} {
		_, err := ParsePattern(in)
		if want == "" {
			if err != nil {
				t.Errorf("ParsePattern(%q) = %v", in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePattern(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}
