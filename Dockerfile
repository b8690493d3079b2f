# parley's container image: a static binary on a distroless base, run as a
# non-root user, its data on the /data volume.
#
#   docker build -t parley .
#   docker run -d -p 8080:8080 -v parley-data:/data -e PARLEY_API_TOKEN=$(openssl rand -hex 32) parley
#
# deploy/check-image-steps runs these build steps without a container
# engine (CI does), and starts the binary as the image would.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The same flags as the README's deployment build. -ldflags -w drops the
# DWARF tables at the link, so -dwarf=false only spares the compiler making
# them: the same machine code, about a tenth less build CPU and memory.
RUN CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w -X main.Version=${VERSION}" -o /out/parley ./cmd/parley \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/parley /usr/local/bin/parley
COPY deploy/container.yaml /etc/parley/parley.yaml
COPY --from=build --chown=65532:65532 /out/data /data
ENV PARLEY_CONFIG=/etc/parley/parley.yaml
VOLUME /data
EXPOSE 8080
USER 65532:65532
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/parley", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/parley"]
CMD ["run"]
