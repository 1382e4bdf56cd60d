// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestAppendSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{1, "0.000000001"},
		{100 * time.Millisecond, "0.1"},
		{1300 * time.Millisecond, "1.3"},
		{333333334, "0.333333334"},
		{time.Second, "1"},
		{1050 * time.Millisecond, "1.05"},
		{10 * time.Second, "10"},
		{time.Minute, "60"},
		{59*time.Second + 999999999, "59.999999999"},
		{-1500 * time.Millisecond, "-1.5"},
		{-1, "-0.000000001"},
		{math.MaxInt64, "9223372036.854775807"},
		{math.MinInt64, "-9223372036.854775808"},
	} {
		if got := string(AppendSeconds([]byte("x"), tt.d)); got != "x"+tt.want {
			t.Errorf("AppendSeconds(%d) = %q, want %q", int64(tt.d), got[1:], tt.want)
		}
	}
}

func TestParseSeconds(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0.1", 100 * time.Millisecond},
		{"0.100000000", 100 * time.Millisecond},
		{"0.1000000000000", 100 * time.Millisecond}, // extra zeros are exact
		{"59", 59 * time.Second},
		{"60.000000001", time.Minute + 1},
		{"0.333333334", 333333334},
		{".5", 500 * time.Millisecond},
		{"5.", 5 * time.Second},
		{"007", 7 * time.Second},
		{"00000000000000000000000001.5", 1500 * time.Millisecond},
		{"4611686018.427387904", MaxOffset},
	} {
		got, err := ParseSeconds(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSeconds(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSecondsErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "not a decimal number"},
		{".", "not a decimal number"},
		{"-1", "negative"},
		{"-0", "negative"},
		{"+1", "not a decimal number"},
		{"1e3", "not a decimal number"},
		{"1.2.3", "not a decimal number"},
		{"0x10", "not a decimal number"},
		{"1_000", "not a decimal number"},
		{" 1", "not a decimal number"},
		{"1,5", "not a decimal number"},
		{"\u0661", "not a decimal number"}, // ARABIC-INDIC DIGIT ONE
		{"0.0000000001", "more than 9 digits"},
		{"1.0000000000001", "more than 9 digits"},
		{"4611686018.427387905", "latest supported offset"},
		{"4611686019", "latest supported offset"},
		{"99999999999999999999999", "latest supported offset"},
		{"NaN", "not a decimal number"},
		{"Inf", "not a decimal number"},
	} {
		got, err := ParseSeconds(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSeconds(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseCost(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "0", want: 0},
		{in: "1", want: 1},
		{in: "6000", want: 6000},
		{in: "9223372036854775807", want: math.MaxInt64},
		{in: "9223372036854775808", err: "too large"},
		{in: "-1", err: "negative"},
		{in: "+1", err: "not a non-negative integer"},
		{in: "1.5", err: "not a non-negative integer"},
		{in: "x", err: "not a non-negative integer"},
	} {
		got, err := parseCost([]byte(tt.in))
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseCost(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseCost(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.err)
		}
	}
}

func TestQuoteShortensLongValues(t *testing.T) {
	long := strings.Repeat("9", 1000) + "\n"
	_, err := ParseSeconds(long)
	if err == nil {
		t.Fatal("ParseSeconds accepted a malformed time")
	}
	if msg := err.Error(); len(msg) > 200 || strings.Contains(msg, "\n") {
		t.Errorf("error message is not one short line: %q", msg)
	}
}
