// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// The API's JSON bodies are decoded by encoding/json (decodeJSON) and, for
// /json, by protojson. Both name a value of the wrong type by Go's or
// protobuf's names ("Go struct field CheckRequest.descriptors.entries.value
// of type string"), without where it is in the body, and encoding/json
// without the value. typeErrorText and protoErrorText find the value in the
// body and name it as the client wrote it, with what the field takes:
//
//	descriptors[1].entries[0].value: 7777: want a string

// jsonValue is one value of a JSON document, as walkJSON visits it.
type jsonValue struct {
	// path is where the value is, as a client writes it
	// (descriptors[1].entries[0].value); "" is the whole document.
	path string
	// names are the object keys on the way to the value (its path
	// without the indices); elem: the value is an element of an array.
	names []string
	elem  bool
	// kind is object, array, string, number, bool or null.
	kind string
	// tok is the value's first token: a json.Delim for a container, else
	// the value (a json.Number for a number).
	tok json.Token
}

// walkJSON visits every value of the JSON document b in document order, a
// container before its elements (and these only when visit says descend),
// until visit returns a message, which walkJSON returns: "" when no visit
// did, or b is not JSON.
func walkJSON(b []byte, visit func(v *jsonValue) (msg string, descend bool)) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	msg, _ := walkValue(dec, &jsonValue{}, visit)
	return msg
}

// walkValue reads the value v is of from dec, visits it and, if visit says
// descend, its elements.
func walkValue(dec *json.Decoder, v *jsonValue, visit func(*jsonValue) (string, bool)) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	v.tok, v.kind = tok, jsonKind(tok)
	msg, descend := visit(v)
	open, container := tok.(json.Delim)
	if msg != "" || !container {
		return msg, nil
	}
	if !descend {
		return "", skipRest(dec)
	}
	for i := 0; dec.More(); i++ {
		child := &jsonValue{names: v.names, elem: true, path: v.path + "[" + strconv.Itoa(i) + "]"}
		if open == '{' {
			key, err := dec.Token()
			if err != nil {
				return "", err
			}
			k, _ := key.(string)
			child.names, child.elem = append(v.names[:len(v.names):len(v.names)], k), false
			child.path = k
			if v.path != "" {
				child.path = v.path + "." + k
			}
		}
		if msg, err := walkValue(dec, child, visit); msg != "" || err != nil {
			return msg, err
		}
	}
	_, err = dec.Token() // ] or }
	return "", err
}

// skipRest reads the rest of the container whose opening dec has read.
func skipRest(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
	return nil
}

// jsonKind is the kind of the JSON value tok starts, in encoding/json's
// words (UnmarshalTypeError.Value): object, array, string, number, bool or
// null.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "object"
		}
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

// badValue is the message for the value v, which is not what want says:
// its path, its value (a string quoted and cut, a container by its kind),
// and want.
func badValue(v *jsonValue, want string) string {
	path := v.path
	if path == "" {
		path = "body"
	}
	return path + ": " + shownValue(v.kind, v.tok) + ": " + want
}

// shownValue is how an error shows the JSON value tok of kind.
func shownValue(kind string, tok json.Token) string {
	switch t := tok.(type) {
	case string:
		return strconv.Quote(cut(t, 64))
	case json.Number:
		return cut(t.String(), 64)
	case bool:
		return strconv.FormatBool(t)
	case nil:
		if kind == "null" {
			return "null"
		}
	}
	if kind == "object" || kind == "array" {
		return "an " + kind
	}
	return "a " + kind
}

// typeErrorText is the message for e, which decoding the JSON document b
// failed with: the value it is about, found in b (the first in document
// order under e.Field's names of e.Value's kind, which is the one the
// decoder, reading in that order, stopped at), named as badValue names it.
// Should it not be found, the message names the field by its names alone.
func typeErrorText(b []byte, e *json.UnmarshalTypeError) string {
	var names []string
	if e.Field != "" {
		names = strings.Split(e.Field, ".")
	}
	kind, lit, _ := strings.Cut(e.Value, " ") // "number", or "number 1.5" with its text
	want := wantType(e.Type, kind, lit)
	msg := walkJSON(b, func(v *jsonValue) (string, bool) {
		if len(v.names) > len(names) {
			return "", false
		}
		for i, n := range v.names {
			if !strings.EqualFold(n, names[i]) { // encoding/json matches keys so
				return "", false
			}
		}
		num, _ := v.tok.(json.Number)
		if len(v.names) == len(names) && v.kind == kind && (lit == "" || string(num) == lit) {
			return badValue(v, want), false
		}
		return "", true
	})
	if msg == "" {
		field := e.Field
		if field == "" {
			field = "body"
		}
		msg = field + ": " + shownValue(kind, nil) + ": " + want
	}
	return msg
}

// wantType says what a JSON value must be to decode into a t: "want a
// string". lit is the text of the number of kind that did not fit, if
// known: a whole number then did not fit the integer's range, which is
// said.
func wantType(t reflect.Type, kind, lit string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "want another type"
	}
	whole := kind == "number" && lit != "" && !strings.ContainsAny(lit, ".eE")
	switch t.Kind() {
	case reflect.String:
		return "want a string"
	case reflect.Bool:
		return "want true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if whole {
			return wantInteger(t.Kind() <= reflect.Int64, t.Bits())
		}
		return "want an integer"
	case reflect.Float32, reflect.Float64:
		return "want a number"
	case reflect.Slice, reflect.Array:
		return "want an array"
	case reflect.Struct, reflect.Map:
		return "want an object"
	}
	return "want " + t.Kind().String()
}

