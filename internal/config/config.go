// SPDX-License-Identifier: Apache-2.0

// Package config loads sluice serve's rate-limit configuration: a directory
// of YAML files in the format of Envoy's ratelimit service, so that an
// existing envoyproxy/ratelimit configuration loads unchanged.
//
// Each file holds one domain and a tree of descriptors:
//
//	domain: rides
//	descriptors:
//	  - key: rider_id              # any value: one limit per rider
//	    rate_limit:
//	      unit: second
//	      requests_per_unit: 5
//	      algorithm: token-bucket  # sluice extension (default fixed-window)
//	      burst: 10                # sluice extension
//	  - key: partner
//	    value: acme                # this value only
//	    rate_limit: {period: 10s, requests_per_unit: 50, algorithm: sliding-log}
//	  - key: path
//	    value: /v1/trips*          # every value with this prefix
//	    descriptors:
//	      - key: rider_id
//	        rate_limit: {unit: minute, requests_per_unit: 30}
//
// Fields from envoyproxy/ratelimit: domain, descriptors, key, value (a value
// with "*" in it is a wildcard, where each "*" stands for any run of
// characters: "foo*", "bar*b", "svc*ep*rpc"), rate_limit (unit,
// unit_multiplier, requests_per_unit, unlimited, name, replaces), shadow_mode,
// detailed_metric, quota_mode, share_threshold, value_to_metric and
// metadata. Sluice adds to rate_limit: algorithm (one of sluice's algorithm
// names; fixed-window by default, which gives envoyproxy/ratelimit's
// decisions), burst (for the bucket kinds), period (any Go duration, instead
// of unit) and failure_mode (local, the default; open; or closed: see
// DefaultFailureMode), lease (true:
// decide from local budgets, see package lease) and shards (split each
// key over that many sub-keys, see package shard) and count_refused (true:
// a refused request's hits are recorded anyway, past the limit, as
// envoyproxy/ratelimit counts every hit; see Rule.CountRefused).
//
// The descriptor fields envoyproxy/ratelimit added in 2026:
//   - quota_mode: true makes the descriptor's limit a quota. A request is
//     refused when an ordinary descriptor is over its limit, or when every
//     quota-mode descriptor it matched is over; a quota-mode descriptor
//     over its quota alone does not refuse it (its status says
//     OVER_LIMIT, and the answer lists it, so the caller can route
//     elsewhere).
//   - share_threshold: true on a wildcard value makes every value that
//     matches the wildcard count against one quota, instead of one per
//     value.
//   - value_to_metric: true puts the request's value at that level into
//     the rule's metric name (bounded: see the server's documentation).
//   - metadata: a free-form mapping returned with the rule's status while
//     the descriptor is under its limit (Rule.Metadata).
//
// Domain merging (WithMergeDomains, envoyproxy/ratelimit's
// MERGE_DOMAIN_CONFIG) lets several files add descriptors to one domain;
// a top-level descriptor with the same key and value in two files is
// refused, as there. Without it a domain is defined once.
//
// In-flight rules (algorithm concurrency or adaptive-concurrency, with floor,
// ceiling, holder_ttl and critical_reserve) are described in inflight.go.
//
// Decoding is strict: an unknown field, a value of the wrong type, a
// duplicate key or an invalid policy is an error naming the file, the line,
// the field and the reason. What envoyproxy/ratelimit's YAML 1.1 reader
// (yaml.v2) accepts loads with its meaning: yes, no, on, off, y and n
// unquoted in a boolean field, a float that is exactly a whole number
// (1e3, 100.0) in a whole-number field (1.5, which yaml.v2 cuts to 1, is
// an error), "value:" and "rate_limit:" with nothing
// after them (the key alone; no limit at that level), and empty documents
// after the first (a trailing "---"). A second document with anything in
// it is an error: yaml.v2 would not read its domain.
//
// Matching follows envoyproxy/ratelimit: a request descriptor (a list of
// key/value entries) walks the tree one entry per level, preferring at each
// level the node with the same key and value, then the first wildcard node
// (in configuration order) of the same key that the value matches, then the
// node with the key and no value. The rule found is the one at the level of
// the descriptor's last entry; a descriptor that is longer or shorter than
// the configured tree matches nothing.
package config

