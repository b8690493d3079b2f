package config

import (
	"testing"

	"github.com/parleyd/parley/telemetry"
)

// The telemetry section: off by default, every trace kept once on, and
// each bad setting named with what to write instead.
func TestTelemetry(t *testing.T) {
	c := mustParse(t, "log:\n  level: info\n", nil)
	if c.Telemetry.Enabled() || c.Telemetry.SampleRatio != telemetry.DefaultSampleRatio || c.Telemetry.RecordContent {
		t.Fatalf("default telemetry = %+v; want off, sample_ratio %v, no content", c.Telemetry, telemetry.DefaultSampleRatio)
	}
	c = mustParse(t, "telemetry:\n  otlp:\n    endpoint: ${OTLP}\n  sample_ratio: 0\n  resource_attributes:\n    deployment.environment: ${ENV_NAME}\n  record_content: true\n",
		map[string]string{"OTLP": " grpc://tempo:4317 ", "ENV_NAME": "staging"})
	if !c.Telemetry.Enabled() || c.Telemetry.OTLP.Endpoint != "grpc://tempo:4317" || c.Telemetry.SampleRatio != 0 ||
		c.Telemetry.ResourceAttributes["deployment.environment"] != "staging" || !c.Telemetry.RecordContent {
		t.Fatalf("telemetry = %+v; want the endpoint trimmed, sample_ratio 0 kept, the attribute from the environment, content on", c.Telemetry)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"ratio above 1", "telemetry:\n  sample_ratio: 1.5\n",
			`parley.yaml:2: telemetry.sample_ratio: 1.5 is out of range; use a share from 0 (no traces) to 1 (every trace), such as 0.1`},
		{"endpoint without a scheme", "telemetry:\n  otlp:\n    endpoint: jaeger:4318\n",
			`parley.yaml:3: telemetry.otlp.endpoint: "jaeger:4318" has no scheme; write http://jaeger:4318 for OTLP/HTTP or grpc://jaeger:4318 for OTLP/gRPC`},
		{"unknown protocol", "telemetry:\n  otlp:\n    endpoint: http://jaeger:4318\n    protocol: thrift\n",
			`parley.yaml:3: telemetry.otlp.endpoint: protocol "thrift" is not one parley speaks; use "http/protobuf" or "grpc", or leave it empty to go by the endpoint's scheme`},
		{"a password in the endpoint", "telemetry:\n  otlp:\n    endpoint: https://u:s3cret@otlp.example.com\n",
			`parley.yaml:3: telemetry.otlp.endpoint: "https://[redacted]@otlp.example.com" holds a user or password, which parley does not send; give the collector's key as a header in OTEL_EXPORTER_OTLP_HEADERS instead`},
		{"protocol without an endpoint", "telemetry:\n  otlp:\n    protocol: grpc\n",
			`parley.yaml:3: telemetry.otlp.protocol: set without an endpoint; set telemetry.otlp.endpoint to the collector's address, or remove the protocol`},
		{"service.name", "telemetry:\n  resource_attributes:\n    service.name: other\n",
			`parley.yaml:3: telemetry.resource_attributes.service.name: service.name is always parley; tell replicas or deployments apart with service.instance.id or deployment.environment`},
		{"record_content not a bool", "telemetry:\n  record_content: sometimes\n",
			`parley.yaml:2: telemetry.record_content: expected true or false, got "sometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, env(nil))
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Error() != tc.want {
				t.Fatalf("problems:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
	if c, _ := ClassOf("telemetry.otlp.endpoint"); c != ReloadRestart {
		t.Error("telemetry.otlp.endpoint reloads live; the tracer is made once, at start")
	}
}
