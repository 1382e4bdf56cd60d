// SPDX-License-Identifier: Apache-2.0

package clientip_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/sluicehq/sluice/clientip"
)

// Behind a load balancer in 10.0.0.0/8 that appends to X-Forwarded-For,
// the client is the rightmost address the balancer wrote; what the client
// wrote itself is ignored.
func ExampleNew() {
	ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, "10.0.0.0/8"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []struct{ remote, xff string }{
		{"10.0.0.5:41000", "203.0.113.7"},
		{"10.0.0.5:41000", "198.51.100.1, 203.0.113.7"}, // the client forged the first entry
		{"203.0.113.7:5000", "198.51.100.1"},            // not through the balancer
		{"10.0.0.5:41000", "2001:db8:aa:bb:1:2:3:4"},    // IPv6 keys are /64 prefixes
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		r.Header.Set("X-Forwarded-For", c.xff)
		key, _ := ip.Key(r)
		fmt.Println(key)
	}
	// Output:
	// 203.0.113.7
	// 203.0.113.7
	// 203.0.113.7
	// 2001:db8:aa:bb::/64
}
