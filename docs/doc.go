// SPDX-License-Identifier: Apache-2.0

// Package docs holds no code: it is the home of the pictures and longer
// pages README links to, and its tests keep README's Quick start program
// identical to a runnable Example, so that what a newcomer pastes compiles
// and prints what README says.
package docs
