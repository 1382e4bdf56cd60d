// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// WithCollector adds c's metrics to those /metrics serves (a store's own
// counts, say).
func WithCollector(c prometheus.Collector) Option {
	return func(s *Server) { s.collectors = append(s.collectors, c) }
}

// registerCollectors registers WithCollector's collectors.
func (s *Server) registerCollectors() error {
	for _, c := range s.collectors {
		if err := s.metrics.registry.Register(c); err != nil {
			return fmt.Errorf("server: register a collector: %w", err)
		}
	}
	return nil
}
