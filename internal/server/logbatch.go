// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// logBatch keeps a repeated warning to one line a second without losing
// what it is about. Each occurrence names what it concerns (the rules a
// store failure touched, the domain of a request no rule matched), and a
// line lists every name of its second with its count, the names in the
// order they came.
//
// The first occurrence is logged at once. Those within a second of a line
// are gathered, and logged together when the second is up, by a timer: a
// name that comes after a line is logged even if nothing comes after it.
// A line lists at most logBatchNames names; it counts the occurrences of
// the others ("and N more"), so what a batch holds is bounded, whatever
// the names.
type logBatch struct {
	// emit logs a line; it is called without mu held, at most once a
	// second. Set it before the first add.
	emit func(line *batchLine)

	mu        sync.Mutex
	last      time.Time // when the last line was logged; zero: never
	scheduled bool      // a timer will log what is gathered
	line      batchLine // gathered since the last line
}

// logBatchNames bounds the names one line lists.
const logBatchNames = 8

// batchLine is what one line says.
type batchLine struct {
	names []batchName // at most logBatchNames, in the order they came
	// others counts the occurrences of names past the first
	// logBatchNames.
	others int64
	// total counts the occurrences (add's calls): a request counts once,
	// however many names it has.
	total int64
}

// batchName is one name of a line: its occurrences, and the detail of the
// last one.
type batchName struct {
	name   string
	n      int64
	detail any
}

// batchNote is a name one occurrence concerns, with its detail.
type batchNote struct {
	name   string
	detail any
}

// add counts one occurrence that concerns names (each once: add them
// deduplicated), and logs a line if one is due.
func (b *logBatch) add(names ...batchNote) {
	now := time.Now()
	b.mu.Lock()
	b.line.total++
	for _, nm := range names {
		b.line.note(nm.name, nm.detail)
	}
	if wait := b.wait(now); wait > 0 {
		if !b.scheduled {
			b.scheduled = true
			time.AfterFunc(wait, b.flush)
		}
		b.mu.Unlock()
		return
	}
	line := b.take(now)
	b.mu.Unlock()
	b.emit(&line)
}

// flush logs what was gathered, once a second has passed since the last
// line (and waits again if a line went out since it was scheduled).
func (b *logBatch) flush() {
	now := time.Now()
	b.mu.Lock()
	b.scheduled = false
	if b.line.total == 0 {
		b.mu.Unlock()
		return
	}
	if wait := b.wait(now); wait > 0 {
		b.scheduled = true
		time.AfterFunc(wait, b.flush)
		b.mu.Unlock()
		return
	}
	line := b.take(now)
	b.mu.Unlock()
	b.emit(&line)
}

// wait is how long before a line may be logged at now (b.mu held).
func (b *logBatch) wait(now time.Time) time.Duration {
	if b.last.IsZero() {
		return 0
	}
	return b.last.Add(time.Second).Sub(now)
}

// take returns the line gathered and starts the next (b.mu held).
func (b *logBatch) take(now time.Time) batchLine {
	line := b.line
	b.line = batchLine{}
	b.last = now
	return line
}

// note counts one occurrence of name.
func (l *batchLine) note(name string, detail any) {
	for i := range l.names {
		if l.names[i].name == name {
			l.names[i].n++
			l.names[i].detail = detail
			return
		}
	}
	if len(l.names) == logBatchNames {
		l.others++
		return
	}
	l.names = append(l.names, batchName{name: name, n: 1, detail: detail})
}

// list writes the line's names as "name: n" (with each detail written by
// detail in parentheses, when detail is not nil), comma-separated, then
// "and N more <more>" for the others.
func (l *batchLine) list(detail func(any) string, more string) string {
	var b strings.Builder
	for i, nm := range l.names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(nm.name)
		b.WriteString(": ")
		b.WriteString(strconv.FormatInt(nm.n, 10))
		if detail != nil {
			if d := detail(nm.detail); d != "" {
				b.WriteString(" (")
				b.WriteString(d)
				b.WriteString(")")
			}
		}
	}
	if l.others > 0 {
		fmt.Fprintf(&b, ", and %d more %s", l.others, more)
	}
	return b.String()
}

// details lists the distinct details of the line's names, as detail writes
// them, "; "-separated, in the order of the names.
func (l *batchLine) details(detail func(any) string) string {
	var seen []string
	for _, nm := range l.names {
		if d := detail(nm.detail); d != "" && !slices.Contains(seen, d) {
			seen = append(seen, d)
		}
	}
	return strings.Join(seen, "; ")
}
