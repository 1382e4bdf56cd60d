// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// A minimal, strict parser of Structured Field Values lists (RFC 9651 §4.2)
// of items whose bare items are Integers, Strings, Tokens or Booleans, so
// the tests check the RateLimit headers against the grammar rather than
// against the strings the package happens to produce. Inner lists,
// decimals, byte sequences, dates and display strings are rejected: the
// headers never use them.

type sfItem struct {
	value  any // int64, string (String), sfToken, bool
	params []sfParam
}

type sfParam struct {
	key   string
	value any
}

type sfToken string

func (it sfItem) param(key string) (any, bool) {
	for _, p := range it.params {
		if p.key == key {
			return p.value, true
		}
	}
	return nil, false
}

// parseSFList parses the lines of one field as a List, combining lines
// with commas as §4.2 says.
func parseSFList(lines []string) ([]sfItem, error) {
	p := &sfParser{s: strings.Join(lines, ",")}
	p.skip(" ")
	var items []sfItem
	for !p.done() {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.skip(" \t")
		if p.done() {
			break
		}
		if p.s[p.i] != ',' {
			return nil, p.errorf("want ',' after a list member")
		}
		p.i++
		p.skip(" \t")
		if p.done() {
			return nil, p.errorf("trailing comma")
		}
	}
	return items, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) skip(set string) {
	for !p.done() && strings.IndexByte(set, p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *sfParser) errorf(format string, args ...any) error {
	return fmt.Errorf("sf: at %d of %q: %s", p.i, p.s, fmt.Sprintf(format, args...))
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{value: v}
	for !p.done() && p.s[p.i] == ';' {
		p.i++
		p.skip(" ")
		k, err := p.key()
		if err != nil {
			return sfItem{}, err
		}
		var val any = true
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			if val, err = p.bareItem(); err != nil {
				return sfItem{}, err
			}
		}
		for i := range it.params {
			if it.params[i].key == k { // a later value overwrites (§4.2.3.2)
				it.params = append(it.params[:i], it.params[i+1:]...)
				break
			}
		}
		it.params = append(it.params, sfParam{k, val})
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if p.done() || !(p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] == '*') {
		return "", p.errorf("a key starts with lcalpha or '*'")
	}
	for !p.done() {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0 {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bareItem() (any, error) {
	if p.done() {
		return nil, p.errorf("missing bare item")
	}
	c := p.s[p.i]
	switch {
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		if c == '-' {
			p.i++
		}
		digits := p.i
		for !p.done() && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if n := p.i - digits; n == 0 || n > 15 {
			return nil, p.errorf("an integer has 1 to 15 digits")
		}
		if !p.done() && p.s[p.i] == '.' {
			return nil, p.errorf("decimals are not expected")
		}
		return strconv.ParseInt(p.s[start:p.i], 10, 64)
	case c == '"':
		p.i++
		var b strings.Builder
		for {
			if p.done() {
				return nil, p.errorf("unterminated string")
			}
			c := p.s[p.i]
			p.i++
			switch {
			case c == '\\':
				if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
					return nil, p.errorf("bad escape")
				}
				b.WriteByte(p.s[p.i])
				p.i++
			case c == '"':
				return b.String(), nil
			case c < 0x20 || c > 0x7e:
				return nil, p.errorf("byte %#x in a string", c)
			default:
				b.WriteByte(c)
			}
		}
	case c == '?':
		if p.i+1 >= len(p.s) || (p.s[p.i+1] != '0' && p.s[p.i+1] != '1') {
			return nil, p.errorf("bad boolean")
		}
		p.i += 2
		return p.s[p.i-1] == '1', nil
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		start := p.i
		for !p.done() && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
			p.i++
		}
		return sfToken(p.s[start:p.i]), nil
	}
	return nil, p.errorf("unexpected %q", c)
}

func isTchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func TestSFParser(t *testing.T) {
	good := map[string]int{
		`"burst";q=100;w=60,"daily";q=1000;w=86400`: 2,
		`"a\"b";r=0;t=3`:  1,
		`tok;x;y=?0, "s"`: 2,
		`"default";r=-5`:  1,
	}
	for s, n := range good {
		items, err := parseSFList([]string{s})
		if err != nil || len(items) != n {
			t.Errorf("%q: got %d items, %v; want %d", s, len(items), err, n)
		}
	}
	for _, s := range []string{`"a";q=1,`, `"a";Q=1`, `"a";q=1.5`, `"a`, `"a";q=1234567890123456`, `"a" "b"`, `("a")`, `"a\n"`, `"é"`} {
		if _, err := parseSFList([]string{s}); err == nil {
			t.Errorf("%q parsed; want an error", s)
		}
	}
}
