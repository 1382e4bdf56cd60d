// SPDX-License-Identifier: Apache-2.0

package server

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// openapiFS holds the OpenAPI 3 document of the HTTP API, written in YAML:
// openapi/sluice.yaml is the document, and every other openapi/*.yaml file
// is a part merged into it at load (buildOpenAPI), so that a new set of
// endpoints brings its own file beside its own code.
//
//go:embed openapi/*.yaml
var openapiFS embed.FS

// openapiBase is the document the parts are merged into.
const openapiBase = "openapi/sluice.yaml"

// openapiDoc is the document as served at GET /v1/openapi.json. New fails
// if it does not build.
var openapiDoc = sync.OnceValues(func() ([]byte, error) { return buildOpenAPI(openapiFS, page) })

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, _ := openapiDoc() // New returned its error
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

// buildOpenAPI returns the document in docs (openapiBase and its parts) as
// JSON, with a path for each of the live page's files in pageFS (page/*,
// but index.html, which is "/"), answering the file with the type its
// extension names (or the base document's ForeignHost 403, as every path
// does).
//
// A part may hold only paths, components (by kind: schemas, responses,
// ...) and tags; a path, component or tag named twice, in the base or in
// parts, is an error, as is anything else in a part.
func buildOpenAPI(docs, pageFS fs.FS) ([]byte, error) {
	doc, err := readYAML(docs, openapiBase)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(docs, "openapi/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if name == openapiBase {
			continue
		}
		part, err := readYAML(docs, name)
		if err != nil {
			return nil, err
		}
		if err := mergePart(doc, part); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	files, err := fs.ReadDir(pageFS, "page")
	if err != nil {
		return nil, err
	}
	paths := map[string]any{}
	for _, f := range files {
		if f.IsDir() || f.Name() == "index.html" {
			continue
		}
		ct, _, _ := strings.Cut(mime.TypeByExtension(path.Ext(f.Name())), ";")
		if ct == "" {
			ct = "*/*"
		}
		paths["/"+f.Name()] = map[string]any{"get": map[string]any{
			"tags":    []any{"page"},
			"summary": "The live page's " + f.Name(),
			"responses": map[string]any{
				"200": map[string]any{
					"description": "The file.",
					"content":     map[string]any{ct: map[string]any{}},
				},
				"403": map[string]any{"$ref": "#/components/responses/ForeignHost"},
			},
		}}
	}
	if err := mergePart(doc, map[string]any{"paths": paths}); err != nil {
		return nil, fmt.Errorf("the page's files: %w", err)
	}
	return json.Marshal(doc)
}

func readYAML(fsys fs.FS, name string) (map[string]any, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// mergePart adds part's paths, components and tags to doc.
func mergePart(doc, part map[string]any) error {
	for k := range part {
		if k != "paths" && k != "components" && k != "tags" {
			return fmt.Errorf("%s: a part holds only paths, components and tags", k)
		}
	}
	if err := mergeNew(doc, part, "paths"); err != nil {
		return err
	}
	if comps, ok := part["components"].(map[string]any); ok {
		if doc["components"] == nil {
			doc["components"] = map[string]any{}
		}
		dc, _ := doc["components"].(map[string]any)
		kinds := make([]string, 0, len(comps))
		for k := range comps {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, kind := range kinds {
			if err := mergeNew(dc, comps, kind); err != nil {
				return fmt.Errorf("components: %w", err)
			}
		}
	}
	if tags, ok := part["tags"].([]any); ok {
		have := map[any]bool{}
		old, _ := doc["tags"].([]any)
		for _, t := range old {
			tm, _ := t.(map[string]any)
			have[tm["name"]] = true
		}
		for _, t := range tags {
			tm, _ := t.(map[string]any)
			if have[tm["name"]] {
				return fmt.Errorf("tags: %v: named twice", tm["name"])
			}
			have[tm["name"]] = true
			old = append(old, t)
		}
		doc["tags"] = old
	}
	return nil
}

// mergeNew adds the entries of src[key] (a map) to dst[key], each of which
// must be new.
func mergeNew(dst, src map[string]any, key string) error {
	from, ok := src[key].(map[string]any)
	if !ok {
		if src[key] != nil {
			return fmt.Errorf("%s: not a map", key)
		}
		return nil
	}
	if dst[key] == nil {
		dst[key] = map[string]any{}
	}
	to, ok := dst[key].(map[string]any)
	if !ok {
		return fmt.Errorf("%s: not a map", key)
	}
	for name, v := range from {
		if _, dup := to[name]; dup {
			return fmt.Errorf("%s: %s: named twice", key, name)
		}
		to[name] = v
	}
	return nil
}
