// SPDX-License-Identifier: Apache-2.0

package storetest_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/storetest"
)

// A store's tests run the suite with storetest.Run (see the package doc);
// ShardKey names the store key of one shard of a key, as the shard
// subtests check it.
func ExampleShardKey() {
	s := memstore.New()
	defer s.Close()
	p := sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	for i := range 3 {
		fmt.Println(storetest.ShardKey(s, p, "tenant-7", i, 3))
	}
	// Output:
	// tenant-7~0
	// tenant-7~1
	// tenant-7~2
}
