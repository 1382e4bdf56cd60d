// SPDX-License-Identifier: Apache-2.0

package bad

import "fmt"

func ExampleGlued() {
	fmt.Println(1)
	// A comment glued to the output line.
	// Output: 1
}

func ExampleAfter() {
	fmt.Println(2)
	// Output: 2

	// A comment after the output.
}

func Example_fine() {
	fmt.Println(3)
	// output: 3
}
