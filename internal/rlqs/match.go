// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/config"
)

// matcher puts a bucket's entries (a proto map, which has no order) in the
// order of the configuration's descriptor trees: for each rule of the
// domain whose path has the bucket's keys, in configuration order, the
// entries are ordered as that path orders its keys and matched as RLS
// matches a descriptor; the first order under which a rule matches wins.
type matcher struct {
	cfg    *config.Config
	orders map[string][][]string // by domain + sorted keys: key orders
}

func newMatcher(c *config.Config) *matcher {
	m := &matcher{cfg: c, orders: map[string][][]string{}}
	for _, r := range c.Rules() {
		keys := make([]string, len(r.Path))
		seen := map[string]bool{}
		dup := false
		for i, e := range r.Path {
			keys[i] = e.Key
			dup = dup || seen[e.Key]
			seen[e.Key] = true
		}
		if dup { // a bucket (a map) cannot have one key twice
			continue
		}
		sig := signature(r.Domain, keys)
		if !hasOrder(m.orders[sig], keys) {
			m.orders[sig] = append(m.orders[sig], keys)
		}
	}
	return m
}

func hasOrder(orders [][]string, keys []string) bool {
	for _, o := range orders {
		if strings.Join(o, "\x00") == strings.Join(keys, "\x00") {
			return true
		}
	}
	return false
}

// signature names a domain and a set of keys, whatever their order.
func signature(domain string, keys []string) string {
	s := append([]string(nil), keys...)
	sort.Strings(s)
	return domain + "\x00" + strings.Join(s, "\x00")
}

// match returns the rule of a bucket in domain and its entries in the
// order that matched it, or nil.
func (m *matcher) match(domain string, bucket map[string]string) (*config.Rule, []config.Entry) {
	keys := make([]string, 0, len(bucket))
	for k := range bucket {
		keys = append(keys, k)
	}
	for _, o := range m.orders[signature(domain, keys)] {
		es := make([]config.Entry, len(o))
		for i, k := range o {
			es[i] = config.Entry{Key: k, Value: bucket[k]}
		}
		if r := m.cfg.Match(domain, es); r != nil {
			return r, es
		}
	}
	return nil, nil
}

// matchers caches one matcher per configuration.
type matchers struct {
	mu  sync.Mutex
	cur *matcher
}

func (ms *matchers) get(c *config.Config) *matcher {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.cur == nil || ms.cur.cfg != c {
		ms.cur = newMatcher(c)
	}
	return ms.cur
}

// bucketKey names a bucket id injectively: its entries sorted by key, each
// length-prefixed.
func bucketKey(bucket map[string]string) string {
	keys := make([]string, 0, len(bucket))
	for k := range bucket {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := bucket[k]
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// MatchBucket returns the rule of c that a bucket of domain matches (nil:
// none), as the service matches it: see the package documentation.
func MatchBucket(c *config.Config, domain string, bucket map[string]string) *config.Rule {
	r, _ := newMatcher(c).match(domain, bucket)
	return r
}
