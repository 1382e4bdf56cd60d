// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"net"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rawCodec sends and receives messages as the bytes they are, so a test
// can send what a generated client refuses to marshal.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// rawRequest is a RateLimitRequest for domain with one descriptor of one
// entry, written field by field: value may hold any bytes.
func rawRequest(domain, key, value string) []byte {
	var entry, d, req []byte
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, key)
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendString(entry, value)
	d = protowire.AppendTag(d, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, entry)
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, domain)
	req = protowire.AppendTag(req, 2, protowire.BytesType)
	req = protowire.AppendBytes(req, d)
	return req
}

// TestInvalidUTF8IsAKey sends descriptor values that are not UTF-8 (a \xff
// byte Envoy copied from a header) over a real gRPC connection: each is a
// key like any other, limited, and two different byte strings are two
// keys. grpc-go's own codec answered Internal ("string field contains
// invalid UTF-8"), which Envoy takes as "allow": one byte removed every
// limit of the request.
func TestInvalidUTF8IsAKey(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	h.srv.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ask := func(value string) string {
		t.Helper()
		in := rawRequest("d", "ip", value)
		var out []byte
		if err := conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &in, &out); err != nil {
			t.Fatalf("value %q: %v", value, err)
		}
		var resp rls.RateLimitResponse
		if err := proto.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		return codesOf(&resp)
	}
	for i, c := range []struct{ value, want string }{
		{"\xff", "OK: OK"},
		{"\xff", "OVER: OVER"},
		{"\xfe", "OK: OK"}, // another byte string, another key
		{"\xfe", "OVER: OVER"},
		{"a\xffb", "OK: OK"},
		{"a\xfdb", "OK: OK"},
		{"a\xffb", "OVER: OVER"},
	} {
		if got := ask(c.value); got != c.want {
			t.Errorf("request %d, value %q: %s, want %s", i, c.value, got, c.want)
		}
	}
}

// TestUnmarshalRLSMatchesProto: a request in valid UTF-8, with every field
// set, decodes field by field (decodeRequest, the path a request that is not
// UTF-8 takes) exactly as proto.Unmarshal decodes it.
func TestUnmarshalRLSMatchesProto(t *testing.T) {
	d := desc("a", "b", "c", "")
	d.HitsAddend = wrapperspb.UInt64(3)
	d.IsNegativeHits = true
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: envoytype.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(2)}
	in := &rls.RateLimitRequest{Domain: "dom", HitsAddend: 4, Descriptors: []*rlcommon.RateLimitDescriptor{d, desc("x", "y")}}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got rls.RateLimitRequest
	if err := decodeRequest(b, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, in) {
		t.Errorf("decodeRequest: %v, want %v", &got, in)
	}
	if err := unmarshalRLS([]byte{0x0a, 0x05, 'a'}, &got); err == nil {
		t.Error("a truncated message decoded")
	}
}
