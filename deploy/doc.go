// Package deploy holds the configuration files of the example stack
// (authserver.yaml, stack.env) shared by docker-compose.yml and the
// local-process launcher examples/stack, and tests that keep them consistent
// with each other and with the compose file. The healthcheck subpackage is the
// probe the distroless images run for their compose health checks; the
// grafana subpackage holds the Grafana dashboards of the AS and the gateway.
package deploy
