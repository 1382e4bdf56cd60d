// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// FuzzCharge: take.lua agrees with the model under any sequence of takes,
// charges and batches of both (storetest.Charges), on a real redis-server
// shared by the fuzz inputs.
func FuzzCharge(f *testing.F) {
	f.Add(uint8(0), []byte("\x00\x00\x00\x9e\x00\x00\x00\x9e\x00\x00\x00\x9e\x00\x00\x00\x9e\x00\x00"))
	f.Add(uint8(3), []byte("\x00\xbf\x00\x01\xc0\x01\xd0\xc7\x48\x05"))
	f.Add(uint8(4), []byte("\x00\x8f\x83\x01\xa0\xff\x08\x81\xc1\x01"))
	f.Add(uint8(5), []byte("\x00\x8f\xa0\x01\xc0\x01\xa0\x01\xff\x3f"))
	c := newClient(f, sluicetest.StartRedis(f))
	f.Fuzz(func(t *testing.T, alg uint8, ops []byte) {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s, err := New(c, WithClock(clock), WithPrefix(fmt.Sprintf("f%d:", harnessSeq.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		storetest.Charges(t, storetest.Harness{Store: s, Clock: clock}, alg, ops)
	})
}
