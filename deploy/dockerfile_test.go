// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The Dockerfile builds with make image-binary, runs as the user the
// Deployment expects, and exposes the Deployment's ports.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	_, c := sluiceContainer(t, loadManifests(t))
	for _, want := range []string{
		"make image-binary IMAGE_BINARY=/out/sluice",
		"COPY --from=build /out/sluice /sluice",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER 65532:65532",
		`ENTRYPOINT ["/sluice"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile: no %q", want)
		}
	}
	expose := regexp.MustCompile(`(?m)^EXPOSE (.*)$`).FindStringSubmatch(df)
	if expose == nil {
		t.Fatal("Dockerfile: no EXPOSE")
	}
	for _, p := range c.Ports {
		if !slices.Contains(strings.Fields(expose[1]), strconv.Itoa(int(p.ContainerPort))) {
			t.Errorf("Dockerfile: EXPOSE %s lacks the container port %s (%d)", expose[1], p.Name, p.ContainerPort)
		}
	}
}