import (
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// defaults is the built-in configuration sluice serve starts with when it is
// given no --config: the ride-hailing platform of the examples (rider APIs
// on token bucket, driver location ingestion on leaky bucket, admin
// analytics on fixed window, the partner API on sliding log, trip history
// on the sliding-window counter).
//
//go:embed defaults/*.yaml
var defaults embed.FS

// Default returns the compiled built-in configuration.
func Default() (*Config, error) {
	sub, err := fs.Sub(defaults, "defaults")
	if err != nil {
		return nil, fmt.Errorf("config: defaults: %w", err)
	}
	return Load(sub)
}

// Config is a compiled configuration: every domain's descriptor tree. It is
// immutable once loaded and safe for concurrent use.
type Config struct {
	domains map[string]*node
	files   []string
	rules   []*Rule
	// digest hashes the configuration files' names and bytes (SameFiles).
	digest [sha256.Size]byte
}

// Rule is one rate_limit of the configuration, at one place in a domain's
// descriptor tree.
type Rule struct {
	// Domain is the domain the rule belongs to.
	Domain string
	// FullKey is envoyproxy/ratelimit's name for the rule's place in the
	// tree: the domain and each level's key (with "_value" when the level
	// has a value), joined by dots: "rides.rider_id", "rides.partner_acme".
	FullKey string
	// Path is the rule's place in the tree: one entry per level, with the
	// value as configured ("" for any value, "prefix*" for a wildcard).
	Path []Entry
	// Name is rate_limit.name, the name other rules' replaces refer to.
	// Optional.
	Name string
	// Replaces lists the names of the rules this one replaces when both
	// match descriptors of one request.
	Replaces []string
	// Unlimited rules admit everything and record nothing.
	Unlimited bool
	// Deny is set for requests_per_unit 0: every request is over the limit,
	// as in envoyproxy/ratelimit. Policy is zero then.
	Deny bool
	// Policy is the limit. Its Name is FullKey, so the store keeps a rule's
	// state across reloads that change its numbers.
	Policy sluice.Policy
	// Unit is the envoy unit of the rule's period ("second", ..., "year"),
	// or "" when the period is not a whole number of one of them.
	Unit string
	// UnitMultiplier is Policy.Period in Units: 1 for a plain unit, 10 for
	// a period of 10s.
	UnitMultiplier int64
	// FailureMode is what the service answers when the store fails
	// (DefaultFailureMode unless the rule says).
	FailureMode sluice.FailureMode
	// Lease (rate_limit.lease) decides from local budgets: package lease.
	Lease bool
	// Shards (rate_limit.shards) splits each key over that many sub-keys:
	// package shard. 0 or 1: one key.
	Shards int
	// ShadowMode rules are checked and counted but never refuse.
	ShadowMode bool
	// CountRefused (rate_limit.count_refused) records a refused request's
	// hits too, past the limit (a charge: sluice.Limiter.Charge), as
	// envoyproxy/ratelimit counts every hit: Envoy's check-then-debit
	// (hits_addend 0 on the request, the token count on stream done)
	// then limits a budget, and the key refuses until its debt is paid.
	CountRefused bool
	// DetailedMetric rules are reported in metrics under the request's
	// values, not only under the configured key.
	DetailedMetric bool
	// QuotaMode rules (quota_mode on the descriptor) refuse a request only
	// together: see the package documentation.
	QuotaMode bool
	// Metadata is the descriptor's metadata mapping, nil when it has none:
	// strings, numbers, booleans, nulls, lists and mappings with string
	// keys. It is returned while the descriptor is under its limit.
	Metadata map[string]any
	// Levels holds the options of each level of Path.
	Levels []Level
	// Overridable (rate_limit.overridable) rules take a key's limit from
	// an override set at runtime, when the key has one (quota.go).
	Overridable bool
	// Thresholds (rate_limit.usage_thresholds) are the percentages of the
	// limit whose crossing is counted; nil: UsageThresholds' default.
	Thresholds []int
	// InFlight, when not nil, makes the rule an in-flight (concurrency)
	// limit instead of a rate: algorithm concurrency or
	// adaptive-concurrency. Policy is zero then. See inflight.go.
	InFlight *InFlight
	// File and Line locate the rate_limit in the configuration.
	File string
	Line int
}

// Level is the options of one level of a rule's Path.
type Level struct {
	// ShareThreshold: the level's value is a wildcard whose matching
	// values all share one quota.
	ShareThreshold bool
	// ValueToMetric: the request's value at this level goes into the
	// rule's metric name.
	ValueToMetric bool
}

// Title is the rule's one name, used wherever sluice names the rule to
// someone: RLS's current_limit.name, the JSON API's name, the
// RateLimit-Policy and RateLimit headers, the metrics' policy and rule
// labels, and the live page. It is Name (rate_limit.name) when set, as
// envoyproxy/ratelimit sends in current_limit.name, else FullKey. FullKey
// stays the rule's address (POST /v1/simulate's and /v1/reset's rule).
func (r *Rule) Title() string {
	if r.Name != "" {
		return r.Name
	}
	return r.FullKey
}

// Shared reports whether any level of r shares one quota among the values
// of a wildcard.
func (r *Rule) Shared() bool {
	for _, l := range r.Levels {
		if l.ShareThreshold {
			return true
		}
	}
	return false
}

// Entry is one key/value pair of a request descriptor.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// node is one level of a domain's descriptor tree.
type node struct {
	exact     map[string]*node // by key + "\x00" + value
	keyOnly   map[string]*node // by key, for nodes with no value
	wildcards []wildcard       // in configuration order
	rule      *Rule
	// where locates the descriptor that made the node, for errors:
	// "file:line: descriptors[0].descriptors[2]".
	file, field string
	line        int
}

func newNode() *node {
	return &node{exact: map[string]*node{}, keyOnly: map[string]*node{}}
}

func (n *node) hasChildren() bool {
	return len(n.exact) > 0 || len(n.keyOnly) > 0 || len(n.wildcards) > 0
}

// child returns the node for entry e at this level: the exact key and value,
// else the first matching wildcard, else the key alone.
func (n *node) child(e Entry) *node {
	if c := n.exact[e.Key+"\x00"+e.Value]; c != nil {
		return c
	}
	for _, w := range n.wildcards {
		if w.key == e.Key && matchWildcard(w.parts, e.Value) {
			return w.next
		}
	}
	return n.keyOnly[e.Key]
}

// Match returns the rule for a request descriptor in domain, or nil when
// none applies (an unknown domain, a descriptor that matches no rule).
func (c *Config) Match(domain string, entries []Entry) *Rule {
	n := c.domains[domain]
	if n == nil || len(entries) == 0 {
		return nil
	}
	for i, e := range entries {
		n = n.child(e)
		if n == nil {
			return nil
		}
		if i == len(entries)-1 {
			return n.rule
		}
		if !n.hasChildren() {
			return nil
		}
	}
	return nil
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds
}

// HasDomain reports whether a configuration file defines domain.
func (c *Config) HasDomain(domain string) bool {
	_, ok := c.domains[domain]
	return ok
}

// Files returns the names of the files the configuration was loaded from,
// sorted.
func (c *Config) Files() []string { return c.files }

// Rules returns every rule, in file order and, within a file, in the order
// of the configuration.
func (c *Config) Rules() []*Rule { return c.rules }

// Warnings returns one line per rule that does over RLS (and the JSON API)
// less than its algorithm does in the library, each naming its file and
// line: a leaky-bucket rule is a meter there, not a queue (Envoy cannot
// hold a request for its delay, so an admitted request passes at once),
// and an in-flight rule does not apply (RLS has no call that ends a
// request). Both do what they say in gateway mode and in the library.
func (c *Config) Warnings() []string {
	var out []string
	for _, r := range c.rules {
		switch {
		case r.InFlight != nil:
			out = append(out, fmt.Sprintf("%s:%d: %s: an in-flight rule applies in gateway mode only: RLS and the JSON API cannot release a slot and answer as if no rule matched", r.File, r.Line, r.FullKey))
		case !r.Unlimited && !r.Deny && r.Policy.Algorithm == sluice.LeakyBucket:
			out = append(out, fmt.Sprintf("%s:%d: %s: leaky-bucket over RLS is a meter, not a queue: Envoy cannot hold a request for its delay, so what is admitted passes at once; for real queueing use gateway mode or the library (Limiter.Wait)", r.File, r.Line, r.FullKey))
		}
	}
	return out
}

// Summary describes c in one line: "3 files, 3 domains, 12 rules".
func (c *Config) Summary() string {
	return fmt.Sprintf("%d %s, %d %s, %d %s",
		len(c.files), plural(len(c.files), "file"),
		len(c.domains), plural(len(c.domains), "domain"),
		len(c.rules), plural(len(c.rules), "rule"))
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// IsConfigFile reports whether a directory entry's name is loaded as a
// configuration file: it ends in .yaml or .yml and does not start with a dot
// (which skips editors' temporary files and a Kubernetes ConfigMap's
// "..data" and "..2024_..." entries; the ConfigMap's visible names are
// symlinks into them and are loaded).
func IsConfigFile(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	ext := path.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}

// LoadDir loads the configuration files in dir (not its subdirectories).
func LoadDir(dir string, opts ...Option) (*Config, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("config: %s: not a directory", dir)
	}
	c, err := load(os.DirFS(dir), dir, opts)
	return c, err
}

// Load loads the configuration files at the top of fsys. Errors name files
// relative to fsys.
func Load(fsys fs.FS, opts ...Option) (*Config, error) { return load(fsys, "", opts) }

// load loads fsys; dir, when not empty, prefixes file names in errors.
func load(fsys fs.FS, dir string, opts []Option) (*Config, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := &Config{domains: map[string]*node{}}
	domainFile := map[string]string{}
	digest := sha256.New()
	var errs []error
	for _, de := range entries {
		if !IsConfigFile(de.Name()) {
			continue
		}
		name := de.Name()
		display := name
		if dir != "" {
			display = path.Join(dir, name)
		}
		info, err := fs.Stat(fsys, name) // follows symlinks
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", display, err))
			continue
		}
		if info.IsDir() {
			continue
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", display, err))
			continue
		}
		fmt.Fprintf(digest, "%d:%s%d:", len(name), name, len(data))
		digest.Write(data)
		f, ferrs := parseFile(display, data)
		errs = append(errs, ferrs...)
		if f == nil {
			continue
		}
		c.files = append(c.files, display)
		if prev, dup := domainFile[f.domain]; dup {
			if !o.mergeDomains {
				errs = append(errs, fmt.Errorf("%s:%d: domain: %q is already defined in %s (merging a domain across files is opt-in: sluice serve --merge-domains)", display, f.domainLine, f.domain, prev))
				continue
			}
			if merrs := mergeDomain(c.domains[f.domain], f.root, f.domain); len(merrs) > 0 {
				errs = append(errs, merrs...)
				continue
			}
			c.rules = append(c.rules, f.rules...)
			continue
		}
		domainFile[f.domain] = display
		c.domains[f.domain] = f.root
		c.rules = append(c.rules, f.rules...)
	}
	// A rule's policy is named by its full key, domain.key_value..., and
	// the store keeps state by that name: two rules whose keys join to the
	// same name (key "a_b" and key "a" with value "b", or dots in a
	// domain) would share, and fight over, one policy's state.
	named := map[string]*Rule{}
	for _, r := range c.rules {
		if r.Policy.Name == "" {
			continue
		}
		if prev, dup := named[r.Policy.Name]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: descriptor: its full name %q is also the name of the rule at %s:%d; rename a key or value so that they differ", r.File, r.Line, r.Policy.Name, prev.File, prev.Line))
			continue
		}
		named[r.Policy.Name] = r
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(c.files) == 0 {
		where := dir
		if where == "" {
			where = "the configuration"
		}
		msg := fmt.Sprintf("config: %s: no .yaml or .yml files", where)
		if subs := configSubdirs(fsys); len(subs) > 0 {
			for i, sub := range subs {
				subs[i] = path.Join(dir, sub)
			}
			// envoyproxy/ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
			// config/*.yaml: a user who gives its root or subdirectory
			// finds here where the files are.
			msg += fmt.Sprintf(" (subdirectories are not read; %s holds configuration files: give that directory)", strings.Join(subs, ", "))
		}
		return nil, errors.New(msg)
	}
	digest.Sum(c.digest[:0])
	return c, nil
}

