// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/config"
)

// manifests is every object of deploy/kubernetes, decoded.
type manifests struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	pdbs        map[string]*policyv1.PodDisruptionBudget
}

// decodeStrict decodes YAML into v through JSON, rejecting unknown fields
// (the way kubectl's server-side field validation does).
func decodeStrict(data []byte, v any) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}

// documents splits a multi-document YAML file.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(s, "")
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		configMaps:  map[string]*corev1.ConfigMap{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
	}
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in kubernetes/: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(data) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			var (
				obj  interface{ GetName() string }
				keep func()
			)
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 Deployment":
				o := &appsv1.Deployment{}
				obj = o
				keep = func() { m.deployments[o.Name] = o }
			case "v1 Service":
				o := &corev1.Service{}
				obj = o
				keep = func() { m.services[o.Name] = o }
			case "v1 ConfigMap":
				o := &corev1.ConfigMap{}
				obj = o
				keep = func() { m.configMaps[o.Name] = o }
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				obj = o
				keep = func() { m.pdbs[o.Name] = o }
			default:
				t.Fatalf("%s: document %d: unexpected %s %s", f, i, meta.APIVersion, meta.Kind)
			}
			if err := decodeStrict(doc, obj); err != nil {
				t.Fatalf("%s: document %d (%s): %v", f, i, meta.Kind, err)
			}
			if obj.GetName() == "" {
				t.Errorf("%s: document %d (%s): no metadata.name", f, i, meta.Kind)
			}
			keep()
		}
	}
	return m
}

// The strict decoder is strict: a misspelt field fails.
func TestDecodeStrictRejectsUnknownFields(t *testing.T) {
	err := decodeStrict([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n"), &corev1.Service{})
	if err == nil || !strings.Contains(err.Error(), "selectr") {
		t.Fatalf("decoding a Service with spec.selectr: %v, want an unknown field error", err)
	}
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// portOf returns the port number of a --*-addr value like ":8080".
func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, ok := strings.Cut(addr, ":")
	var n int32
	if _, err := fmt.Sscan(p, &n); !ok || err != nil {
		t.Fatalf("address %q: no port", addr)
	}
	return n
}

// sluiceContainer returns the Deployment "sluice" and its container.
func sluiceContainer(t *testing.T, m manifests) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := m.deployments["sluice"]
	if d == nil {
		t.Fatal("no Deployment sluice")
	}
	for i, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "sluice" {
			return d, &d.Spec.Template.Spec.Containers[i]
		}
	}
	t.Fatal("Deployment sluice has no container sluice")
	return nil, nil
}

