// SPDX-License-Identifier: Apache-2.0

package redisstore

import "strconv"

// chargeArgs returns take.lua's cost, dur(cost) ns and fraction fields for
// a charge (sluice.Request.Force) of cost units: the cost marked "!", and
// for the bucket kinds the span the charge moves the TAT by
// (model.Model.ChargeSpan), which is not capped at the burst as a take's is.
func chargeArgs(c *compiled, cost int64) (costArg, durNS, durFrac string) {
	costArg, durNS, durFrac = "!"+strconv.FormatInt(cost, 10), "0", "0"
	if c.kind == "b" {
		ns, frac := c.model.ChargeSpan(cost)
		durNS, durFrac = strconv.FormatInt(ns, 10), strconv.FormatInt(frac, 10)
	}
	return costArg, durNS, durFrac
}
