// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// FuzzCharge: memstore agrees with the model under any sequence of takes,
// charges and batches of both (storetest.Charges).
func FuzzCharge(f *testing.F) {
	f.Add(uint8(0), []byte("\x00\x00\x00\x9e\x00\x00\x00\x9e\x00\x00\x00\x9e\x00\x00\x00\x9e\x00\x00"))
	f.Add(uint8(3), []byte("\x00\xbf\x00\x01\xc0\x01\xd0\xc7\x48\x05"))
	f.Add(uint8(4), []byte("\x00\x8f\x83\x01\xa0\xff\x08\x81\xc1\x01"))
	f.Add(uint8(5), []byte("\x00\x8f\xa0\x01\xc0\x01\xa0\x01\xff\x3f"))
	f.Fuzz(func(t *testing.T, alg uint8, ops []byte) {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		defer s.Close()
		storetest.Charges(t, storetest.Harness{Store: s, Clock: clock}, alg, ops)
	})
}

// FuzzBurst: memstore agrees with the model when the requests of one named
// bucket policy come with different bursts (storetest.Bursts), and holds
// exactly the keys whose state has not expired.
func FuzzBurst(f *testing.F) {
	f.Add(uint8(2), []byte("\x00\x1c\x05\x00\x1c\x01\x00\x1c\x02\xc0\x11\x03\x00\x31\x2a\x08\x4f\x04"))
	f.Add(uint8(0), []byte("\x00\x0c\x00\x00\x01\x02\x00\x05\x03\xa5\x21\x07\x00\x3d\xc9"))
	f.Fuzz(func(t *testing.T, alg uint8, ops []byte) {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		defer s.Close()
		storetest.Bursts(t, storetest.Harness{Store: s, Clock: clock, Len: func() int { s.Sweep(); return s.Len() }}, alg, ops)
	})
}

// FuzzLimit: memstore agrees with the model when the requests of one named
// window policy come with different limits (storetest.Limits), and holds
// exactly the keys whose state has not expired.
func FuzzLimit(f *testing.F) {
	f.Add(uint8(0), []byte("\x00\x1c\x05\x00\x1c\x01\x00\x1c\x02\xc0\x11\x03\x00\x31\x2a\x08\x4f\x04"))
	f.Add(uint8(1), []byte("\x00\x0c\x00\x00\x01\x02\x00\x05\x03\xa5\x21\x07\x00\x3d\xc9"))
	f.Add(uint8(2), []byte("\x00\x0f\x06\x00\x0f\x01\x00\x4f\x01\xc0\x21\x05\x00\x35\x2e"))
	f.Fuzz(func(t *testing.T, alg uint8, ops []byte) {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		defer s.Close()
		storetest.Limits(t, storetest.Harness{Store: s, Clock: clock, Len: func() int { s.Sweep(); return s.Len() }}, alg, ops)
	})
}
