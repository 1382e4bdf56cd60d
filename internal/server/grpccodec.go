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
// strings are not valid UTF-8 (unmarshalRLS).
type rlsCodec struct{ encoding.CodecV2 }

func (c rlsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rls.RateLimitRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return unmarshalRLS(buf.ReadOnlyData(), m)
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
