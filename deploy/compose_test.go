// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yamlv3 "gopkg.in/yaml.v3"
)

// composeFile is the part of the Compose file format the example uses;
// decoding rejects any other field.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command   []string `yaml:"command"`
	Volumes   []string `yaml:"volumes"`
	Ports     []string `yaml:"ports"`
	Expose    []string `yaml:"expose"`
	DependsOn []string `yaml:"depends_on"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("compose/docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	d := yamlv3.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	if err := d.Decode(&c); err != nil {
		t.Fatalf("compose/docker-compose.yaml: %v", err)
	}
	return c
}

// mount returns the host path (relative to deploy/) mounted at target.
func (s composeService) mount(target string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return filepath.Join("compose", parts[0]), true
		}
	}
	return "", false
}

// publishes reports whether the service publishes container port p on the
// same host port.
func (s composeService) publishes(p uint32) bool {
	return slices.Contains(s.Ports, fmt.Sprintf("%d:%d", p, p))
}

// reaches reports whether other services can reach port p of s.
func (s composeService) reaches(p uint32) bool {
	return s.publishes(p) || slices.Contains(s.Expose, fmt.Sprint(p))
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"redis", "sluice", "backend", "envoy"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("no service %s", name)
		}
	}
	for name, s := range c.Services {
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("service %s depends on %q, which is not a service", name, d)
			}
		}
		if (s.Image == "") == (s.Build == nil) {
			t.Errorf("service %s: want an image or a build", name)
		}
	}

	// sluice: built from the repository's Dockerfile, with the Kubernetes
	// Deployment's arguments but the compose Redis.
	s := c.Services["sluice"]
	if s.Build == nil {
		t.Fatal("service sluice: no build")
	}
	if _, err := os.Stat(filepath.Join("compose", s.Build.Context, s.Build.Dockerfile)); err != nil {
		t.Errorf("service sluice: build: %v", err)
	}
	_, k8s := sluiceContainer(t, loadManifests(t))
	strip := func(args []string) []string {
		return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--store=") })
	}
	if got, want := strip(s.Command), strip(k8s.Args); !slices.Equal(got, want) {
		t.Errorf("service sluice: command %q, want the Deployment's %q (but --store)", got, want)
	}
	dir, _ := flagValue(s.Command, "config")
	if src, ok := s.mount(dir); !ok || filepath.Clean(src) != "config" {
		t.Errorf("service sluice: --config %s is not deploy/config mounted (%q)", dir, src)
	}
	store, _ := flagValue(s.Command, "store")
	if store != "redis://redis:6379/0" || !c.Services["redis"].reaches(6379) || !slices.Contains(c.Services["redis"].Command, "redis-server") {
		t.Errorf("service sluice: --store %q: want the redis service's redis-server on 6379", store)
	}
	httpAddr, _ := flagValue(s.Command, "http-addr")
	if p := uint32(portOf(t, httpAddr)); !s.publishes(p) {
		t.Errorf("service sluice: the HTTP port %d is not published (%v)", p, s.Ports)
	}

	// envoy: runs deploy/envoy/envoy.yaml, publishes its listener, and the
	// bootstrap's clusters are compose services on the ports it names.
	e := c.Services["envoy"]
	i := slices.Index(e.Command, "-c")
	if i < 0 || i+1 >= len(e.Command) {
		t.Fatalf("service envoy: command %q: no -c", e.Command)
	}
	if src, ok := e.mount(e.Command[i+1]); !ok || filepath.Clean(src) != filepath.Join("envoy", "envoy.yaml") {
		t.Errorf("service envoy: -c %s is not deploy/envoy/envoy.yaml mounted (%q)", e.Command[i+1], src)
	}
	b := loadBootstrap(t)
	for _, l := range b.GetStaticResources().GetListeners() {
		if p := l.GetAddress().GetSocketAddress().GetPortValue(); !e.publishes(p) {
			t.Errorf("service envoy: listener port %d is not published (%v)", p, e.Ports)
		}
	}
	for _, cl := range b.GetStaticResources().GetClusters() {
		for _, le := range cl.GetLoadAssignment().GetEndpoints() {
			for _, ep := range le.GetLbEndpoints() {
				sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
				svc, ok := c.Services[sa.GetAddress()]
				if !ok || !svc.reaches(sa.GetPortValue()) {
					t.Errorf("envoy cluster %s: %s:%d is not a compose service's port", cl.GetName(), sa.GetAddress(), sa.GetPortValue())
				}
				if ok && !slices.Contains(e.DependsOn, sa.GetAddress()) {
					t.Errorf("service envoy: does not depend on %s", sa.GetAddress())
				}
			}
		}
	}
	grpcAddr, _ := flagValue(s.Command, "grpc-addr")
	if !s.reaches(uint32(portOf(t, grpcAddr))) {
		t.Errorf("service sluice: the gRPC port %s is not exposed to envoy", grpcAddr)
	}
}

// The compose decoder rejects fields it does not know.
func TestComposeDecoderIsStrict(t *testing.T) {
	var c composeFile
	d := yamlv3.NewDecoder(strings.NewReader("services: {a: {comand: [x]}}\n"))
	d.KnownFields(true)
	if err := d.Decode(&c); err == nil || !strings.Contains(err.Error(), "comand") {
		t.Errorf("a misspelt field: %v, want an error naming it", err)
	}
}
