// SPDX-License-Identifier: Apache-2.0

package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
)

// Config says what to replay a trace through.
type Config struct {
	// Policy is the policy every request is limited by.
	Policy sluice.Policy
	// Store applies the policy. Its clock must be the one SetTime moves.
	Store sluice.Store
	// SetTime moves the store's clock to a request's instant before the
	// request is taken: time.Unix(0, at) for a request at offset at, so the
	// trace starts at the Unix epoch, a window boundary for every period.
	// Typically the Set method of a Clock given to the store. If nil, the
	// store keeps its own clock.
	SetTime func(time.Time)
}

// Run reads a trace from in (see Reader for the format), takes each request
// from cfg.Store at its instant, and writes one JSON object per request to
// out, in order, one per line:
//
//	{"t":0.1,"key":"rider","cost":1,"allowed":true,"limit":5,"remaining":3,"reset_after":1.3}
//
// t is the request's offset in seconds; durations are in seconds, written
// exactly (AppendSeconds). A rejected request carries "retry_after" if
// waiting can admit it, and "impossible":true instead if its cost exceeds the
// policy's capacity (sluice.Decision.Impossible). An admitted leaky-bucket
// request carries its "delay". Bytes of a key that are not valid UTF-8 are
// written as U+FFFD, as encoding/json does, so such a key also carries
// "key_quoted": the key as a Go string literal (strconv.Quote), in which each
// such byte is a \x escape, so that different keys look different:
//
//	{"t":0,"key":"a\ufffd","key_quoted":"\"a\\xff\"","cost":1,...}
//
// Output is buffered and flushed before Run returns, also on error, so the
// decisions for the lines before a bad one are written. A problem with the
// trace, or a store failure, is a *LineError naming the line. Run checks ctx
// between requests and passes it to the store.
func Run(ctx context.Context, cfg Config, in io.Reader, out io.Writer) (err error) {
	if err := cfg.Policy.Validate(); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if cfg.Store == nil {
		return errors.New("replay: no store")
	}
	w := bufio.NewWriterSize(out, 64<<10)
	defer func() {
		if ferr := w.Flush(); ferr != nil && err == nil {
			err = fmt.Errorf("replay: write output: %w", ferr)
		}
	}()
	leaky := cfg.Policy.Algorithm == sluice.LeakyBucket
	r := NewReader(in)
	buf := make([]byte, 0, 256)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("replay: %w", err)
			}
		}
		req, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if cfg.SetTime != nil {
			cfg.SetTime(time.Unix(0, int64(req.At)))
		}
		d, err := cfg.Store.Take(ctx, cfg.Policy, req.Key, req.Cost)
		if err != nil {
			return &LineError{Line: req.Line, Err: fmt.Errorf("take %s: %w", quote(req.Key), err)}
		}
		buf = appendRecord(buf[:0], req, d, leaky)
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("replay: write output: %w", err)
		}
	}
}

// appendRecord appends the JSON line for one decision, fields in the order
// of sluice.Decision.
func appendRecord(b []byte, req Request, d sluice.Decision, leaky bool) []byte {
	b = append(b, `{"t":`...)
	b = AppendSeconds(b, req.At)
	b = append(b, `,"key":`...)
	b = appendString(b, req.Key)
	if !utf8.ValidString(req.Key) {
		b = append(b, `,"key_quoted":`...)
		b = appendString(b, strconv.Quote(req.Key))
	}
	b = append(b, `,"cost":`...)
	b = strconv.AppendInt(b, req.Cost, 10)
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	if d.Impossible {
		b = append(b, `,"impossible":true`...)
	}
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, d.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	if !d.Allowed && !d.Impossible {
		b = append(b, `,"retry_after":`...)
		b = AppendSeconds(b, d.RetryAfter)
	}
	b = append(b, `,"reset_after":`...)
	b = AppendSeconds(b, d.ResetAfter)
	if leaky && d.Allowed {
		b = append(b, `,"delay":`...)
		b = AppendSeconds(b, d.Delay)
	}
	return append(b, "}\n"...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Like encoding/json it escapes
// quotes, backslashes, control characters, U+2028 and U+2029, and writes each
// byte of invalid UTF-8 as U+FFFD; unlike it, it leaves <, > and & alone.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0 // s[start:i] is pending, needing no escape
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Clock is a virtual clock for replays: it reads the time it was last Set
// to, the Unix epoch at first. Give it to the store and its Set method to
// Config.SetTime. It is safe for concurrent use.
type Clock struct {
	ns atomic.Int64
}

// Now returns the time the clock was last set to.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

var _ clock.Clock = (*Clock)(nil)
