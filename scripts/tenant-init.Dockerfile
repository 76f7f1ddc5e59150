# The one-shot job docker-compose runs to initialise a tenant: it mints a
# tenant administrator's token with the shared secret (AUTH_JWT_SECRET) and
# calls POST /_/tenant. Build from the repository root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/devtoken ./serverkit/cmd/devtoken

FROM curlimages/curl:8.10.1
COPY --from=build /out/devtoken /usr/local/bin/devtoken
