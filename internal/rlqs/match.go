// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"crypto/sha256"
	"encoding/base64"
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

// bucketKey names a bucket id: its verbatim key (its entries sorted by
// key, each key and value length-prefixed, so no two bucket ids share one)
// when that is at most maxBucketKey bytes long, else its digest form: '#'
// and the unpadded base64url SHA-256 of the verbatim key (44 bytes), as
// internal/server's storeKey names an RLS descriptor. A verbatim key starts
// with a decimal digit (its first key's length), so no verbatim key is a
// digest form. The key names the bucket's part in its stream, its
// division and the division's records in the store, so what each holds
// per bucket is bounded whatever the bucket's values; only the part's
// BucketId, which Envoy needs back in each assignment, holds them.
func bucketKey(bucket map[string]string) string {
	keys := make([]string, 0, len(bucket))
	n := 0
	for k, v := range bucket {
		keys = append(keys, k)
		n += decimalLen(len(k)) + 1 + len(k) + decimalLen(len(v)) + 1 + len(v)
	}
	sort.Strings(keys)
	b := make([]byte, 0, n)
	for _, k := range keys {
		v := bucket[k]
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	if len(b) <= maxBucketKey {
		return string(b)
	}
	// SHA-256, a cryptographic hash with no seed: every replica sharing a
	// store computes the same key, and no Envoy can make two buckets share
	// a division (and so one budget) on purpose.
	sum := sha256.Sum256(b)
	var d [digestKeyLen]byte
	d[0] = '#'
	base64.RawURLEncoding.Encode(d[1:], sum[:])
	return string(d[:])
}

// maxBucketKey is the longest verbatim bucket key; a longer one is named by
// its digest form (bucketKey). It is internal/server's bound for RLS store
// keys (maxStoreKey): it holds the usual bucket ids verbatim (a route or
// tenant name, a UUID), so their divisions keep their readable names in the
// store.
const maxBucketKey = 64

// digestKeyLen is the length of a bucket key in digest form: '#' and 32
// bytes in unpadded base64.
const digestKeyLen = 1 + (sha256.Size*8+5)/6

func decimalLen(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// MatchBucket returns the rule of c that a bucket of domain matches (nil:
// none), as the service matches it: see the package documentation.
func MatchBucket(c *config.Config, domain string, bucket map[string]string) *config.Rule {
	r, _ := newMatcher(c).match(domain, bucket)
	return r
}
