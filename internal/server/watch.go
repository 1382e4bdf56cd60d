// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
// dir's path may come to lead elsewhere: dir removed and made again or
// renamed over, or any symlink on its way pointed at another directory
// (envoyproxy/ratelimit's RUNTIME_ROOT swapped, as its deploys reload: a
// --config of root/current/ratelimit/config when root/current is a
// symlink; a ConfigMap's "..data" when dir is a subdirectory of the
// volume). Watch also watches the directory that holds each such entry
// (if it can), and when one changes, follows dir's path again, watches
// the directory it now leads to and loads it as above. While dir is gone,
// Watch retries every retryGone, and the configuration in force stays.
func (s *Server) Watch(ctx context.Context, dir string, debounce time.Duration, reloaded func(error)) error {
	dir = filepath.Clean(dir)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("server: watch %s: %w", dir, err)
	}
	defer w.Close()
	var (
		watching dirPath  // the entries on dir's way and where it leads
		watched  []string // the directories added to w
		warned   = map[string]bool{}
	)
	// unwatchable warns, once a directory, that a directory holding an
	// entry on dir's way cannot be watched.
	unwatchable := func(d, entry string, err error) {
		if !warned[d] {
			warned[d] = true
			s.log.Warn("cannot watch a directory on the config directory's way: a change to it is seen only once the config directory itself is replaced", "dir", d, "entry", entry, "error", err)
		}
	}
	// follow resolves dir and watches what it finds (watchPath), until
	// the path holds still while its watches are set up; err is
	// watchPath's.
	follow := func() (changed bool, err error) {
		before := watching.target
		for range maxFollows {
			for _, d := range watched {
				_ = w.Remove(d) // gone already, if the directory was
			}
			watching, watched, err = watchPath(w, dir, unwatchable)
			if err != nil {
				return false, err
			}
			if now, err := resolveDir(dir); err == nil && now.same(watching) {
				break
			}
		}
		return watching.target != before, nil
	}
	if _, err := follow(); err != nil {
		return fmt.Errorf("server: watch %s: %w", dir, err)
	}
	s.log.Info("watching the config directory", "dir", dir, "resolved", watching.target)
	timer := time.NewTimer(debounce) // the catch-up load
	defer timer.Stop()
	due := reloadDue{debounce: debounce, maxWait: max(MaxReloadWait, debounce)}
	catchUp := true
	var retry <-chan time.Time // while dir is gone
	rewatch := func() {
		changed, err := follow()
		if err != nil {
			if retry == nil {
				s.log.Warn("the config directory is gone; the configuration in force stays until it is back", "dir", dir, "error", err)
			}
			retry = time.After(retryGone)
			return
		}
		switch {
		case retry != nil:
			s.log.Info("watching the config directory again", "dir", dir, "resolved", watching.target)
		case changed:
			s.log.Info("the config directory's path leads elsewhere; watching it there", "dir", dir, "resolved", watching.target)
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
			case watching.on(ev.Name) && ev.Op&(fsnotify.Create|fsnotify.Remove|fsnotify.Rename) != 0:
				// An entry on dir's way made, removed or renamed over
				// (not a chmod or a write of its contents).
				s.log.Debug("config directory's path changed", "event", ev.String())
				rewatch()
			case filepath.Dir(ev.Name) == watching.target && relevant(filepath.Base(ev.Name)):
				s.log.Debug("config directory changed", "event", ev.String())
				timer.Reset(due.change(time.Now()))
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

// maxFollows is how many times Watch sets up the watches of a path that
// keeps changing while it does; past it, Watch keeps the last and the
// catch-up load reads what the path leads to then.
const maxFollows = 4

// dirPath is where a directory's path leads and what can change that:
// target is the directory (every symlink resolved), and entries the names
// the resolution went through that, changed, send it elsewhere: each
// symlink it followed and target itself (removed, made again, renamed
// over). Each entry is a real path (no symlink in its parent), so that an
// event in the directory that holds it names it exactly. When the path
// does not resolve, target is empty and the last entry is the name that is
// missing.
type dirPath struct {
	target  string
	entries []string
}

// on reports whether name is one of p's entries.
func (p dirPath) on(name string) bool { return slices.Contains(p.entries, name) }

// same reports whether p and q are the same path to the same place.
func (p dirPath) same(q dirPath) bool {
	return p.target == q.target && slices.Equal(p.entries, q.entries)
}

// maxLinks is the most symlinks resolveDir follows, as the kernel bounds
// them (Linux's ELOOP past 40).
const maxLinks = 40

// resolveDir follows dir's path one name at a time, as the kernel does
// (".." after a symlink goes to the parent of its target), and returns its
// dirPath.
func resolveDir(dir string) (dirPath, error) {
	var p dirPath
	sep := string(filepath.Separator)
	rest := dir
	if !filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return p, err
		}
		rest = wd + sep + dir
	}
	vol := filepath.VolumeName(rest)
	cur, rest := vol+sep, rest[len(vol):]
	links := 0
	for rest != "" {
		name, after, _ := strings.Cut(rest, sep)
		rest = after
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			p.entries = append(p.entries, next)
			return p, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return p, fmt.Errorf("%s: more than %d symlinks on the way", dir, maxLinks)
		}
		to, err := os.Readlink(next)
		if err != nil {
			return p, err
		}
		if !slices.Contains(p.entries, next) {
			p.entries = append(p.entries, next)
		}
		if filepath.IsAbs(to) {
			v := filepath.VolumeName(to)
			cur, to = v+sep, to[len(v):]
		}
		rest = to + sep + rest
	}
	p.target = cur
	if !slices.Contains(p.entries, cur) {
		p.entries = append(p.entries, cur)
	}
	return p, nil
}

// watchPath resolves dir and adds to w the directory it leads to, and the
// directory that holds each entry on its way (a failure to watch one of
// those goes to unwatchable: a change there goes unseen until dir is
// replaced). When dir does not resolve, or its directory cannot be
// watched, it returns the error, still watching what holds the entries
// found, so that dir's return is seen. It returns what it watches and the
// directories it added.
func watchPath(w *fsnotify.Watcher, dir string, unwatchable func(d, entry string, err error)) (dirPath, []string, error) {
	p, err := resolveDir(dir)
	var added []string
	for _, e := range p.entries {
		d := filepath.Dir(e)
		if d == e || slices.Contains(added, d) {
			continue
		}
		if aerr := w.Add(d); aerr != nil {
			unwatchable(d, e, aerr)
			continue
		}
		added = append(added, d)
	}
	if err != nil {
		return dirPath{entries: p.entries}, added, err
	}
	if !slices.Contains(added, p.target) {
		if err := w.Add(p.target); err != nil {
			return dirPath{entries: p.entries}, added, err
		}
		added = append(added, p.target)
	}
	return p, added, nil
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
