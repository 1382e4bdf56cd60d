// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/shard"
)

// parsed is one file's domain, compiled.
type parsed struct {
	domain     string
	domainLine int
	root       *node
	rules      []*Rule
}

// parser walks one file's YAML tree, collecting every error.
type parser struct {
	file    string
	errs    []error
	dropped int // errors beyond maxErrors
	domain  string
	rules   []*Rule
}

// maxErrors is the most errors reported per file; the rest are counted.
const maxErrors = 50

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		p.dropped++
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: %s: %s", p.file, line, field, fmt.Sprintf(format, args...)))
}

// yamlMessage returns the YAML library's error as one line, without its
// "yaml: " prefix: an error spanning lines ("unmarshal errors:" and one
// line per error) is joined with spaces, so that every line a caller reports
// still starts with the file's name.
func yamlMessage(err error) string {
	lines := strings.Split(strings.TrimPrefix(err.Error(), "yaml: "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, " ")
}

// syntaxError is the error for data (file's content), which yaml.v3 could
// not parse (err), in the file:line: form of every other error. The
// library's "line N" is not the line of the mistake: it is the line where
// the enclosing block or flow collection starts (a block sequence's first
// "-", three lines above a badly indented entry), 0-based for the parser's
// errors and 1-based for the scanner's, and missing for line 1; the
// library gives no other position. So the line is found by decoding
// prefixes of data: the parser reads its input in order and stops at the
// mistake, so the first line whose prefix (lines 1 to it) fails with the
// same message is the line where the parser found it. Through a flow
// collection or a quoted string left open, that is the line where the
// input stops making sense without the closing character (the line of a
// "{" never closed, when the next line starts a new entry).
func syntaxError(file string, data []byte, err error) error {
	msg := problem(err)
	return fmt.Errorf("%s:%d: YAML syntax: %s", file, firstFailingLine(data, msg), msg)
}

// problem is yaml.v3's message for err without its "line N: " (see
// syntaxError).
func problem(err error) string {
	msg := yamlMessage(err)
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if _, err := strconv.Atoi(rest[:i]); err == nil {
				return rest[i+2:]
			}
		}
	}
	return msg
}

// firstFailingLine is the 1-based line at which decoding data fails with
// the message msg (problem's form): the line of the last byte the parser
// read when it failed, or an earlier one as long as the prefix up to it
// still fails with msg (the parser looks ahead past blank lines, comments
// and the start of the next token before it reports a mistake; a flow
// collection left open fails the same way wherever it is cut, back to the
// line of its bracket). Past linearSteps lines back, the search bisects,
// so that a large file costs a few dozen decodes, not one per line.
func firstFailingLine(data []byte, msg string) int {
	r := &countingReader{data: data}
	decodeAll(r)
	ends := lineEnds(data)
	line := len(ends)
	for i, e := range ends {
		if r.n <= e {
			line = i + 1
			break
		}
	}
	// fails reports whether lines 1 to k fail with msg.
	fails := func(k int) bool {
		if k < 1 {
			return false
		}
		err := decodeAll(bytes.NewReader(data[:ends[k-1]]))
		if err == nil {
			return false
		}
		return problem(err) == msg
	}
	for range linearSteps {
		if !fails(line - 1) {
			return line
		}
		line--
	}
	lo, hi := 0, line // fails(hi), not fails(lo)
	for hi-lo > 1 {
		if m := (lo + hi) / 2; fails(m) {
			hi = m
		} else {
			lo = m
		}
	}
	return hi
}

// linearSteps is how many lines firstFailingLine steps back one at a time.
const linearSteps = 4

// lineEnds is the offset just past each line of data (past its newline,
// or the end of data for a last line without one).
func lineEnds(data []byte) []int {
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	return ends
}

