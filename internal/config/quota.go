// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// The quota fields of a rate_limit (sluice extensions):
//
//	rate_limit:
//	  unit: minute
//	  requests_per_unit: 100     # the default, for every key without an override
//	  overridable: true          # a key's limit may be set at runtime (PUT /v1/limits/...)
//	  usage_thresholds: [80, 100] # percentages of the limit counted and logged when crossed
//
// overridable cannot be combined with lease or shards (an overridden key
// decides with a limiter of its own, which holds no lease and has no
// shards), nor set on an unlimited or zero (deny) rate_limit.

// defaultUsageThresholds: DefaultUsageThresholds.
var defaultUsageThresholds = []int{80, 100}

// DefaultUsageThresholds returns the percentages of a rule's limit whose
// crossing is counted and logged when a rule sets no usage_thresholds:
// 80 and 100.
func DefaultUsageThresholds() []int { return append([]int(nil), defaultUsageThresholds...) }

// maxUsageThresholds bounds usage_thresholds (and so a metric's threshold
// label values per rule).
const maxUsageThresholds = 8

// UsageThresholds returns the rule's usage thresholds in percent,
// ascending: usage_thresholds, or DefaultUsageThresholds.
func (r *Rule) UsageThresholds() []int {
	if r.Thresholds != nil {
		return r.Thresholds
	}
	return defaultUsageThresholds
}

// rawQuota is the quota fields as written.
type rawQuota struct {
	overridable     bool
	overridableNode *yaml.Node
	thresholds      []int
	thresholdsNode  *yaml.Node
}

// usageThresholds decodes usage_thresholds: 1 to maxUsageThresholds
// percentages, each from 1 to 100, ascending.
func (p *parser) usageThresholds(n *yaml.Node, field string) []int {
	items := p.list(n, field)
	if n != nil && len(items) == 0 && n.Kind == yaml.SequenceNode {
		p.errorf(n, field, "empty: list 1 to %d percentages, or leave it out for the default %v", maxUsageThresholds, defaultUsageThresholds)
		return nil
	}
	if len(items) > maxUsageThresholds {
		p.errorf(n, field, "%d thresholds: at most %d", len(items), maxUsageThresholds)
		return nil
	}
	out := make([]int, 0, len(items))
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		v, ok, over := p.wholeNumber(it, f)
		if over {
			p.errorf(it, f, "%s: want a percentage from 1 to 100", p.deref(it).Value)
		}
		if !ok {
			return nil
		}
		if v < 1 || v > 100 {
			p.errorf(it, f, "%d: want a percentage from 1 to 100", v)
			return nil
		}
		if len(out) > 0 && int(v) <= out[len(out)-1] {
			p.errorf(it, f, "%d: thresholds must be ascending (after %d)", v, out[len(out)-1])
			return nil
		}
		out = append(out, int(v))
	}
	return out
}

// quota validates the quota fields of r and sets them on rule.
func (p *parser) quota(r *rawLimit, rule *Rule, field string) bool {
	q := &r.quota
	at := func(n *yaml.Node) *yaml.Node {
		if n != nil {
			return n
		}
		return &yaml.Node{Line: r.line}
	}
	if q.thresholdsNode != nil {
		if rule.Unlimited || rule.InFlight != nil {
			p.errorf(at(q.thresholdsNode), field+".usage_thresholds", "only for a rate_limit with a limit")
			return false
		}
		rule.Thresholds = q.thresholds
	}
	if !q.overridable {
		return true
	}
	switch {
	case rule.Unlimited || rule.Deny || rule.InFlight != nil:
		p.errorf(at(q.overridableNode), field+".overridable", "true: only for a rate_limit with a limit (not unlimited, zero or in-flight)")
		return false
	case rule.Lease:
		p.errorf(at(q.overridableNode), field+".overridable", "true: cannot be combined with lease: true (an overridden key decides without a lease)")
		return false
	case rule.Shards > 1:
		p.errorf(at(q.overridableNode), field+".overridable", "true: cannot be combined with shards (an overridden key decides on one key)")
		return false
	}
	rule.Overridable = true
	return true
}
