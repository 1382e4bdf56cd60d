// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"sync"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
)

// Each stream has a sender of its own, so that an Envoy that stops reading
// (a Send blocks once its flow-control window is full) holds up only its
// own assignments, never a tick's or another stream's. What waits for the
// sender is an outbox that keeps the latest action of each bucket: it
// holds at most one action per bucket of the stream, however long the
// sender is held up, and sends what is in force now, never a stale one.

// outbox is what a stream's sender has yet to send. Actions are put in the
// order they were decided (a round puts its division's before it lets
// another round of that division start), so the latest of a bucket is the
// one in force.
type outbox struct {
	mu     sync.Mutex
	keys   []string // buckets in the order first queued since the last take
	acts   map[string]*rlqspb.RateLimitQuotaResponse_BucketAction
	closed bool
	wake   chan struct{} // has a value when acts has
}

func newOutbox() *outbox {
	return &outbox{acts: map[string]*rlqspb.RateLimitQuotaResponse_BucketAction{}, wake: make(chan struct{}, 1)}
}

// put queues actions, each replacing the one of its bucket still waiting.
func (o *outbox) put(actions []*rlqspb.RateLimitQuotaResponse_BucketAction) {
	if len(actions) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return // a round's sends to a stream that has just ended
	}
	for _, a := range actions {
		k := bucketKey(a.GetBucketId().GetBucket())
		if _, ok := o.acts[k]; !ok {
			o.keys = append(o.keys, k)
		}
		o.acts[k] = a
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take returns the actions waiting and their buckets' keys, in order, and
// empties the outbox.
func (o *outbox) take() ([]string, []*rlqspb.RateLimitQuotaResponse_BucketAction) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := append([]string(nil), o.keys...)
	out := make([]*rlqspb.RateLimitQuotaResponse_BucketAction, 0, len(keys))
	for _, k := range keys {
		out = append(out, o.acts[k])
		delete(o.acts, k)
	}
	o.keys = o.keys[:0]
	return keys, out
}

// close makes put a no-op.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// send is st's sender: it sends what the outbox holds, one response at a
// time, until quit is closed or a Send fails (then broken has the error,
// for the handler to end the stream with). Only it calls st.ss.Send.
//
// It keeps the token bucket it last sent for each bucket, which is the one
// the Envoy holds (unless it expired), to make sure a changed one replaces
// it: Envoy keeps its token bucket when a new one has the same max_tokens,
// tokens_per_fill and fill_interval nanos (its protoTokenBucketsEq
// compares no more), so one whose fill differs in whole seconds alone
// would leave the old rate in force. Such a one goes in a response after
// a deny-all of its bucket: Envoy applies a response's actions in order
// and publishes the result once, so it replaces its bucket with the
// deny-all, then with the new one, which starts full as any changed one
// does, and no request sees the deny-all.
func (st *stream) send() {
	defer close(st.sent)
	held := map[string]*typev3.TokenBucket{}
	for {
		select {
		case <-st.out.wake:
		case <-st.quit:
			return
		}
		keys, acts := st.out.take()
		if len(acts) == 0 {
			continue
		}
		resp := make([]*rlqspb.RateLimitQuotaResponse_BucketAction, 0, len(acts))
		for i, a := range acts {
			tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
			if old := held[keys[i]]; tb != nil && old != nil && envoyKeeps(old, tb) && !proto.Equal(old, tb) {
				resp = append(resp, blanket(a.GetBucketId(), false, a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration()))
			}
			if tb != nil {
				held[keys[i]] = tb
			} else {
				delete(held, keys[i])
			}
			resp = append(resp, a)
		}
		if err := st.ss.Send(&rlqspb.RateLimitQuotaResponse{BucketAction: resp}); err != nil {
			st.broken <- err
			return
		}
	}
}

// envoyKeeps reports whether an Envoy that holds the token bucket old keeps
// it when sent tb (its protoTokenBucketsEq).
func envoyKeeps(old, tb *typev3.TokenBucket) bool {
	return old.GetMaxTokens() == tb.GetMaxTokens() &&
		old.GetTokensPerFill().GetValue() == tb.GetTokensPerFill().GetValue() &&
		old.GetFillInterval().GetNanos() == tb.GetFillInterval().GetNanos()
}

// deliver queues each stream's actions for its sender.
func deliver(sends map[*stream][]*rlqspb.RateLimitQuotaResponse_BucketAction) {
	for st, acts := range sends {
		st.out.put(acts)
	}
}
