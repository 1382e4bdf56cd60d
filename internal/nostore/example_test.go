// SPDX-License-Identifier: Apache-2.0

package nostore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/nostore"
)

// A wrapper given a nil store uses nostore in its place: a Limiter over it
// refuses, whatever its failure mode.
func Example() {
	var store sluice.Store = nostore.New("wrapper")
	l, _ := sluice.NewLimiter(store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}, sluice.WithFailureMode(sluice.FailOpen))
	d, err := l.Allow(context.Background(), "k")
	fmt.Println(d.Allowed, errors.Is(err, sluice.ErrStoreClosed))
	fmt.Println(err)
	// Output:
	// false true
	// sluice: policy "p": key "k": wrapper: the wrapped store is nil: sluice: store is closed
}
