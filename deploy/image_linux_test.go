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
	_, c := sluiceContainer(t, m)
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("sluice serve after SIGTERM: %v, want exit 0", err)
	}
}