// decodeAll decodes every YAML document of r and returns the first error
// (nil at the end of the input).
func decodeAll(r io.Reader) error {
	dec := yaml.NewDecoder(r)
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// countingReader hands out data one byte per Read, so that n is how far
// a decoder has read.
type countingReader struct {
	data []byte
	n    int
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.n >= len(r.data) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[r.n]
	r.n++
	return 1, nil
}

// parseFile decodes and compiles one file. It returns nil and the errors
// when there are any.
func parseFile(file string, data []byte) (*parsed, []error) {
	p := &parser{file: file}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []error{fmt.Errorf("%s:1: domain: missing (the file is empty)", file)}
		}
		return nil, []error{syntaxError(file, data, err)}
	}
	// Empty documents may follow: a "---" that ends a file, as tools
	// that join manifests write it (yaml.v2, which envoyproxy/ratelimit
	// uses, reads the first document alone). A second document with
	// anything in it is a second domain, which would go unread.
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, []error{syntaxError(file, data, err)}
		}
		if !emptyDocument(&extra) {
			return nil, []error{fmt.Errorf("%s:%d: a second YAML document: a file holds one domain", file, extra.Line)}
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if !p.aliasWork(root) {
		return nil, p.errs
	}
	out := &parsed{root: newNode()}
	var descriptors *yaml.Node
	p.fields(root, "", map[string]func(*yaml.Node, string){
		"domain": func(v *yaml.Node, f string) {
			out.domain = p.str(v, f)
			out.domainLine = v.Line
		},
		"descriptors": func(v *yaml.Node, f string) { descriptors = v },
	})
	if out.domain == "" && len(p.errs) == 0 {
		p.errorf(root, "domain", "missing or empty")
	}
	p.domain = out.domain
	if descriptors != nil && out.domain != "" {
		p.descriptors(descriptors, "descriptors", out.domain, nil, nil, out.root)
	}
	if p.dropped > 0 {
		p.errs = append(p.errs, fmt.Errorf("%s: and %d more errors", file, p.dropped))
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	out.rules = p.rules
	return out, nil
}

// rawLimit is a rate_limit as written.
type rawLimit struct {
	line                 int
	unit, period         string
	unitNode, periodNode *yaml.Node
	requests             int64
	hasRequests          bool // requests_per_unit is a whole number (requestsOver: beyond 64 bits)
	requestsOver         bool
	requestsNode         *yaml.Node
	unlimited            bool
	name                 string
	replaces             []string
	algorithm            string
	algorithmNode        *yaml.Node
	burst                int64
	burstOver            bool // burst is a whole number beyond 64 bits
	burstNode            *yaml.Node
	failureMode          string
	failureNode          *yaml.Node
	multiplier           int64
	multiplierOver       bool // unit_multiplier is a whole number beyond 64 bits
	multiplierNode       *yaml.Node
	inflight             rawInFlight // in-flight fields (inflight.go)
	lease                bool
	leaseNode            *yaml.Node
	shards               int64
	shardsNode           *yaml.Node
	quota                rawQuota    // overridable, usage_thresholds (quota.go)
	calendar             rawCalendar // calendar fields (calendar.go)
	countRefused         *yaml.Node  // count_refused: true; nil: unset
}

// MaxDepth is the deepest a descriptors tree may nest: a rule's
// descriptor has at most MaxDepth entries. Envoy builds a descriptor from
// the actions of one rate_limits entry, a handful in any real
// configuration. The bound keeps the parser's work per node (its field
// path and the rule's path) a constant, so a file costs time and memory in
// proportion to its size: a 122 KiB file nested 4,999 deep took 1.2 GiB
// before it.
const MaxDepth = 64

// descriptors compiles a descriptors list into parent.
func (p *parser) descriptors(n *yaml.Node, field, parentKey string, path []Entry, levels []Level, parent *node) {
	if len(path) >= MaxDepth {
		// The field is named by its level: its path would be MaxDepth
		// times "descriptors[i]".
		p.errorf(n, fmt.Sprintf("descriptors at level %d", len(path)+1), "descriptors nested deeper than %d levels", MaxDepth)
		return
	}
	for i, d := range p.list(n, field) {
		f := fmt.Sprintf("%s[%d]", field, i)
		var (
			key, value       string
			keyNode          *yaml.Node
			limit            *rawLimit
			children         *yaml.Node
			shadow, detailed bool
			quota            bool
			level            Level
			shareNode        *yaml.Node
			metadata         map[string]any
			metadataNode     *yaml.Node
		)
		ok := p.fields(d, f+".", map[string]func(*yaml.Node, string){
			"key": func(v *yaml.Node, f string) { key, keyNode = p.str(v, f), v },
			// value: and rate_limit: with nothing after them are the
			// key alone and no limit at this level, as yaml.v2 reads
			// them for envoyproxy/ratelimit.
			"value": func(v *yaml.Node, f string) {
				if !isNull(p.deref(v)) {
					value = p.str(v, f)
				}
			},
			"rate_limit": func(v *yaml.Node, f string) {
				if !isNull(p.deref(v)) {
					limit = p.rateLimit(v, f)
				}
			},
			"descriptors": func(v *yaml.Node, f string) { children = v },
			"shadow_mode": func(v *yaml.Node, f string) { shadow = p.boolean(v, f) },
			"detailed_metric": func(v *yaml.Node, f string) {
				detailed = p.boolean(v, f)
			},
			"quota_mode":      func(v *yaml.Node, f string) { quota = p.boolean(v, f) },
			"share_threshold": func(v *yaml.Node, f string) { level.ShareThreshold, shareNode = p.boolean(v, f), v },
			"value_to_metric": func(v *yaml.Node, f string) { level.ValueToMetric = p.boolean(v, f) },
			"metadata":        func(v *yaml.Node, f string) { metadata, metadataNode = p.metadata(v, f), v },
		})
		if !ok {
			continue
		}
		if key == "" {
			at := keyNode
			if at == nil {
				at = d
			}
			p.errorf(at, f+".key", "missing or empty")
			continue
		}
		if level.ShareThreshold && !isWildcard(value) {
			p.errorf(shareNode, f+".share_threshold", "the value %q is not a wildcard: share_threshold shares one quota among the values a wildcard (a value with *) matches", value)
			continue
		}
		if metadataNode != nil && limit == nil {
			p.errorf(metadataNode, f+".metadata", "the descriptor has no rate_limit: metadata is returned with a matched rate_limit")
			continue
		}
		finalKey := key
		if value != "" {
			finalKey += "_" + value
		}
		fullKey := parentKey + "." + finalKey
		next := newNode()
		next.file, next.line, next.field = p.file, d.Line, f
		var prev *node // the descriptor this one repeats, if any
		switch {
		case value == "":
			prev = parent.keyOnly[key]
			if prev == nil {
				parent.keyOnly[key] = next
			}
		case isWildcard(value):
			for _, w := range parent.wildcards {
				if prev == nil && w.key == key && w.pattern == value {
					prev = w.next
				}
			}
			if prev == nil {
				parent.wildcards = append(parent.wildcards, newWildcard(key, value, next))
			}
		default:
			k := key + "\x00" + value
			prev = parent.exact[k]
			if prev == nil {
				parent.exact[k] = next
			}
		}
		if prev != nil {
			p.errorf(d, f, "duplicate descriptor %q at this level: %s:%d (%s) already defines it", fullKey, prev.file, prev.line, prev.field)
			continue
		}
		here := append(slices.Clip(path), Entry{Key: key, Value: value})
		hereLevels := append(slices.Clip(levels), level)
		if limit != nil {
			if r := p.rule(limit, f+".rate_limit", fullKey); r != nil && p.quota(limit, r, f+".rate_limit") {
				r.Path, r.Levels = here, hereLevels
				r.ShadowMode, r.DetailedMetric = shadow, detailed
				r.QuotaMode, r.Metadata = quota, metadata
				next.rule = r
				p.rules = append(p.rules, r)
			}
		}
		if children != nil {
			p.descriptors(children, f+".descriptors", fullKey, here, hereLevels, next)
		}
	}
}

// descriptorFields are the fields of a descriptor that are not a
// rate_limit's. envoyproxy/ratelimit checks a file's keys against one list
// for every level, so one of these written inside rate_limit loads there
// and does nothing; sluice says where it belongs.
var descriptorFields = []string{"key", "value", "descriptors", "shadow_mode", "detailed_metric", "quota_mode", "share_threshold", "value_to_metric", "metadata"}

// rateLimit decodes a rate_limit mapping.
func (p *parser) rateLimit(n *yaml.Node, field string) *rawLimit {
	r := &rawLimit{line: n.Line}
	decoders := map[string]func(*yaml.Node, string){
		"unit":   func(v *yaml.Node, f string) { r.unit, r.unitNode = p.str(v, f), v },
		"period": func(v *yaml.Node, f string) { r.period, r.periodNode = p.str(v, f), v },
		"requests_per_unit": func(v *yaml.Node, f string) {
			// Its range depends on the algorithm: rule and inflightRule
			// check it.
			r.requests, r.hasRequests, r.requestsOver = p.wholeNumber(v, f)
			r.hasRequests = r.hasRequests || r.requestsOver
			r.requestsNode = v
		},
		"unlimited": func(v *yaml.Node, f string) { r.unlimited = p.boolean(v, f) },
		"name":      func(v *yaml.Node, f string) { r.name = p.str(v, f) },
		"replaces": func(v *yaml.Node, f string) {
			for i, e := range p.list(v, f) {
				ef := fmt.Sprintf("%s[%d]", f, i)
				var name string
				var nameNode *yaml.Node
				p.fields(e, ef+".", map[string]func(*yaml.Node, string){
					"name": func(v *yaml.Node, f string) { name, nameNode = p.str(v, f), v },
				})
				if name == "" {
					at := nameNode
					if at == nil {
						at = e
					}
					p.errorf(at, ef+".name", "missing or empty")
					continue
				}
				r.replaces = append(r.replaces, name)
			}
		},
		"algorithm": func(v *yaml.Node, f string) { r.algorithm, r.algorithmNode = p.str(v, f), v },
		"burst": func(v *yaml.Node, f string) {
			r.burst, _, r.burstOver = p.wholeNumber(v, f)
			r.burstNode = v
		},
		"failure_mode": func(v *yaml.Node, f string) { r.failureMode, r.failureNode = p.str(v, f), v },
		"unit_multiplier": func(v *yaml.Node, f string) {
			// Not a whole number, it is reported once, here.
			var ok bool
			if r.multiplier, ok, r.multiplierOver = p.wholeNumber(v, f); ok || r.multiplierOver {
				r.multiplierNode = v
			}
		},
		"floor":      func(v *yaml.Node, f string) { r.inflight.floor = p.num(v, f) },
		"ceiling":    func(v *yaml.Node, f string) { r.inflight.ceiling = p.num(v, f) },
		"holder_ttl": func(v *yaml.Node, f string) { r.inflight.ttl = p.num(v, f) },
		"critical_reserve": func(v *yaml.Node, f string) {
			r.inflight.reserve = p.num(v, f)
		},
		"controller":        func(v *yaml.Node, f string) { r.inflight.controller = p.num(v, f) },
		"latency_threshold": func(v *yaml.Node, f string) { r.inflight.threshold = p.num(v, f) },
		"lease":             func(v *yaml.Node, f string) { r.lease, r.leaseNode = p.boolean(v, f), v },
		"shards": func(v *yaml.Node, f string) {
			// Out of range, it is reported once, here: leaseShards sees
			// no shards.
			n, ok, over := p.wholeNumber(v, f)
			if (ok || over) && p.inRange(v, f, n, over, 1, shard.Max, "") {
				r.shards, r.shardsNode = n, v
			}
		},
		"overridable": func(v *yaml.Node, f string) {
			r.quota.overridable, r.quota.overridableNode = p.boolean(v, f), v
		},
		"usage_thresholds": func(v *yaml.Node, f string) {
			r.quota.thresholds, r.quota.thresholdsNode = p.usageThresholds(v, f), v
		},
		"count_refused": func(v *yaml.Node, f string) {
			if p.boolean(v, f) {
				r.countRefused = v
			}
		},
	}
	maps.Copy(decoders, r.calendar.fields(p))
	for _, name := range descriptorFields {
		decoders[name] = func(v *yaml.Node, f string) {
			p.errorf(v, f, "%s belongs on the descriptor, beside rate_limit (envoyproxy/ratelimit ignores it inside rate_limit)", name)
		}
	}
	if !p.fields(n, field+".", decoders) {
		return nil
	}
	return r
}

// rule validates a rate_limit and compiles it into a Rule.
func (p *parser) rule(r *rawLimit, field, fullKey string) *Rule {
	nerr := len(p.errs)
	at := func(n *yaml.Node) *yaml.Node {
		if n != nil {
			return n
		}
		return &yaml.Node{Line: r.line}
	}
	rule := &Rule{Domain: p.domain, FullKey: fullKey, Name: r.name, Replaces: r.replaces, Unlimited: r.unlimited, File: p.file, Line: r.line}
	for i, name := range r.replaces {
		if name == r.name {
			p.errorf(at(nil), fmt.Sprintf("%s.replaces[%d].name", field, i), "%q is this rule's own name", name)
		}
	}
	switch r.failureMode {
	case "", "local":
		rule.FailureMode = DefaultFailureMode
	case "open":
		rule.FailureMode = sluice.FailOpen
	case "closed":
		rule.FailureMode = sluice.FailClosed
	default:
		p.errorf(at(r.failureNode), field+".failure_mode", "%q: want local, open or closed", r.failureMode)
	}
	if r.countRefused != nil && (isInFlight(r.algorithm) || r.unlimited) {
		p.errorf(r.countRefused, field+".count_refused", "only for a rate limit: an unlimited or in-flight rule counts nothing")
	}
	rule.CountRefused = r.countRefused != nil
	if isInFlight(r.algorithm) {
		return p.inflightRule(r, field, rule, nerr)
	}
	if r.inflight.set() {
		p.errorf(at(r.inflight.first()), field+"."+r.inflight.firstName(), "only for algorithm concurrency or adaptive-concurrency")
		return nil
	}
	if r.unlimited {
		for _, x := range []struct {
			set   bool
			name  string
			where *yaml.Node
		}{
			{r.unit != "", "unit", r.unitNode},
			{r.period != "", "period", r.periodNode},
			{r.algorithm != "", "algorithm", r.algorithmNode},
			{r.burstNode != nil, "burst", r.burstNode},
			{r.multiplierNode != nil, "unit_multiplier", r.multiplierNode},
			{r.leaseNode != nil, "lease", r.leaseNode},
			{r.shardsNode != nil, "shards", r.shardsNode},
			{r.calendar.onNode != nil, "calendar", r.calendar.onNode},
		} {
			if x.set {
				p.errorf(at(x.where), field+"."+x.name, "must not be set on an unlimited rate_limit")
			}
		}
		if len(p.errs) > nerr {
			return nil
		}
		return rule
	}
	var period time.Duration
	switch {
	case r.unit != "" && r.period != "":
		p.errorf(at(r.periodNode), field+".period", "set unit or period, not both")
	case r.unit != "":
		d, ok := UnitDuration(r.unit)
		if !ok {
			p.errorf(at(r.unitNode), field+".unit", "%q: want second, minute, hour, day, week, month or year", r.unit)
		}
		period = d
		if r.multiplierNode != nil {
			text := strconv.FormatInt(r.multiplier, 10)
			if r.multiplierOver {
				text = p.deref(r.multiplierNode).Value
			}
			switch {
			case r.multiplierOver && strings.HasPrefix(text, "-") || !r.multiplierOver && r.multiplier < 1:
				p.errorf(at(r.multiplierNode), field+".unit_multiplier", "%s: must be at least 1", text)
			case ok && (r.multiplierOver || r.multiplier > int64(sluice.MaxPeriod/d)):
				p.errorf(at(r.multiplierNode), field+".unit_multiplier", "%s: %s × %s is longer than the longest period, %v (at most %d)", text, text, r.unit, sluice.MaxPeriod, int64(sluice.MaxPeriod/d))
			default:
				period = d * time.Duration(r.multiplier)
			}
		}
	case r.period != "":
		if r.multiplierNode != nil {
			p.errorf(at(r.multiplierNode), field+".unit_multiplier", "goes with unit, not period")
		}
		d, err := time.ParseDuration(r.period)
		if err != nil || d <= 0 {
			p.errorf(at(r.periodNode), field+".period", "%q: want a positive duration such as 10s, 1m30s or 24h", r.period)
		}
		period = d
	default:
		p.errorf(at(nil), field+".unit", "missing: set unit (or sluice's period), or unlimited: true")
	}
	if !r.hasRequests && r.requestsNode == nil {
		p.errorf(at(nil), field+".requests_per_unit", "missing")
	} else if r.hasRequests {
		p.inRange(r.requestsNode, field+".requests_per_unit", r.requests, r.requestsOver, 0, sluice.MaxLimit, "0 refuses every request")
	}
	if r.burstNode != nil {
		p.inRange(r.burstNode, field+".burst", r.burst, r.burstOver, 0, sluice.MaxLimit, "0 means the limit")
	}
	alg := sluice.FixedWindow
	if r.algorithm != "" {
		a, err := sluice.ParseAlgorithm(r.algorithm)
		if err != nil {
			p.errorf(at(r.algorithmNode), field+".algorithm", "%q: want one of token-bucket, gcra, leaky-bucket, fixed-window, sliding-log, sliding-window, concurrency, adaptive-concurrency", r.algorithm)
		}
		alg = a
	}
	cal := p.calendar(r, field, at)
	if len(p.errs) > nerr {
		return nil
	}
	rule.Unit, rule.UnitMultiplier = unitOf(period)
	if r.requests == 0 {
		// envoyproxy/ratelimit refuses every request of a zero limit.
		for _, x := range []struct {
			name  string
			where *yaml.Node
		}{{"burst", r.burstNode}, {"lease", r.leaseNode}, {"shards", r.shardsNode}, {"calendar", r.calendar.onNode}} {
			if x.where != nil {
				p.errorf(at(x.where), field+"."+x.name, "must not be set when requests_per_unit is 0 (every request is refused)")
				return nil
			}
		}
		rule.Deny = true
		return rule
	}
	rule.Policy = sluice.Policy{Name: fullKey, Algorithm: alg, Limit: r.requests, Period: period, Burst: r.burst, Calendar: cal}
	if err := rule.Policy.Validate(); err != nil {
		f, n := field, at(nil)
		switch msg := err.Error(); {
		case strings.Contains(msg, ": calendar day ") && r.calendar.weekdayNode != nil:
			f, n = field+".anchor_weekday", at(r.calendar.weekdayNode)
		case strings.Contains(msg, ": calendar day "):
			f, n = field+".anchor_day", at(r.calendar.dayNode)
		case strings.Contains(msg, ": calendar month "):
			f, n = field+".anchor_month", at(r.calendar.monthNode)
		case strings.Contains(msg, ": calendar "):
			f, n = field+".calendar", at(r.calendar.onNode)
		case strings.Contains(msg, ": burst "):
			f, n = field+".burst", at(r.burstNode)
		case strings.Contains(msg, ": limit "):
			f, n = field+".requests_per_unit", at(r.requestsNode)
		case strings.Contains(msg, ": period "):
			f = field + ".period"
		}
		p.errorf(n, f, "%s", strings.TrimPrefix(err.Error(), "sluice: "))
		return nil
	}
	if !p.leaseShards(r, rule, field, at) {
		return nil
	}
	return rule
}
