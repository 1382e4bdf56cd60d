// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/sluicehq/sluice/internal/server"

// adminTokens are the limits API's tokens: those in file (--admin-token-file,
// if set) and SLUICE_ADMIN_TOKEN's (if set). None: the API is off.
func adminTokens(file string) ([]server.AdminToken, error) {
	var out []server.AdminToken
	if file != "" {
		ts, err := server.LoadAdminTokens(file)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	t, ok, err := server.EnvAdminToken()
	if err != nil {
		return nil, err
	}
	if ok {
		out = append(out, t)
	}
	return out, nil
}
