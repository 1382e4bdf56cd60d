// SPDX-License-Identifier: Apache-2.0

package rlqs_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/rlqs"
)

// Four Envoys want 23, 45, 169 and 338 tokens of a budget of 100: the
// smallest gets what it wants, the others split the rest.
func ExampleDivide() {
	shares := rlqs.Divide(100, []int64{23, 45, 169, 338}, []string{"a", "b", "c", "d"})
	fmt.Println(shares)
	// A stream whose demand is not known yet claims an equal share.
	fmt.Println(rlqs.Divide(100, []int64{10, rlqs.Unknown}, []string{"a", "b"}))
	// Output:
	// [23 26 26 25]
	// [10 90]
}
