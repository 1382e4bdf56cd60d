// SPDX-License-Identifier: Apache-2.0

package server

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// reloadsDuring runs Watch's timing (reloadDue, and a timer reset on every
// change) over changes every `every` for `span` on a virtual clock, and
// returns the times of the reloads, from the first change.
func reloadsDuring(every, span time.Duration) []time.Duration {
	due := reloadDue{debounce: DefaultReloadDebounce, maxWait: max(MaxReloadWait, DefaultReloadDebounce)}
	var (
		reloads  []time.Duration
		deadline time.Duration = -1 // the timer; -1: stopped
	)
	for now := time.Duration(0); now <= span+time.Minute; now += time.Millisecond {
		if deadline >= 0 && now >= deadline {
			due.fired()
			reloads = append(reloads, now)
			deadline = -1
		}
		if now <= span && now%every == 0 {
			deadline = now + due.change(time.Unix(0, 0).Add(now))
		}
	}
	return reloads
}

// TestReloadWhileWritten: a file rewritten every 50 ms for 10 s is
// reloaded at least once every MaxReloadWait while the writes go on, and
// once after they stop. Watch waited for 250 ms of quiet, with no longest
// wait: it reloaded only after the writes stopped.
func TestReloadWhileWritten(t *testing.T) {
	reloads := reloadsDuring(50*time.Millisecond, 10*time.Second)
	if len(reloads) < 10 {
		t.Fatalf("%d reloads in 10 s of writes every 50 ms: %v", len(reloads), reloads)
	}
	prev := time.Duration(0)
	for _, r := range reloads {
		if r-prev > MaxReloadWait+50*time.Millisecond {
			t.Errorf("reloads at %v and %v: more than %v apart while writes went on", prev, r, MaxReloadWait)
		}
		prev = r
	}
	if last := reloads[len(reloads)-1]; last != 10*time.Second+DefaultReloadDebounce {
		t.Errorf("last reload at %v, want the debounce after the last write, %v", last, 10*time.Second+DefaultReloadDebounce)
	}
	// One change alone waits only the debounce.
	if r := reloadsDuring(time.Hour, 0); len(r) != 1 || r[0] != DefaultReloadDebounce {
		t.Errorf("one change: reloads %v", r)
	}
}

// TestWatcherFollowsSwapsOnTheWay: a symlink on the way to the config
// directory, not the directory itself, is pointed elsewhere:
// envoyproxy/ratelimit's runtime layout, --config
// root/current/ratelimit/config with root/current a symlink that a deploy
// swaps to the next version (its default way to reload: "Symlink
// RUNTIME_ROOT to a different directory", its README), and a ConfigMap
// volume whose config/ subdirectory links through "..data", which
// Kubernetes swaps. Watch watched the directory as it resolved at the
// start (and its parent by name), so the swap raised no event it saw: the
// old configuration stayed in force, silently, until the old version's
// directory was deleted. Now it follows the path to the new directory,
// loads it, and watches it there.
func TestWatcherFollowsSwapsOnTheWay(t *testing.T) {
	yamlOf := func(n int) string {
		return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + itoa(n) + "}\n"
	}
	for _, tc := range []struct {
		name string
		dir  string                      // what Watch is given, under root
		make func(root, v string, n int) // version v, with limit n
		link func(root, v string)        // points the path at version v
	}{
		{"RUNTIME_ROOT symlink", "current/ratelimit/config",
			func(root, v string, n int) {
				d := filepath.Join(root, v, "ratelimit", "config")
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				writeFiles(t, d, map[string]string{"a.yaml": yamlOf(n)})
			},
			func(root, v string) { swapLink(t, v, filepath.Join(root, "current")) }},
		{"ConfigMap subdirectory through ..data", "config",
			func(root, v string, n int) {
				d := filepath.Join(root, ".."+v, "config")
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				writeFiles(t, d, map[string]string{"a.yaml": yamlOf(n)})
			},
			func(root, v string) {
				swapLink(t, ".."+v, filepath.Join(root, "..data"))
				if _, err := os.Lstat(filepath.Join(root, "config")); err != nil {
					swapLink(t, "..data/config", filepath.Join(root, "config"))
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil)
			root := t.TempDir()
			dir := filepath.Join(root, tc.dir)
			tc.make(root, "v1", 1)
			tc.link(root, "v1")
			if err := h.srv.ReloadDir(dir); err != nil {
				t.Fatal(err)
			}
			limitOf := func() uint32 {
				return h.peek(t, "d", desc("k", "v")).Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
			}
			results := h.watch(t, dir)
			// waitFor waits (bounded) for the limit to be n, consuming
			// reload results; each rewrites dir's file to n first, if
			// not nil, until a reload puts it in force.
			waitFor := func(n uint32, rewrite func()) {
				t.Helper()
				deadline := time.After(20 * time.Second)
				for limitOf() != n {
					if rewrite != nil {
						rewrite()
					}
					select {
					case <-results:
					case <-deadline:
						t.Fatalf("no reload to limit %d (now %d)", n, limitOf())
					}
				}
			}
			// A reload seen (the catch-up's or an event's) means the
			// watch is set up and its catch-up load done, so that what
			// follows is seen only by following the swap.
			waitFor(2, func() { writeFiles(t, dir, map[string]string{"a.yaml": yamlOf(2)}) })
			tc.make(root, "v2", 5)
			tc.link(root, "v2")
			waitFor(5, nil)
			// And it watches the new directory.
			writeFiles(t, dir, map[string]string{"a.yaml": yamlOf(6)})
			waitFor(6, nil)
			if got, err := filepath.EvalSymlinks(dir); err != nil || !strings.Contains(got, "v2") {
				t.Fatalf("dir resolves to %s, %v", got, err)
			}
		})
	}
}

// swapLink points the symlink at to to target, atomically (a new link
// renamed over the old, as ln -sfn and Kubernetes do).
func swapLink(t *testing.T, target, at string) {
	t.Helper()
	tmp := at + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, at); err != nil {
		t.Fatal(err)
	}
}

// TestResolveDir: what Watch watches for a path: where it leads, and each
// symlink on the way (a relative one, one whose target goes up with "..",
// an absolute one) with the directory itself last; a missing name is the
// last entry of a path that does not resolve.
func TestResolveDir(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"v1/ratelimit/config", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"current":  "v1",                                // relative
		"up":       "other/../current/ratelimit",        // through "..", then another link
		"abs":      filepath.Join(root, "up", "config"), // absolute
		"dangling": "missing",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	j := func(p ...string) string { return filepath.Join(append([]string{root}, p...)...) }
	target := j("v1", "ratelimit", "config")
	for _, tc := range []struct {
		dir     string
		entries []string
	}{
		{j("v1", "ratelimit", "config"), []string{target}},
		{j("current", "ratelimit", "config"), []string{j("current"), target}},
		{j("up", "config"), []string{j("up"), j("current"), target}},
		{j("abs"), []string{j("abs"), j("up"), j("current"), target}},
		{j("current", "ratelimit", "..", "ratelimit", "config"), []string{j("current"), target}},
	} {
		p, err := resolveDir(tc.dir)
		if err != nil || p.target != target || !slices.Equal(p.entries, tc.entries) {
			t.Errorf("resolveDir(%s) = %s %v, %v; want %s %v", tc.dir, p.target, p.entries, err, target, tc.entries)
		}
	}
	p, err := resolveDir(j("dangling", "config"))
	if err == nil || p.target != "" || !slices.Equal(p.entries, []string{j("dangling"), j("missing")}) {
		t.Errorf("dangling: %s %v, %v", p.target, p.entries, err)
	}
}
