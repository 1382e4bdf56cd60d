// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sluicehq/sluice/internal/config"
)

// Watch reloads the configuration in dir whenever the directory changes,
// until ctx ends. It watches the directory itself, not the files, and
// reloads on any event of a configuration file (config.IsConfigFile) or of
// a ConfigMap's ".." entries once the directory has been quiet for
// debounce, or at the latest MaxReloadWait (or debounce, if longer) after
// the first change not yet loaded, so that a directory rewritten without
// pause still reloads every second (other files, a log say, are
// ignored), so
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
//
// dir itself may be replaced: removed and made again, renamed over, or, if
// it is a symlink, pointed elsewhere. Watch also watches dir's parent for
// that (if it can), and then watches the new directory and reloads as
// above. While dir is gone, Watch retries every retryGone, and the
// configuration in force stays.
func (s *Server) Watch(ctx context.Context, dir string, debounce time.Duration, reloaded func(error)) error {
	dir = filepath.Clean(dir)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("server: watch %s: %w", dir, err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("server: watch %s: %w", dir, err)
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := w.Add(parent); err != nil {
			s.log.Warn("cannot watch the config directory's parent: if the directory itself is replaced, reloads resume within "+retryGone.String(), "dir", parent, "error", err)
		}
	}
	s.log.Info("watching the config directory", "dir", dir)
	timer := time.NewTimer(debounce) // the catch-up load
	defer timer.Stop()
	due := reloadDue{debounce: debounce, maxWait: max(MaxReloadWait, debounce)}
	catchUp := true
	var retry <-chan time.Time // while dir is gone
	rewatch := func() {
		_ = w.Remove(dir) // the old directory's watch, if it is still there
		if err := w.Add(dir); err != nil {
			if retry == nil {
				s.log.Warn("the config directory is gone; the configuration in force stays until it is back", "dir", dir, "error", err)
			}
			retry = time.After(retryGone)
			return
		}
		if retry != nil {
			s.log.Info("watching the config directory again", "dir", dir)
		}
		retry, catchUp = nil, true
		timer.Reset(debounce)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch {
			case filepath.Dir(ev.Name) == dir && relevant(filepath.Base(ev.Name)):
				s.log.Debug("config directory changed", "event", ev.String())
				timer.Reset(due.change(time.Now()))
			case ev.Name == dir: // the directory itself
				s.log.Debug("config directory replaced", "event", ev.String())
				rewatch()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Warn("config watcher error", "dir", dir, "error", err)
			timer.Reset(due.change(time.Now()))
		case <-retry:
			rewatch()
		case <-timer.C:
			due.fired()
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

// DefaultReloadDebounce is the quiet time sluice serve's Watch waits for:
// long enough for an editor's save or a ConfigMap swap to finish, short
// enough to feel immediate.
const DefaultReloadDebounce = 250 * time.Millisecond

// MaxReloadWait is the longest Watch waits to reload after a change while
// changes keep coming: a file rewritten every 50 ms never leaves the
// directory quiet for the debounce, and was never reloaded.
const MaxReloadWait = time.Second

// reloadDue says when Watch reloads after a change: once no change has come
// for debounce, but no later than maxWait after the first change not yet
// loaded.
type reloadDue struct {
	debounce, maxWait time.Duration
	first             time.Time // the first change since the last reload
	pending           bool
}

// change records a change at now and returns how long from now to reload.
func (d *reloadDue) change(now time.Time) time.Duration {
	if !d.pending {
		d.pending, d.first = true, now
	}
	return max(0, min(d.debounce, d.first.Add(d.maxWait).Sub(now)))
}

// fired records that the reload (or catch-up load) ran.
func (d *reloadDue) fired() { d.pending = false }

// relevant reports whether a change to the entry name of the config
// directory can change the configuration: a configuration file, or a
// Kubernetes ConfigMap's "..data" and "..<timestamp>" entries, which its
// files link through. Other files (a log, an editor's swap file) are not
// watched.
func relevant(name string) bool {
	return config.IsConfigFile(name) || strings.HasPrefix(name, "..")
}

// retryGone is how often Watch looks for a config directory that is gone.
const retryGone = time.Second

// dirChanged reports whether loading dir would change the configuration in
// force: its files differ from those loaded, or it does not load.
func (s *Server) dirChanged(dir string) bool {
	c, err := config.LoadDir(dir, s.loadOpts...)
	return err != nil || !c.SameFiles(s.Config())
}
