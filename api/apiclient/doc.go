// Package apiclient is a Go client of parley's HTTP API, generated from
// the OpenAPI document (api/openapi.yaml) with oapi-codegen. parley's own
// code doesn't use it (cmd/parley talks to a daemon through package
// client); the api tests do, so the document is shown to describe the API
// well enough to generate a working client from it, and
// TestGeneratedClientIsCurrent fails when client.gen.go is older than the
// document.
package apiclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../openapi.yaml
