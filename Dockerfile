# syntax=docker/dockerfile:1
# SPDX-License-Identifier: Apache-2.0
#
# The sluice image: one static binary (make image-binary: CGO_ENABLED=0,
# -trimpath) on distroless/static, which has CA certificates and tzdata and
# no shell, running as the unprivileged user 65532.
#
#   docker build -t sluice .
#   docker run --rm -p 8080:8080 -p 8081:8081 -v "$PWD/deploy/config:/etc/sluice:ro" \
#     sluice serve --config=/etc/sluice --http-addr=:8080 --grpc-addr=:8081
#
# Ports: 8080 HTTP (JSON API, /metrics, /healthz, /readyz), 8081 gRPC (Envoy
# RLS v3, gRPC health). The configuration directory is mounted at
# /etc/sluice and reloaded on change. See README "Deploy".

FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH make image-binary IMAGE_BINARY=/out/sluice

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /sluice
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/sluice"]
CMD ["serve", "--config=/etc/sluice", "--http-addr=:8080", "--grpc-addr=:8081"]
