package telemetry

import (
	"slices"
	"testing"

	"github.com/parleyd/parley/config/section"
)

// The telemetry section: off and keeping every trace by default, and
// each bad value a problem naming its key.
func TestConfigCheck(t *testing.T) {
	var c Config
	c.SetDefaults(section.Set{})
	var l section.List
	c.Check(&l)
	if c.Enabled() || c.SampleRatio != DefaultSampleRatio || len(l) != 0 {
		t.Fatalf("defaults %+v, problems %v", c, l)
	}

	for _, tc := range []struct {
		name string
		c    Config
		want []string
	}{
		{"ratio", Config{SampleRatio: 2}, []string{"sample_ratio"}},
		{"endpoint", Config{SampleRatio: 1, OTLP: OTLP{Endpoint: "jaeger:4318"}}, []string{"otlp.endpoint"}},
		{"protocol alone", Config{SampleRatio: 1, OTLP: OTLP{Protocol: "grpc"}}, []string{"otlp.protocol"}},
		{"attributes", Config{SampleRatio: 1, ResourceAttributes: map[string]string{"service.name": "x", "a b": "y"}},
			[]string{"resource_attributes.a b", "resource_attributes.service.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l section.List
			tc.c.Check(&l)
			if !slices.Equal(l.Keys(), tc.want) {
				t.Errorf("problems at %v, want %v: %v", l.Keys(), tc.want, l)
			}
		})
	}

	// An explicit 0 keeps no trace.
	c = Config{}
	c.SetDefaults(section.NewSet("telemetry", func(k string) bool { return k == "telemetry.sample_ratio" }))
	if c.SampleRatio != 0 {
		t.Errorf("sample_ratio %v, want the file's 0", c.SampleRatio)
	}
}
