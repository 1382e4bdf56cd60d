// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadPath loads path: a directory as LoadDir does, or one configuration
// file (.yaml or .yml) on its own, as if it were alone in a directory.
func LoadPath(path string, opts ...Option) (*Config, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if info.IsDir() {
		return LoadDir(path, opts...)
	}
	dir, name := filepath.Split(path)
	if !IsConfigFile(name) {
		return nil, fmt.Errorf("config: %s: want a directory or a .yaml or .yml file", path)
	}
	if dir == "" {
		dir = "."
	}
	c, err := load(oneFile{os.DirFS(dir), name}, filepath.Clean(dir), opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// oneFile is a directory that shows only one of its files.
type oneFile struct {
	fs.FS
	name string
}

func (o oneFile) ReadDir(dir string) ([]fs.DirEntry, error) {
	if dir != "." {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	entries, err := fs.ReadDir(o.FS, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() == o.name {
			return []fs.DirEntry{e}, nil
		}
	}
	return nil, nil
}
