// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"fmt"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registered first: rlsCodec wraps it
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/config"
)

// A descriptor value is whatever bytes Envoy copied from a request (a
// header, a path), and proto3 requires string fields to be UTF-8: grpc-go's
// codec refuses a request with a \xff byte in a value before the service
// sees it, and Envoy, failing open on the error, then admits the request
// under no limit at all. So the service replaces the "proto" codec with one
// that decodes a RateLimitRequest whose strings are not UTF-8 itself, every
// string field as the opaque bytes it holds (a Go string holds any bytes):
// two different byte strings are two different keys, and the request is
// decided like any other. Every other message, and every request that is
// valid UTF-8 (the fast path, unchanged), goes through grpc-go's own codec.
func init() {
	encoding.RegisterCodecV2(rlsCodec{encoding.GetCodecV2("proto")})
}

// rlsCodec is grpc-go's proto codec, but for a RateLimitRequest whose
// strings are not valid UTF-8 (unmarshalRLS), and for the RLS service's
// requests (rlsCall), which it first checks against the request bounds.
type rlsCodec struct{ encoding.CodecV2 }

func (c rlsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	call, isCall := v.(*rlsCall)
	m, ok := v.(*rls.RateLimitRequest)
	if !ok && !isCall {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if isCall {
		if call.refused = overBounds(buf.ReadOnlyData()); call.refused != "" {
			return nil
		}
		call.req = &rls.RateLimitRequest{}
		m = call.req
	}
	return unmarshalRLS(buf.ReadOnlyData(), m)
}

// rlsCall is what the RLS service decodes a request into (shouldRateLimit):
// the request, or, when it is over the request bounds, why it is refused.
// The codec cannot refuse it itself: grpc-go answers a codec's error as
// Internal, and the caller's mistake is InvalidArgument.
type rlsCall struct {
	req     *rls.RateLimitRequest
	refused string
}

// overBounds returns why the RateLimitRequest b is refused when it carries
// more than MaxDescriptors descriptors or a descriptor of more than
// config.MaxDepth entries, and "" otherwise (also for a malformed message,
// which decoding then refuses). It reads the wire format without decoding
// it and allocates nothing: decoding costs about 20 times the message's
// size in descriptors of one short entry (360,000 of them, 3.6 MB, grew
// the heap by 245 MiB before this check), so the count is known before
// anything is built.
func overBounds(b []byte) string {
	descs, deep, entries := 0, -1, 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num != 2 || typ != protowire.BytesType { // not a descriptor
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		d, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if deep < 0 {
			if e := countField(d, 1); e > config.MaxDepth {
				deep, entries = descs, e
			}
		}
		descs++
	}
	if msg := descriptorsBound(descs); msg != "" {
		return msg
	}
	if deep >= 0 {
		return entriesBound(deep, entries)
	}
	return ""
}

// countField counts the length-delimited fields num of the message b (-1
// if b is malformed).
func countField(b []byte, num protowire.Number) int {
	count := 0
	for len(b) > 0 {
		k, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return -1
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(k, typ, b); n < 0 {
			return -1
		}
		b = b[n:]
		if k == num && typ == protowire.BytesType {
			count++
		}
	}
	return count
}

// unmarshalRLS decodes b into m: with proto.Unmarshal, and if that fails
// (a string that is not UTF-8), field by field with every string taken as
// bytes. A message that is malformed in any other way is still an error.
func unmarshalRLS(b []byte, m *rls.RateLimitRequest) error {
	err := proto.Unmarshal(b, m)
	if err == nil {
		return nil
	}
	proto.Reset(m)
	if lerr := decodeRequest(b, m); lerr != nil {
		return err
	}
	return nil
}

var errWireType = errors.New("unexpected wire type")

// fieldsOf calls fn with each field of the message b, its value given as
// raw bytes (length-delimited) or a varint, and skips the other wire types.
func fieldsOf(b []byte, fn func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			raw []byte
			v   uint64
		)
		switch typ {
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue // an unknown field of another type: skipped
		}
		if err := fn(num, typ, raw, v); err != nil {
			return fmt.Errorf("field %d: %w", num, err)
		}
	}
	return nil
}

// want checks that a known field has the wire type its type has.
func want(typ, is protowire.Type) error {
	if typ != is {
		return errWireType
	}
	return nil
}

func decodeRequest(b []byte, m *rls.RateLimitRequest) error {
	return fieldsOf(b, func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error {
		switch num {
		case 1: // domain
			m.Domain = string(raw)
			return want(typ, protowire.BytesType)
		case 2: // descriptors
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			d := &rlcommon.RateLimitDescriptor{}
			m.Descriptors = append(m.Descriptors, d)
			return decodeDescriptor(raw, d)
		case 3: // hits_addend
			m.HitsAddend = uint32(v)
			return want(typ, protowire.VarintType)
		}
		return nil
	})
}

func decodeDescriptor(b []byte, d *rlcommon.RateLimitDescriptor) error {
	return fieldsOf(b, func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error {
		switch num {
		case 1: // entries
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			e := &rlcommon.RateLimitDescriptor_Entry{}
			d.Entries = append(d.Entries, e)
			return fieldsOf(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
				switch num {
				case 1:
					e.Key = string(raw)
				case 2:
					e.Value = string(raw)
				default:
					return nil
				}
				return want(typ, protowire.BytesType)
			})
		case 2: // limit: no strings
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			if d.Limit == nil {
				d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{}
			}
			return proto.UnmarshalOptions{Merge: true}.Unmarshal(raw, d.Limit)
		case 3: // hits_addend
			if err := want(typ, protowire.BytesType); err != nil {
				return err
			}
			if d.HitsAddend == nil {
				d.HitsAddend = &wrapperspb.UInt64Value{}
			}
			return proto.UnmarshalOptions{Merge: true}.Unmarshal(raw, d.HitsAddend)
		case 4: // is_negative_hits
			d.IsNegativeHits = v != 0
			return want(typ, protowire.VarintType)
		}
		return nil
	})
}