// configSubdirs returns the subdirectories of fsys, two levels deep at
// most (envoyproxy/ratelimit's runtime layout, RUNTIME_SUBDIRECTORY/config),
// that hold configuration files, in order, at most three of them. It reads
// at most maxHintDirs directories: a directory given by mistake may be
// large.
func configSubdirs(fsys fs.FS) []string {
	var found []string
	read := 0
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if read >= maxHintDirs || len(found) >= 3 {
			return
		}
		read++
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return
		}
		var subs []string
		has := false
		for _, de := range entries {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p := path.Join(dir, name)
			info, err := fs.Stat(fsys, p) // follows symlinks
			if err != nil {
				continue
			}
			switch {
			case info.IsDir():
				subs = append(subs, p)
			case IsConfigFile(name):
				has = true
			}
		}
		if has && dir != "." {
			found = append(found, dir)
			return
		}
		if depth < 2 {
			for _, sub := range subs {
				walk(sub, depth+1)
			}
		}
	}
	walk(".", 0)
	return found
}

// maxHintDirs is the most directories configSubdirs reads.
const maxHintDirs = 64

// SameFiles reports whether c and o were loaded from the same files with
// the same bytes, so that putting o in force in place of c would change
// nothing. A nil configuration is the same as none but itself.
func (c *Config) SameFiles(o *Config) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.digest == o.digest
}

