// SPDX-License-Identifier: Apache-2.0

package config_test

import (
	"fmt"
	"testing/fstest"

	"github.com/sluicehq/sluice/internal/config"
)

func ExampleLoad() {
	fsys := fstest.MapFS{"rides.yaml": {Data: []byte(`
domain: rides
descriptors:
  - key: rider_id
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token-bucket, burst: 10}
  - key: partner
    value: acme
    rate_limit: {period: 10s, requests_per_unit: 500, algorithm: sliding-log}
`)}}
	c, err := config.Load(fsys)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Summary())
	r := c.Match("rides", []config.Entry{{Key: "rider_id", Value: "r-42"}})
	fmt.Println(r.FullKey, r.Policy)
	fmt.Println(c.Match("rides", []config.Entry{{Key: "partner", Value: "other"}}) == nil)

	_, err = config.Load(fstest.MapFS{"bad.yaml": {Data: []byte("domain: rides\ndescriptors:\n  - key: rider_id\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n")}})
	fmt.Println(err)
	// Output:
	// 1 file, 1 domain, 2 rules
	// rides.rider_id rides.rider_id: token-bucket 5/1s burst 10
	// true
	// bad.yaml:4: descriptors[0].rate_limit.unit: "fortnight": want second, minute, hour, day, week, month or year
}

func ExampleMatchValue() {
	for _, v := range []string{"/api/users/v1", "/apiv1", "/api/users/v2"} {
		fmt.Println(v, config.MatchValue("/api*v1", v))
	}
	// Output:
	// /api/users/v1 true
	// /apiv1 true
	// /api/users/v2 false
}

func ExampleWithMergeDomains() {
	fsys := fstest.MapFS{
		"a.yaml": {Data: []byte("domain: api\ndescriptors:\n  - {key: user, rate_limit: {unit: second, requests_per_unit: 5}}\n")},
		"b.yaml": {Data: []byte("domain: api\ndescriptors:\n  - {key: tenant, rate_limit: {unit: minute, requests_per_unit: 100}}\n")},
	}
	if _, err := config.Load(fsys); err != nil {
		fmt.Println(err)
	}
	c, err := config.Load(fsys, config.WithMergeDomains())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Summary())
	// Output:
	// b.yaml:1: domain: "api" is already defined in a.yaml (merging a domain across files is opt-in: sluice serve --merge-domains)
	// 2 files, 1 domain, 2 rules
}
