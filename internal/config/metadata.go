// SPDX-License-Identifier: Apache-2.0

package config

import (
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"
)

// metadata decodes a descriptor's metadata: a mapping with string keys of
// values that protobuf's Struct can carry (the RLS response's
// dynamic_metadata).
func (p *parser) metadata(n *yaml.Node, field string) map[string]any {
	n = p.deref(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want a mapping, got %s", kindName(n))
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		p.errorf(n, field, "%s", yamlMessage(err))
		return nil
	}
	if _, err := structpb.NewStruct(m); err != nil {
		p.errorf(n, field, "%v: want strings, numbers, booleans, nulls, lists and mappings with string keys", err)
		return nil
	}
	return m
}
