package telemetry

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/parleyd/parley/config/section"
)

// DefaultSampleRatio is telemetry.sample_ratio's default: every trace.
const DefaultSampleRatio = 1.0

// Config is the telemetry section of parley's config: OpenTelemetry
// spans of each turn, sent to an OTLP collector (Jaeger, Tempo, an
// OpenTelemetry Collector). Off without an endpoint.
type Config struct {
	OTLP OTLP `yaml:"otlp"`
	// SampleRatio is the share of traces kept, 0 to 1. A trace an API
	// caller began (its traceparent) keeps the caller's choice.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ResourceAttributes are set on every span's resource, such as
	// deployment.environment.
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	// RecordContent puts message and reply text on spans; off, they carry
	// ids, sizes and timings only.
	RecordContent bool `yaml:"record_content"`
}

// OTLP is where spans are sent.
type OTLP struct {
	// Endpoint is the collector's URL: http(s)://host:4318 (OTLP/HTTP;
	// the path defaults to /v1/traces) or grpc://host:4317 (OTLP/gRPC;
	// grpcs:// for TLS). Empty: tracing off.
	Endpoint string `yaml:"endpoint"`
	// Protocol overrides the scheme's choice: "http/protobuf" or "grpc".
	Protocol string `yaml:"protocol"`
}

// Enabled says whether spans are sent anywhere.
func (t Config) Enabled() bool { return t.OTLP.Endpoint != "" }

// SetDefaults fills in the section's absent settings.
func (t *Config) SetDefaults(set section.Set) {
	t.OTLP.Endpoint = strings.TrimSpace(t.OTLP.Endpoint)
	t.OTLP.Protocol = strings.TrimSpace(t.OTLP.Protocol)
	section.Default(&t.SampleRatio, set, "sample_ratio", DefaultSampleRatio)
}

// Check reports the section's problems.
func (t Config) Check(r section.Reporter) {
	if x := t.SampleRatio; x < 0 || x > 1 {
		r.Add("sample_ratio", fmt.Sprintf("%g is out of range; use a share from 0 (no traces) to 1 (every trace), such as 0.1", x))
	}
	if t.OTLP.Endpoint != "" {
		if _, err := ParseEndpoint(t.OTLP.Endpoint, t.OTLP.Protocol); err != nil {
			r.Add("otlp.endpoint", err.Error())
		}
	} else if t.OTLP.Protocol != "" {
		r.Add("otlp.protocol", "set without an endpoint; set telemetry.otlp.endpoint to the collector's address, or remove the protocol")
	}
	for _, k := range slices.Sorted(maps.Keys(t.ResourceAttributes)) {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, " \t") {
			r.Add("resource_attributes."+k, fmt.Sprintf("%q is not an attribute name; use a dotted name without spaces, such as deployment.environment", k))
		}
		if k == "service.name" {
			r.Add("resource_attributes."+k, "service.name is always parley; tell replicas or deployments apart with service.instance.id or deployment.environment")
		}
	}
}
