// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/rlqs"
)

// setupRLQS builds the rate limit quota service (package rlqs) over the
// server's configuration and registers its metrics; RegisterGRPC
// registers it beside RLS.
func (s *Server) setupRLQS() error {
	opts := []rlqs.Option{rlqs.WithLogger(s.log)}
	if b := rlqs.BoardFor(s.base); b != nil {
		opts = append(opts, rlqs.WithBoard(b))
	}
	svc, err := rlqs.New(s.Config, opts...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := s.metrics.registry.Register(svc); err != nil {
		return fmt.Errorf("server: register the RLQS metrics: %w", err)
	}
	s.rlqs = svc
	return nil
}
