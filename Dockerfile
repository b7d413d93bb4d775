# syntax=docker/dockerfile:1
#
# One image with the authorization server and the example programs, all static
# (CGO_ENABLED=0: modernc.org/sqlite is pure Go), on distroless/static, which
# carries CA certificates and tzdata and runs as an unprivileged user.
#
# No configuration is baked in: give one, or the server refuses to start and
# says what to provide.
#
#   docker build -t mcpauth .
#   docker run --rm -p 127.0.0.1:9000:9000 \
#       -v ./authserver.yaml:/etc/mcpauth/authserver.yaml:ro \
#       -e AUTHSERVER_CONFIG=/etc/mcpauth/authserver.yaml \
#       -e AUTHSERVER_SECRET_FILE=/run/secrets/authserver_secret \
#       mcpauth
#
# The development defaults (open registration, a generated admin password,
# SQLite in the working directory) only with an explicit opt-in:
#
#   docker run --rm -p 127.0.0.1:9000:9000 -e AUTHSERVER_DEV=1 mcpauth
#
# docker-compose.yml runs the whole example stack from this image.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Module downloads are cached in their own layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ENV CGO_ENABLED=0 GOOS=linux
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    mkdir -p /out && \
    go build -trimpath -ldflags='-s -w' -o /out/ \
        ./cmd/authserver \
        ./examples/mcpserver \
        ./examples/downstream \
        ./examples/client \
        ./cmd/mcpgateway \
        ./deploy/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# 65532:65532 is distroless's "nonroot"; its home is writable, so the
# development defaults' sqlite:./authserver.db lands there.
USER nonroot:nonroot
WORKDIR /home/nonroot
# Inside a container the server must listen on every interface for a
# published port (-p) to reach it; this overrides the file's `listen`.
ENV AUTHSERVER_LISTEN=0.0.0.0:9000
EXPOSE 9000 8080 8081 8090
# distroless has no shell or curl: the server probes itself (/readyz, else
# /healthz, on AUTHSERVER_LISTEN or the file's listen).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/authserver", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/authserver"]
CMD ["serve"]