// containerPort resolves a probe's or a Service's target port.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func TestKubernetes(t *testing.T) {
	m := loadManifests(t)
	d, c := sluiceContainer(t, m)
	labels := d.Spec.Template.Labels
	if d.Spec.Selector == nil || !matches(d.Spec.Selector.MatchLabels, labels) {
		t.Errorf("Deployment sluice: selector %v does not select its pods %v", d.Spec.Selector, labels)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("container args %q: want sluice serve", c.Args)
	}
	httpAddr, ok1 := flagValue(c.Args, "http-addr")
	grpcAddr, ok2 := flagValue(c.Args, "grpc-addr")
	if !ok1 || !ok2 {
		t.Fatalf("container args %q: want --http-addr and --grpc-addr (the defaults listen on loopback only)", c.Args)
	}
	httpPort, grpcPort := portOf(t, httpAddr), portOf(t, grpcAddr)
	if p, _ := containerPort(c, intstr.FromString("http")); p != httpPort {
		t.Errorf("container port http = %d, --http-addr %s", p, httpAddr)
	}
	if p, _ := containerPort(c, intstr.FromString("grpc")); p != grpcPort {
		t.Errorf("container port grpc = %d, --grpc-addr %s", p, grpcAddr)
	}

	// Probes: liveness on /healthz, readiness on /readyz, both on the HTTP
	// port (that they answer there is TestImageBinary's).
	for _, pr := range []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", pr.name, pr.path)
			continue
		}
		if pr.p.HTTPGet.Path != pr.path {
			t.Errorf("%s: path %q, want %q", pr.name, pr.p.HTTPGet.Path, pr.path)
		}
		if p, ok := containerPort(c, pr.p.HTTPGet.Port); !ok || p != httpPort {
			t.Errorf("%s: port %v is not the HTTP port %d", pr.name, pr.p.HTTPGet.Port.String(), httpPort)
		}
	}

	// Resources: requests and limits of CPU and memory.
	for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := rl[r]; !ok || q.IsZero() {
				t.Errorf("container resources: want %s in requests and limits, got %v", r, c.Resources)
			}
		}
	}
	// The image runs as non-root (distroless's nonroot user).
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod securityContext: want runAsNonRoot and runAsUser 65532 (the image's user)")
	}

	// The config directory: a ConfigMap volume mounted whole (no subPath,
	// which would not receive updates) at --config.
	dir, ok := flagValue(c.Args, "config")
	if !ok {
		t.Fatal("container args: no --config")
	}
	var cmName string
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != dir {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("volume mount %s: subPath %q stops hot reload", vm.Name, vm.SubPath)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
	}
	cm := m.configMaps[cmName]
	if cm == nil {
		t.Fatalf("no ConfigMap volume mounted at --config %s (found %q)", dir, cmName)
	}
	checkConfigMap(t, cm)

	// The store: the Redis Service of redis.yaml.
	store, _ := flagValue(c.Args, "store")
	rs := m.services["sluice-redis"]
	if rs == nil || len(rs.Spec.Ports) != 1 || store != fmt.Sprintf("redis://%s:%d/0", rs.Name, rs.Spec.Ports[0].Port) {
		t.Errorf("--store %q does not name the sluice-redis Service", store)
	}
	rd := m.deployments["sluice-redis"]
	if rd == nil || rs == nil || !matches(rs.Spec.Selector, rd.Spec.Template.Labels) {
		t.Errorf("Service sluice-redis does not select the sluice-redis pods")
	}

	// The Service: gRPC and HTTP to the container's ports, selecting its pods.
	svc := m.services["sluice"]
	if svc == nil {
		t.Fatal("no Service sluice")
	}
	if !matches(svc.Spec.Selector, labels) {
		t.Errorf("Service sluice: selector %v does not select the pods %v", svc.Spec.Selector, labels)
	}
	want := map[string]int32{"grpc": grpcPort, "http": httpPort}
	for _, p := range svc.Spec.Ports {
		cp, ok := containerPort(c, p.TargetPort)
		if !ok || cp != want[p.Name] || p.Port != want[p.Name] {
			t.Errorf("Service port %s: %d -> %s, want %d -> %d", p.Name, p.Port, p.TargetPort.String(), want[p.Name], want[p.Name])
		}
		delete(want, p.Name)
	}
	if len(want) > 0 {
		t.Errorf("Service sluice: missing ports %v", want)
	}

	// The PodDisruptionBudget: selects the pods, keeps one while the
	// Deployment has more.
	pdb := m.pdbs["sluice"]
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget sluice")
	}
	if pdb.Spec.Selector == nil || !matches(pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("PodDisruptionBudget: selector does not select the pods")
	}
	if pdb.Spec.MinAvailable == nil || d.Spec.Replicas == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %v with %v replicas: want at least 1 and fewer than the replicas (or no node can drain)", pdb.Spec.MinAvailable, d.Spec.Replicas)
	}
}

// matches reports whether selector (non-empty) selects labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkConfigMap loads the ConfigMap's files with sluice's loader, from
// memory and from a directory laid out as the kubelet mounts it (files are
// symlinks into a "..data" symlink to a timestamped directory), and checks
// that they are deploy/config's.
func checkConfigMap(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range cm.Data {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	if _, err := config.Load(fsys); err != nil {
		t.Errorf("ConfigMap %s: %v", cm.Name, err)
	}

	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_01_01_00_00_00.000000000")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(ts, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	mounted, err := config.LoadDir(dir)
	if err != nil {
		t.Fatalf("ConfigMap %s mounted as the kubelet does: %v", cm.Name, err)
	}
	example, err := config.LoadDir("config")
	if err != nil {
		t.Fatalf("deploy/config: %v", err)
	}
	if got, want := mounted.Summary(), example.Summary(); got != want {
		t.Errorf("ConfigMap %s: %s; deploy/config: %s", cm.Name, got, want)
	}
	for name, data := range cm.Data {
		file, err := os.ReadFile(filepath.Join("config", name))
		if err != nil || string(file) != data {
			t.Errorf("ConfigMap %s: %s differs from deploy/config/%s (keep them identical)", cm.Name, name, name)
		}
	}
}