// units are envoyproxy/ratelimit's units and their lengths (a month is 30
// days and a year 365, as there).
var units = []struct {
	name string
	d    time.Duration
}{
	{"second", time.Second},
	{"minute", time.Minute},
	{"hour", time.Hour},
	{"day", 24 * time.Hour},
	{"week", 7 * 24 * time.Hour},
	{"month", 30 * 24 * time.Hour},
	{"year", 365 * 24 * time.Hour},
}

// UnitDuration returns the length of an envoy unit name (case-insensitive).
func UnitDuration(unit string) (time.Duration, bool) {
	for _, u := range units {
		if strings.EqualFold(u.name, unit) {
			return u.d, true
		}
	}
	return 0, false
}

// unitOf expresses d as a whole number of the largest unit that divides it.
func unitOf(d time.Duration) (string, int64) {
	for i := len(units) - 1; i >= 0; i-- {
		if d%units[i].d == 0 {
			return units[i].name, int64(d / units[i].d)
		}
	}
	return "", 0
}

// DefaultFailureMode is the failure mode of a rule without failure_mode:
// local. While the store is unreachable each replica decides with its share
// of the limit (sluice.FailLocal), which keeps the service available, as
// open does, and keeps the fleet within a stated bound of the limit, which
// open does not (it admits everything for as long as the outage lasts);
// closed refuses everyone, turning a store outage into an outage of every
// rate-limited route.
const DefaultFailureMode = sluice.FailLocal
