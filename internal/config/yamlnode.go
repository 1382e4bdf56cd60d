// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file holds the parser's readers of YAML nodes: each checks a node's
// kind and value and reports a problem with the field's path and line.

// fields checks that n is a mapping with only the known keys, each once,
// and calls each known key's function with its value and field path.
func (p *parser) fields(n *yaml.Node, prefix string, known map[string]func(*yaml.Node, string)) bool {
	where := strings.TrimSuffix(prefix, ".")
	if where == "" {
		where = "(top level)"
	}
	n = p.deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, where, "want a mapping, got %s", kindName(n))
		return false
	}
	seen := map[string]bool{}
	for _, kv := range p.pairs(n, where) {
		k, v := kv[0], kv[1]
		f := prefix + k.Value
		fn, ok := known[k.Value]
		switch {
		case !ok:
			if s := suggest(k.Value, keys(known)); s != "" {
				p.errorf(k, f, "unknown field (did you mean %s?)", s)
			} else {
				p.errorf(k, f, "unknown field")
			}
			continue
		case seen[k.Value]:
			p.errorf(k, f, "duplicate field")
			continue
		}
		seen[k.Value] = true
		fn(v, f)
	}
	return true
}

// keys returns the keys of known.
func keys(known map[string]func(*yaml.Node, string)) []string {
	ks := make([]string, 0, len(known))
	for k := range known {
		ks = append(ks, k)
	}
	return ks
}

// maxWork bounds the nodes that alias expansion may add to a file: the
// nodes the parser would visit with every alias (and merge key) expanded,
// less the nodes written in the file. A large file with no aliases costs
// nothing here; a small file of nested aliases ("billion laughs") is
// refused before it is walked.
const maxWork = 1 << 17

// aliasWork counts the nodes that expanding every alias under n adds, and
// reports the first alias that takes the count past maxWork. It returns
// false then: the file is refused with that one error, so that nothing
// walks the expansion and no follow-on errors are reported.
func (p *parser) aliasWork(root *yaml.Node) bool {
	size := map[*yaml.Node]int{} // expanded size of a node, capped at maxWork+1
	work := 0
	var walk func(n *yaml.Node) int
	walk = func(n *yaml.Node) int {
		if s, ok := size[n]; ok {
			return s
		}
		size[n] = maxWork + 1 // a node that contains itself counts as too big
		s := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			s = walk(n.Alias)
			if work > maxWork {
				return s
			}
			work = min(work+s, maxWork+1)
			if work > maxWork {
				p.errorf(n, "(file)", "too many alias expansions (more than %d nodes)", maxWork)
				return s
			}
		} else {
			for _, c := range n.Content {
				s = min(s+walk(c), maxWork+1)
				if work > maxWork {
					return s
				}
			}
		}
		size[n] = s
		return s
	}
	walk(root)
	return work <= maxWork
}

// deref follows aliases.
func (p *parser) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i <= 100; i++ {
		n = n.Alias
	}
	return n
}

// pairs returns mapping n's key/value pairs with YAML merge keys ("<<:
// *base") resolved: explicit keys win over merged ones, and among merged
// mappings the first listed wins.
func (p *parser) pairs(n *yaml.Node, where string) [][2]*yaml.Node {
	var out, merged [][2]*yaml.Node
	explicit := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "!!merge" || k.Tag == "") {
			v = p.deref(v)
			sources := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				sources = v.Content
			}
			for _, src := range sources {
				src = p.deref(src)
				if src.Kind != yaml.MappingNode {
					p.errorf(src, where+".<<", "want a mapping or a list of mappings to merge, got %s", kindName(src))
					continue
				}
				merged = append(merged, p.pairs(src, where)...)
			}
			continue
		}
		explicit[k.Value] = true
		out = append(out, [2]*yaml.Node{k, v})
	}
	taken := map[string]bool{}
	for _, kv := range merged {
		if !explicit[kv[0].Value] && !taken[kv[0].Value] {
			taken[kv[0].Value] = true
			out = append(out, kv)
		}
	}
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func (p *parser) str(n *yaml.Node, field string) string {
	n = p.deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, field, "want a string, got %s", kindName(n))
		return ""
	}
	return n.Value
}

