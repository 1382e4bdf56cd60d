// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"fmt"

	"github.com/sluicehq/sluice/redisstore"
)

// Open checks the URL at once, and never echoes a password; an unreachable
// server is not an error until a call needs it (see the package doc).
func ExampleOpen_badURL() {
	_, err := redisstore.Open("memcached://app:s3cret@cache:11211")
	fmt.Println(err)
	_, err = redisstore.Open("redis+cluster://127.0.0.1:7000,,127.0.0.1:7002")
	fmt.Println(err)
	// Output:
	// redisstore: store URL memcached://app:xxxxx@cache:11211: unknown scheme "memcached" (want redis, rediss, redis+cluster or rediss+cluster)
	// redisstore: store URL redis+cluster://127.0.0.1:7000,,127.0.0.1:7002: an empty host in the seed list
}
