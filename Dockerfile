# syntax=docker/dockerfile:1
#
# One image with the authorization server and the example programs, all static
# (CGO_ENABLED=0: modernc.org/sqlite is pure Go), on distroless/static, which
# carries CA certificates and tzdata and runs as an unprivileged user.
#
#   docker build -t mcpauth .
#   docker run --rm -p 127.0.0.1:9000:9000 mcpauth serve --config /etc/mcpauth/authserver.yaml
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
        ./deploy/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
COPY deploy/authserver.yaml /etc/mcpauth/authserver.yaml
# 65532:65532 is distroless's "nonroot".
USER nonroot:nonroot
EXPOSE 9000 8080 8081
ENTRYPOINT ["/usr/local/bin/authserver"]
CMD ["serve", "--config", "/etc/mcpauth/authserver.yaml"]