// wantInteger says what an integer of so many bits, signed or not, takes.
func wantInteger(signed bool, bits int) string {
	if signed {
		return fmt.Sprintf("want an integer from %d to %d", -(int64(1) << (bits - 1)), int64(uint64(1)<<(bits-1)-1))
	}
	return fmt.Sprintf("want an integer from 0 to %d", uint64(math.MaxUint64)>>(64-bits))
}

// fitsInteger reports whether the number text (JSON's, or in a string, as
// protojson also takes it: "1e2" is 100) is an integer of so many bits,
// signed or not.
func fitsInteger(text string, signed bool, bits int) bool {
	var err error
	if signed {
		_, err = strconv.ParseInt(text, 10, bits)
	} else {
		_, err = strconv.ParseUint(text, 10, bits)
	}
	if err == nil {
		return true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) {
		return false
	}
	if signed {
		return f >= -math.Ldexp(1, bits-1) && f < math.Ldexp(1, bits-1)
	}
	return f >= 0 && f < math.Ldexp(1, bits)
}

// protoErrorText is the message for the value of the JSON document b that
// protojson refuses to decode into a message md: the first value, in
// document order, that is not of its field's type (badValue). It is ""
// when none is: protojson's own error then says what is wrong (an unknown
// field, a syntax error, a value of a well-known type or in a map, which
// this does not check).
func protoErrorText(b []byte, md protoreflect.MessageDescriptor) string {
	return walkJSON(b, func(v *jsonValue) (string, bool) {
		fd, ok := protoField(md, v.names)
		switch {
		case !ok || v.kind == "null": // null leaves a field unset
			return "", false
		case fd == nil: // the document
			if v.kind != "object" {
				return badValue(v, "want an object"), false
			}
			return "", true
		case fd.IsMap():
			return "", false
		case fd.IsList() && !v.elem:
			if v.kind != "array" {
				return badValue(v, "want an array"), false
			}
			return "", true
		}
		if want := protoWant(fd, v); want != "" {
			return badValue(v, want), false
		}
		return "", v.kind == "object"
	})
}

// protoField returns the field of md that a value under the object keys
// names is of (nil: the document itself), or false when there is none to
// check: a name md does not have, or a value inside a map or a well-known
// type.
func protoField(md protoreflect.MessageDescriptor, names []string) (protoreflect.FieldDescriptor, bool) {
	var fd protoreflect.FieldDescriptor
	for _, n := range names {
		if fd != nil {
			if fd.Message() == nil || fd.IsMap() || wellKnown(fd.Message()) {
				return nil, false
			}
			md = fd.Message()
		}
		fd = md.Fields().ByJSONName(n)
		if fd == nil {
			fd = md.Fields().ByName(protoreflect.Name(n))
		}
		if fd == nil {
			return nil, false
		}
	}
	return fd, true
}

// wellKnown reports whether md is one of protobuf's well-known types, which
// protojson writes in their own forms (a wrapper as its value, a Duration
// as a string, ...).
func wellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// wrapper reports whether md is one of protobuf's wrappers of a scalar
// (google.protobuf.UInt64Value, ...), which protojson writes as the scalar
// (its field "value").
func wrapper(md protoreflect.MessageDescriptor) bool {
	return wellKnown(md) && strings.HasSuffix(string(md.Name()), "Value") && md.Fields().Len() == 1 && md.Fields().ByName("value") != nil
}

// protoWant says what v, a value of field fd (an element, for a list), must
// be, or "" when it is that (or this does not tell).
func protoWant(fd protoreflect.FieldDescriptor, v *jsonValue) string {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		if v.kind != "string" {
			return "want a string"
		}
	case protoreflect.BoolKind:
		if v.kind != "bool" {
			return "want true or false"
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if v.kind != "number" && v.kind != "string" {
			return "want a number"
		}
	case protoreflect.EnumKind:
		if v.kind == "number" {
			return ""
		}
		values := fd.Enum().Values()
		if s, ok := v.tok.(string); !ok || values.ByName(protoreflect.Name(s)) == nil {
			names := make([]string, values.Len())
			for i := range names {
				names[i] = string(values.Get(i).Name())
			}
			return "want one of " + strings.Join(names, ", ")
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		switch {
		case wrapper(md):
			return protoWant(md.Fields().ByName("value"), v)
		case !wellKnown(md) && v.kind != "object":
			return "want an object"
		}
	default: // the integers, which protojson also takes as strings
		signed, bits := protoInteger(fd.Kind())
		var text string
		switch t := v.tok.(type) {
		case json.Number:
			text = string(t)
		case string:
			text = t
		}
		if text == "" || !fitsInteger(text, signed, bits) {
			return wantInteger(signed, bits)
		}
	}
	return ""
}

// protoInteger is whether the integer kind k is signed, and its bits.
func protoInteger(k protoreflect.Kind) (signed bool, bits int) {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return true, 32
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return false, 32
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return false, 64
	}
	return true, 64
}
