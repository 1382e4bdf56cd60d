// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/shard"
)

// The attributes of store spans.
const (
	attrPolicy    = attribute.Key("sluice.policy")
	attrAlgorithm = attribute.Key("sluice.algorithm")
	attrCost      = attribute.Key("sluice.cost")
	attrAllowed   = attribute.Key("sluice.allowed")
	attrRequests  = attribute.Key("sluice.requests")
)

// Store returns s with a span around every Take, TakeAll and Reset (s
// itself when t is nil). The result is one type that forwards every
// capability the packages above a store look for (sluice.Binder,
// sluice.Refunder, lease.Giver, shard.Keyer, inflight.Semaphore), untraced
// but for Bind's decisions, with each capability's neutral answer when s
// lacks it; so turning tracing on changes no behaviour.
func (t *Tracing) Store(s sluice.Store) sluice.Store {
	if t == nil {
		return s
	}
	return &store{next: s, tracer: t.store}
}

// store traces a sluice.Store.
type store struct {
	next   sluice.Store
	tracer trace.Tracer
}

// Unwrap returns the traced store (serve's RLQS finds Redis through it).
func (s *store) Unwrap() sluice.Store { return s.next }

var (
	_ sluice.Store       = (*store)(nil)
	_ sluice.Binder      = (*store)(nil)
	_ lease.Giver        = (*store)(nil)
	_ shard.Keyer        = (*store)(nil)
	_ inflight.Semaphore = (*store)(nil)
)

// Take implements sluice.Store.
func (s *store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	return s.take(ctx, p, key, cost, func(ctx context.Context) (sluice.Decision, error) { return s.next.Take(ctx, p, key, cost) })
}

// take traces one decision made by do.
func (s *store) take(ctx context.Context, p sluice.Policy, key string, cost int64, do func(context.Context) (sluice.Decision, error)) (sluice.Decision, error) {
	ctx, span := s.tracer.Start(ctx, "sluice.store.Take", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrPolicy.String(p.Name), attrAlgorithm.String(string(p.Algorithm)), attrCost.Int64(cost)))
	defer span.End()
	d, err := do(ctx)
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

// Reset implements sluice.Store.
func (s *store) Reset(ctx context.Context, p sluice.Policy, key string) error {
	ctx, span := s.tracer.Start(ctx, "sluice.store.Reset", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrPolicy.String(p.Name), attrAlgorithm.String(string(p.Algorithm))))
	defer span.End()
	err := s.next.Reset(ctx, p, key)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// Close implements sluice.Store.
func (s *store) Close() error { return s.next.Close() }

// Bind binds p on the wrapped store and traces the bound policy's
// decisions, so a Limiter over a traced store keeps the fast path.
func (s *store) Bind(p sluice.Policy) (sluice.BoundPolicy, error) {
	return &bound{s: s, p: p, next: sluice.Bound(s.next, p)}, nil
}

// bound is a traced binding.
type bound struct {
	s    *store
	p    sluice.Policy
	next sluice.BoundPolicy
}

func (b *bound) Take(ctx context.Context, key string, cost int64) (sluice.Decision, error) {
	return b.s.take(ctx, b.p, key, cost, func(ctx context.Context) (sluice.Decision, error) { return b.next.Take(ctx, key, cost) })
}

// Store returns the traced store (see sluice.Binder).
func (b *bound) Store() sluice.Store { return b.s }

// TakeStamped implements lease.Giver: the wrapped store's, or its Take
// with no stamp (which Give never accepts).
func (s *store) TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error) {
	if g, ok := s.next.(lease.Giver); ok {
		return g.TakeStamped(ctx, p, key, cost)
	}
	d, err := s.Take(ctx, p, key, cost)
	return d, model.State{}, err
}

// Give implements lease.Giver: the wrapped store's, or nothing given back.
func (s *store) Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error) {
	if g, ok := s.next.(lease.Giver); ok {
		return g.Give(ctx, p, key, stamp, units)
	}
	return false, nil
}

// ShardKey implements shard.Keyer: the wrapped store's, or key~i.
func (s *store) ShardKey(p sluice.Policy, key string, i, n int) string {
	if k, ok := s.next.(shard.Keyer); ok {
		return k.ShardKey(p, key, i, n)
	}
	return key + "~" + strconv.Itoa(i)
}

// errNoSemaphore is the in-flight error of a wrapped store without them.
var errNoSemaphore = errors.New("telemetry: the store holds no in-flight slots (not an inflight.Semaphore)")

// Acquire implements inflight.Semaphore.
func (s *store) Acquire(ctx context.Context, name, key, holder string, limit int64, ttl time.Duration) (inflight.Slots, error) {
	if sem, ok := s.next.(inflight.Semaphore); ok {
		return sem.Acquire(ctx, name, key, holder, limit, ttl)
	}
	return inflight.Slots{}, errNoSemaphore
}

// Release implements inflight.Semaphore.
func (s *store) Release(ctx context.Context, name, key, holder string) (inflight.Slots, error) {
	if sem, ok := s.next.(inflight.Semaphore); ok {
		return sem.Release(ctx, name, key, holder)
	}
	return inflight.Slots{}, errNoSemaphore
}

// Extend implements inflight.Semaphore.
func (s *store) Extend(ctx context.Context, name, key, holder string, ttl time.Duration) (inflight.Slots, error) {
	if sem, ok := s.next.(inflight.Semaphore); ok {
		return sem.Extend(ctx, name, key, holder, ttl)
	}
	return inflight.Slots{}, errNoSemaphore
}
