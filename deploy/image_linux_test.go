// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sluicehq/sluice/sluicetest"
)

// buildImageBinary runs make image-binary, as the Dockerfile does, into a
// temporary directory and returns the binary's path.
func buildImageBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not on PATH (the Dockerfile builds with make image-binary): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command("make", "-s", "-C", "..", "image-binary", "IMAGE_BINARY="+bin)
	cmd.Env = append(os.Environ(), "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image-binary: %v\n%s", err, out)
	}
	return bin
}

// The image's binary is static, built without cgo and with -trimpath, it
// runs sluice config check on deploy/config, and started with the
// Deployment's arguments (on loopback ports, the ConfigMap mounted as the
// kubelet does, a real Redis) it answers the Deployment's probe paths.
func TestImageBinary(t *testing.T) {
	bin := buildImageBinary(t)

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has a %v program header: it is dynamically linked", bin, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs shared libraries %v", bin, libs)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux"} {
		if settings[k] != v {
			t.Errorf("%s: build setting %s=%q, want %q", bin, k, settings[k], v)
		}
	}
	if info.Path != "github.com/sluicehq/sluice/cmd/sluice" {
		t.Errorf("%s: main package %s", bin, info.Path)
	}

	// sluice config check, on the example configuration.
	out, err := exec.Command(bin, "config", "check", "config").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "config: ok:") {
		t.Errorf("sluice config check deploy/config: %v\n%s", err, out)
	}

	// sluice serve with the Deployment's arguments.
	m := loadManifests(t)
	d, c := sluiceContainer(t, m)
	checkShutdownFitsGrace(t, bin, d, c)
	cmDir := t.TempDir()
	checkConfigMap(t, m.configMaps["sluice-config"]) // the loader's view
	for name, data := range m.configMaps["sluice-config"].Data {
		if err := os.WriteFile(filepath.Join(cmDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	redis := sluicetest.StartRedis(t)
	args := slices.Clone(c.Args)
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--http-addr="):
			args[i] = "--http-addr=127.0.0.1:0"
		case strings.HasPrefix(a, "--grpc-addr="):
			args[i] = "--grpc-addr=127.0.0.1:0"
		case strings.HasPrefix(a, "--config="):
			args[i] = "--config=" + cmDir
		case strings.HasPrefix(a, "--store="):
			args[i] = "--store=redis://" + redis + "/0"
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	httpAddr := ""
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`msg="sluice serving".* http=http://(\S+)`)
	var logged []string
	for sc.Scan() {
		logged = append(logged, sc.Text())
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			httpAddr = m[1]
			break
		}
	}
	if httpAddr == "" {
		t.Fatalf("sluice serve %q did not start:\n%s", args, strings.Join(logged, "\n"))
	}
	go io.Copy(io.Discard, stderr)
	for _, probe := range []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path} {
		resp, err := http.Get("http://" + httpAddr + probe)
		if err != nil {
			t.Fatalf("probe %s: %v", probe, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("probe %s: %s, want 200", probe, resp.Status)
		}
	}
	// At SIGTERM, the lame duck: /readyz answers 503 while the process
	// still serves (/healthz 200); then it drains and exits 0. Only the
	// order is checked: 503 comes before the exit.
	exited := make(chan error, 1)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() { exited <- cmd.Wait() }()
	get := func(path string) int {
		hc := http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + httpAddr + path)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for ready := true; ready; {
		select {
		case err := <-exited:
			t.Fatalf("sluice serve exited (%v) before %s answered 503: no lame duck", err, c.ReadinessProbe.HTTPGet.Path)
		default:
		}
		switch code := get(c.ReadinessProbe.HTTPGet.Path); code {
		case http.StatusServiceUnavailable:
			ready = false
		case http.StatusOK:
			time.Sleep(10 * time.Millisecond)
		default:
			t.Fatalf("after SIGTERM %s answered %d, want 200 and then 503", c.ReadinessProbe.HTTPGet.Path, code)
		}
	}
	if code := get(c.LivenessProbe.HTTPGet.Path); code != http.StatusOK {
		t.Errorf("in the lame duck %s answered %d, want 200 (the kubelet would kill the pod)", c.LivenessProbe.HTTPGet.Path, code)
	}
	if err := <-exited; err != nil {
		t.Errorf("sluice serve after SIGTERM: %v, want exit 0", err)
	}
}

// checkShutdownFitsGrace: the Deployment's pod, sent SIGTERM, serves out
// its lame duck (/readyz 503 while requests are still served, as the
// Service's endpoints drop it) and its drain within
// terminationGracePeriodSeconds, with the readiness probe failing within
// the lame duck, and with no preStop hook (the image has no shell). The
// flags' defaults are the binary's own, read from its help.
func checkShutdownFitsGrace(t *testing.T, bin string, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	help, err := exec.Command(bin, "help", "serve").Output()
	if err != nil {
		t.Fatal(err)
	}
	duration := func(flag string) time.Duration {
		t.Helper()
		v, ok := flagValue(c.Args, flag)
		if !ok {
			m := regexp.MustCompile(`(?s)\n  --` + flag + ` D.*?\(default ([0-9a-z.]+)[;)]`).FindSubmatch(help)
			if m == nil {
				t.Fatalf("sluice help serve has no default for --%s:\n%s", flag, help)
			}
			v = string(m[1])
		}
		dur, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("--%s %q: %v", flag, v, err)
		}
		return dur
	}
	lameDuck, drain := duration("lame-duck"), duration("shutdown-timeout")
	if lameDuck <= 0 {
		t.Errorf("--lame-duck %v: the pod closes its ports while the Service still sends to it", lameDuck)
	}
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second < lameDuck+drain {
		t.Errorf("terminationGracePeriodSeconds %v: less than --lame-duck %v and --shutdown-timeout %v: the kubelet kills the pod before it drains", grace, lameDuck, drain)
	}
	if p := c.ReadinessProbe; p == nil || time.Duration(p.PeriodSeconds*max(p.FailureThreshold, 1))*time.Second > lameDuck {
		t.Errorf("readinessProbe %+v: does not fail within the lame duck (%v)", p, lameDuck)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Errorf("a preStop hook %+v: the lame duck does its work, and the image has no shell to run one", c.Lifecycle.PreStop)
	}
}
