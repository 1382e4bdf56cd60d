// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestQuotaFields(t *testing.T) {
	c := mustLoad(t, `domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 1000, algorithm: gcra, overridable: true, usage_thresholds: [50, 90, 100]}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
`)
	tenant := c.Match("api", []Entry{{"tenant", "acme"}})
	user := c.Match("api", []Entry{{"user", "u"}})
	if !tenant.Overridable || !slices.Equal(tenant.UsageThresholds(), []int{50, 90, 100}) {
		t.Errorf("tenant: overridable %v, thresholds %v", tenant.Overridable, tenant.UsageThresholds())
	}
	if user.Overridable || user.Thresholds != nil || !slices.Equal(user.UsageThresholds(), []int{80, 100}) || !slices.Equal(DefaultUsageThresholds(), []int{80, 100}) {
		t.Errorf("user: overridable %v, thresholds %v", user.Overridable, user.UsageThresholds())
	}
}

func TestQuotaFieldErrors(t *testing.T) {
	for _, c := range []struct{ limit, want string }{
		{`{unlimited: true, overridable: true}`, `f0.yaml:4: descriptors[0].rate_limit.overridable: true: only for a rate_limit with a limit`},
		{`{unit: second, requests_per_unit: 0, overridable: true}`, `rate_limit.overridable: true: only for a rate_limit with a limit`},
		{`{unit: second, requests_per_unit: 5, lease: true, overridable: true}`, `overridable: true: cannot be combined with lease: true`},
		{`{unit: second, requests_per_unit: 5, shards: 2, overridable: true}`, `overridable: true: cannot be combined with shards`},
		{`{unit: second, requests_per_unit: 5, overridable: 1}`, `overridable: want true or false`},
		{`{unit: second, requests_per_unit: 5, usage_thresholds: [0]}`, `usage_thresholds[0]: 0: want a percentage from 1 to 100`},
		{`{unit: second, requests_per_unit: 5, usage_thresholds: [101]}`, `usage_thresholds[0]: 101: want a percentage`},
		{`{unit: second, requests_per_unit: 5, usage_thresholds: [90, 80]}`, `usage_thresholds[1]: 80: thresholds must be ascending (after 90)`},
		{`{unit: second, requests_per_unit: 5, usage_thresholds: []}`, `usage_thresholds: empty`},
		{`{unit: second, requests_per_unit: 5, usage_thresholds: [1,2,3,4,5,6,7,8,9]}`, `usage_thresholds: 9 thresholds: at most 8`},
		{`{unit: second, requests_per_unit: 5, usage_thresholds: 80}`, `usage_thresholds: want a list`},
		{`{unlimited: true, usage_thresholds: [80]}`, `usage_thresholds: only for a rate_limit with a limit`},
	} {
		_, err := Load(fsOf("domain: api\ndescriptors:\n  - key: k\n    rate_limit: " + c.limit + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.limit, err, c.want)
		}
	}
}

// TestQuotasReadme: the README's Quotas section's configuration loads and
// is what it says.
func TestQuotasReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Quotas\n")
	_, block, ok2 := strings.Cut(sec, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no YAML block in a Quotas section")
	}
	c := mustLoad(t, block)
	r := c.Match("api", []Entry{{"tenant", "acme"}})
	if r == nil || !r.Overridable || r.Policy.Limit != 100 || !slices.Equal(r.UsageThresholds(), []int{80, 100}) {
		t.Errorf("the README's rule: %+v", r)
	}
}
