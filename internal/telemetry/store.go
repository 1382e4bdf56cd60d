// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// The attributes of store spans.
const (
	attrPolicy    = attribute.Key("sluice.policy")
	attrAlgorithm = attribute.Key("sluice.algorithm")
	attrCost      = attribute.Key("sluice.cost")
	attrAllowed   = attribute.Key("sluice.allowed")
	attrRequests  = attribute.Key("sluice.requests")
)

// Store returns s with a span around every call (s itself when t is nil).
// The result implements sluice.Resetter when s does.
func (t *Tracing) Store(s sluice.Store) sluice.Store {
	if t == nil {
		return s
	}
	ts := &store{next: s, tracer: t.store}
	r, ok := s.(sluice.Resetter)
	if !ok {
		return ts
	}
	rs := &resetStore{store: ts, reset: r}
	g, gok := s.(sluice.Giver)
	sem, sok := s.(sluice.Semaphore)
	if !gok || !sok {
		return rs
	}
	// The optional interfaces serve and the Limiter look for (leases,
	// in-flight limits, shard keys) pass through untraced, so turning
	// tracing on changes no behaviour. memstore and redisstore have all of
	// them but ShardKeyer, which redisstore alone has.
	fs := &fullStore{resetStore: rs, Giver: g, Semaphore: sem}
	if k, ok := s.(sluice.ShardKeyer); ok {
		return &shardStore{fullStore: fs, ShardKeyer: k}
	}
	return fs
}

// fullStore traces a store that can reset keys, and passes leases
// (Giver) and in-flight slots (Semaphore) through.
type fullStore struct {
	*resetStore
	sluice.Giver
	sluice.Semaphore
}

// shardStore is a fullStore that also chooses shard keys.
type shardStore struct {
	*fullStore
	sluice.ShardKeyer
}

// store traces a sluice.Store.
type store struct {
	next   sluice.Store
	tracer trace.Tracer
}

// Unwrap returns the traced store (serve's RLQS finds Redis through it).
func (s *store) Unwrap() sluice.Store { return s.next }

// Take implements sluice.Store.
func (s *store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	ctx, span := s.tracer.Start(ctx, "sluice.store.Take", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrPolicy.String(p.Name), attrAlgorithm.String(string(p.Algorithm)), attrCost.Int64(cost)))
	defer span.End()
	d, err := s.next.Take(ctx, p, key, cost)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return d, err
	}
	span.SetAttributes(attrAllowed.Bool(d.Allowed))
	return d, nil
}

// TakeAll implements sluice.Store.
func (s *store) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	ctx, span := s.tracer.Start(ctx, "sluice.store.TakeAll", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrRequests.Int(len(reqs))))
	defer span.End()
	if err := s.next.TakeAll(ctx, reqs, out); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	allowed := true
	for _, d := range out {
		allowed = allowed && d.Allowed
	}
	span.SetAttributes(attrAllowed.Bool(allowed))
	return nil
}

// resetStore traces a store that can also reset keys.
type resetStore struct {
	*store
	reset sluice.Resetter
}

// Reset implements sluice.Resetter.
func (s *resetStore) Reset(ctx context.Context, p sluice.Policy, key string) error {
	ctx, span := s.tracer.Start(ctx, "sluice.store.Reset", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrPolicy.String(p.Name), attrAlgorithm.String(string(p.Algorithm))))
	defer span.End()
	err := s.reset.Reset(ctx, p, key)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

var _ sluice.Resetter = (*resetStore)(nil)