// boolean reads true or false, and YAML 1.1's other spellings of them
// unquoted (yes, no, on, off, y, n), which yaml.v2 reads as booleans for
// envoyproxy/ratelimit and yaml.v3 as strings.
func (p *parser) boolean(n *yaml.Node, field string) bool {
	n = p.deref(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Style == 0 {
		if b, ok := yaml11Bools[n.Value]; ok {
			return b
		}
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errorf(n, field, "want true or false, got %s", kindName(n))
		return false
	}
	b, _ := strconv.ParseBool(strings.ToLower(n.Value))
	return b
}

// yaml11Bools are the plain scalars YAML 1.1 reads as booleans that YAML
// 1.2 (yaml.v3) reads as strings.
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// isNull reports whether n is YAML's null: a key with nothing after it,
// "~" or "null".
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// emptyDocument reports whether the document doc holds nothing: a "---"
// with nothing after it but comments, or a null.
func emptyDocument(doc *yaml.Node) bool {
	return len(doc.Content) == 0 || len(doc.Content) == 1 && isNull(doc.Content[0])
}

// wholeNumber decodes a whole number of 64 bits, reporting a value that is
// not a whole number. A float that is exactly a whole number (1e3, 100.0)
// is one, as yaml.v2 decodes it into envoyproxy/ratelimit's integer
// fields; 1.5 is not (yaml.v2 would cut it to 1). A whole number beyond 64
// bits (which YAML reads as a float: 99999999999999999999, 1e30) is not
// reported: over is set, for the caller to say the field's range
// (inRange), naming the value as written (n.Value), rather than "want a
// whole number".
func (p *parser) wholeNumber(n *yaml.Node, field string) (v int64, ok, over bool) {
	n = p.deref(n)
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		if _, isInt := new(big.Int).SetString(n.Value, 0); isInt {
			if err := n.Decode(&v); err != nil || n.Tag != "!!int" {
				return 0, false, true
			}
			return v, true, false
		}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
		if v, whole, over := wholeFloat(n.Value); whole || over {
			return v, whole, over
		}
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.errorf(n, field, "want a whole number, got %s", kindName(n))
		return 0, false, false
	}
	if err := n.Decode(&v); err != nil {
		p.errorf(n, field, "%q is not a whole number of 64 bits", n.Value)
		return 0, false, false
	}
	return v, true, false
}

// wholeFloat reads s, a float as YAML writes one in decimal
// ([-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?), exactly: whole when it is a whole
// number of 64 bits (v), over when it is a whole number beyond them, and
// neither when it is not a whole number (1.5, .inf, .nan). It does not
// expand the exponent beyond 64 bits' 19 digits, so 1e1000000 costs no
// more than 1e3.
func wholeFloat(s string) (v int64, whole, over bool) {
	mant, exp := s, "0"
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	sign := ""
	if mant != "" && (mant[0] == '-' || mant[0] == '+') {
		sign, mant = mant[:1], mant[1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false, false
	}
	e, err := strconv.ParseInt(exp, 10, 32)
	if err != nil {
		if !errors.Is(err, strconv.ErrRange) {
			return 0, false, false
		}
		e = math.MaxInt32 // huge; its sign below
		if strings.HasPrefix(exp, "-") {
			e = math.MinInt32
		}
	}
	// digits × 10^e, with no leading or trailing zeros in digits.
	e -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, true, false // zero, whatever its exponent
	}
	t := strings.TrimRight(digits, "0")
	e += int64(len(digits) - len(t))
	digits = t
	switch {
	case e < 0:
		return 0, false, false // a fraction
	case int64(len(digits))+e > 19: // at least 10^19, beyond 64 bits
		return 0, false, true
	}
	v, err = strconv.ParseInt(sign+digits+strings.Repeat("0", int(e)), 10, 64)
	if err != nil {
		return 0, false, true // 19 digits beyond 64 bits
	}
	return v, true, false
}

// inRange reports, for the field of node n (decoded by wholeNumber as v,
// or over), a value outside lo to hi, naming it as written and saying the
// range; note, when not "", says what lo means ("0 refuses every
// request"), after it. It returns whether v is in range.
func (p *parser) inRange(n *yaml.Node, field string, v int64, over bool, lo, hi int64, note string) bool {
	if !over && v >= lo && v <= hi {
		return true
	}
	text := strconv.FormatInt(v, 10)
	if over {
		text = p.deref(n).Value
	}
	if note != "" {
		note = " (" + note + ")"
	}
	p.errorf(n, field, "%s: must be between %d and %d%s", text, lo, hi, note)
	return false
}

func (p *parser) list(n *yaml.Node, field string) []*yaml.Node {
	n = p.deref(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list, got %s", kindName(n))
		return nil
	}
	return n.Content
}
