// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sluicehq/sluice/internal/config"
)

// Watch reloads the configuration in dir whenever the directory changes,
// until ctx ends. It watches the directory itself, not the files, and
// reloads on any event once the directory has been quiet for debounce, so
// editors' save dances, atomic renames and a Kubernetes ConfigMap's
// "..data" symlink swap each cause one reload of the finished state. A bad
// configuration is logged and counted and the one in force stays (see
// ReloadDir). reloaded, if not nil, is called after every reload attempt
// with its result.
//
// A change made after the configuration in force was loaded but before the
// watch began raises no event, so once watching, Watch loads dir once more
// (after debounce) and puts it in force if its files differ from those of
// the configuration in force; if they are the same, nothing is reloaded,
// logged, counted or reported.
func (s *Server) Watch(ctx context.Context, dir string, debounce time.Duration, reloaded func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("server: watch %s: %w", dir, err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("server: watch %s: %w", dir, err)
	}
	s.log.Info("watching the config directory", "dir", dir)
	timer := time.NewTimer(debounce) // the catch-up load
	defer timer.Stop()
	catchUp := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			s.log.Debug("config directory changed", "event", ev.String())
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Warn("config watcher error", "dir", dir, "error", err)
			timer.Reset(debounce)
		case <-timer.C:
			if catchUp {
				catchUp = false
				if !s.dirChanged(dir) {
					continue
				}
			}
			err := s.ReloadDir(dir)
			if reloaded != nil {
				reloaded(err)
			}
		}
	}
}

// dirChanged reports whether loading dir would change the configuration in
// force: its files differ from those loaded, or it does not load.
func (s *Server) dirChanged(dir string) bool {
	c, err := config.LoadDir(dir, s.loadOpts...)
	return err != nil || !c.SameFiles(s.Config())
}
