// SPDX-License-Identifier: Apache-2.0

// Package deploy holds no code: it is the home of sluice's deployment
// examples, and its tests prove each of them with the real decoders.
//
//   - config/: the example rate-limit configuration (domain "edge"); it
//     passes sluice config check.
//   - kubernetes/: Deployment (probes on /healthz and /readyz, resources),
//     Service, PodDisruptionBudget, the ConfigMap mounted as the config
//     directory, and a Redis to share. Decoded strictly into k8s.io/api
//     types; the ConfigMap's files pass the config loader, also through a
//     kubelet-style "..data" symlink mount; the probe paths answer 200 from
//     the image binary started with the Deployment's arguments.
//   - envoy/: a bootstrap wiring the HTTP ratelimit filter and route
//     descriptors to sluice's RLS v3, decoded with protojson into
//     go-control-plane's Bootstrap and passing ValidateAll, every
//     typed_config included; every descriptor it sends matches a rule;
//     the client address it limits on is the TCP peer
//     (use_remote_address), never a client's own X-Forwarded-For.
//   - istio/: the same as an EnvoyFilter, decoded into istio.io/api's type,
//     each patch value decoded as the Envoy type it claims and validated;
//     its comment says how to set numTrustedProxies behind a load balancer.
//   - compose/: Redis, sluice, Envoy and an echo backend for a local try-out,
//     whose services, ports, commands and mounts are checked against each
//     other and against the Envoy bootstrap.
//
// The container image is the repository's Dockerfile; its binary comes from
// make image-binary, which the tests build and check to be static.
package deploy
