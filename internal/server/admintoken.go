// SPDX-License-Identifier: Apache-2.0

package server

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
)

// AdminToken is one bearer token of the admin API (the limits API), with a
// name the change log uses for whoever presents it.
type AdminToken struct {
	Name  string
	Token string
}

// WithAdminTokens turns on the limits API, for requests with one of tokens
// as their bearer token. Without it the API answers 403.
func WithAdminTokens(tokens ...AdminToken) Option {
	return func(s *Server) {
		for _, t := range tokens {
			if t.Name == "" {
				sum := sha256.Sum256([]byte(t.Token))
				t.Name = fmt.Sprintf("sha256:%x", sum[:4])
			}
			s.quota.tokens = append(s.quota.tokens, adminToken{name: t.Name, sum: sha256.Sum256([]byte(t.Token))})
		}
	}
}

// AdminTokenEnv is the environment variable serve reads an admin token
// from (named "env" in the change log).
const AdminTokenEnv = "SLUICE_ADMIN_TOKEN"

// LoadAdminTokens reads admin tokens from a file: one per line, either the
// token alone (named by the first 8 hex digits of its SHA-256, "sha256:…")
// or a name, a space and the token. Blank lines and lines starting with #
// are skipped. A token shorter than 16 bytes is refused.
func LoadAdminTokens(path string) ([]AdminToken, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admin token file: %w", err)
	}
	var out []AdminToken
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t := AdminToken{Token: line}
		if name, tok, ok := strings.Cut(line, " "); ok {
			t = AdminToken{Name: name, Token: strings.TrimSpace(tok)}
		}
		if t, err = namedToken(t); err != nil {
			return nil, fmt.Errorf("admin token file %s:%d: %w", path, i+1, err)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("admin token file %s: no token in it", path)
	}
	return out, nil
}

// EnvAdminToken returns the token in AdminTokenEnv, named "env", if set.
func EnvAdminToken() (AdminToken, bool, error) {
	v := strings.TrimSpace(os.Getenv(AdminTokenEnv))
	if v == "" {
		return AdminToken{}, false, nil
	}
	t, err := namedToken(AdminToken{Name: "env", Token: v})
	if err != nil {
		return t, false, fmt.Errorf("%s: %w", AdminTokenEnv, err)
	}
	return t, true, nil
}

// minTokenLen is the shortest admin token accepted.
const minTokenLen = 16

func namedToken(t AdminToken) (AdminToken, error) {
	if len(t.Token) < minTokenLen {
		return t, fmt.Errorf("a token of %d bytes: want at least %d", len(t.Token), minTokenLen)
	}
	if t.Name == "" {
		sum := sha256.Sum256([]byte(t.Token))
		t.Name = fmt.Sprintf("sha256:%x", sum[:4])
	}
	return t, nil
}

type adminToken struct {
	name string
	sum  [sha256.Size]byte
}
