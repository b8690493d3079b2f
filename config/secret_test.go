package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const password = "hunter2-s3cret"

// holder is how secrets usually travel: in exported struct fields.
type holder struct {
	Name  string
	DB    DSN
	Token Secret
	Ptr   *Secret
}

func TestRedactedThroughFmt(t *testing.T) {
	dsn := DSN("postgres://parley:" + password + "@db/parley")
	sec := Secret(password)
	const dsnShown = "postgres://parley:[redacted]@db/parley"
	tests := []struct {
		name   string
		format string
		arg    any
		want   string
	}{
		{"dsn %v", "%v", dsn, dsnShown},
		{"dsn %s", "%s", dsn, dsnShown},
		{"dsn %+v", "%+v", dsn, dsnShown},
		{"dsn %#v", "%#v", dsn, dsnShown},
		{"dsn %q", "%q", dsn, `"` + dsnShown + `"`},
		{"dsn %x", "%x", dsn, fmt.Sprintf("%x", dsnShown)},
		{"dsn pointer", "%v", &dsn, dsnShown},
		{"secret %v", "%v", sec, "[redacted]"},
		{"secret %s", "%s", sec, "[redacted]"},
		{"secret %+v", "%+v", sec, "[redacted]"},
		{"secret %#v", "%#v", sec, "[redacted]"},
		{"secret %q", "%q", sec, `"[redacted]"`},
		{"secret %x", "%x", sec, fmt.Sprintf("%x", "[redacted]")},
		{"secret %d", "%d", sec, "%!d([redacted])"},
		{"secret width", "%-12s|", sec, "[redacted]  |"},
		{"empty secret", "%v|%q", Secret(""), `|""`},
		{"struct %v", "%v", holder{"n", dsn, sec, &sec}, "{n " + dsnShown + " [redacted] "},
		{"struct %+v", "%+v", holder{"n", dsn, sec, nil}, "{Name:n DB:" + dsnShown + " Token:[redacted] Ptr:<nil>}"},
		{"struct %#v", "%#v", holder{"n", dsn, sec, nil}, `config.holder{Name:"n", DB:` + dsnShown + `, Token:[redacted], Ptr:<nil>}`},
		{"struct pointer %+v", "%+v", &holder{"n", dsn, sec, nil}, "&{Name:n DB:" + dsnShown + " Token:[redacted] Ptr:<nil>}"},
		{"slice %v", "%v", []Secret{sec, ""}, "[[redacted] ]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			if tc.name == "empty secret" {
				got = fmt.Sprintf(tc.format, tc.arg, tc.arg)
			} else {
				got = fmt.Sprintf(tc.format, tc.arg)
			}
			if strings.Contains(got, password) {
				t.Fatalf("Sprintf(%q) leaks the password: %s", tc.format, got)
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("Sprintf(%q) = %s, want %s", tc.format, got, tc.want)
			}
		})
	}
}

func TestRedactedThroughSlog(t *testing.T) {
	dsn := DSN("postgres://parley:" + password + "@db/parley?password=" + password)
	sec := Secret(password)
	cfg := mustParse(t, "database:\n  url: ${DB}\n", map[string]string{"DB": dsn.Reveal()})
	handlers := []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
	}
	for _, h := range handlers {
		t.Run(h.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(h.new(&buf))
			log.Info("database opened", "dsn", dsn, "token", sec, "database", cfg.Database,
				slog.Group("g", "holder", holder{Name: "n", DB: dsn, Token: sec}), "config", cfg)
			out := buf.String()
			if strings.Contains(out, password) {
				t.Fatalf("log leaks the password:\n%s", out)
			}
			if !strings.Contains(out, "postgres://parley:[redacted]@db/parley?password=[redacted]") || !strings.Contains(out, "[redacted]") {
				t.Errorf("log does not show the redacted values:\n%s", out)
			}
		})
	}
}

func TestRedactedThroughEncoders(t *testing.T) {
	sec := Secret(password)
	v := holder{Name: "n", DB: DSN("postgres://u:" + password + "@db/parley"), Token: sec, Ptr: &sec}

	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Name":"n","DB":"postgres://u:[redacted]@db/parley","Token":"[redacted]","Ptr":"[redacted]"}`
	if string(out) != want {
		t.Errorf("json.Marshal = %s, want %s", out, want)
	}
	empty, err := json.Marshal(holder{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Name":"","DB":"","Token":"","Ptr":null}`; string(empty) != want {
		t.Errorf("json.Marshal(empty) = %s, want %s", empty, want)
	}

	cfg := mustParse(t, "database:\n  url: ${DB}\n", map[string]string{"DB": v.DB.Reveal()})
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), password) || !strings.Contains(string(y), "url: postgres://u:[redacted]@db/parley") {
		t.Errorf("yaml.Marshal =\n%s\nwant the url redacted", y)
	}
	if !strings.Contains(string(y), "busy_timeout: 5s") {
		t.Errorf("yaml.Marshal =\n%s\nwant busy_timeout written as 5s", y)
	}
}

func TestDSNErrorsDontLeak(t *testing.T) {
	tests := []struct{ name, url string }{
		{"bad escape in the password", "postgres://u:" + password + "%zz@db/parley"},
		{"bad port", "postgres://u:" + password + "@db:port/parley"},
		{"bad host", "postgres://u:" + password + "@d b/parley"},
		{"control character", "postgres://u:" + password + "\x01@db/parley"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "database:\n  url: ${DB}\n"
			_, err := Parse([]byte(src), testFile, env(map[string]string{"DB": tc.url}))
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Key != "database.url" || ps[0].Line != 2 {
				t.Errorf("problems = %v, want one for database.url at line 2", err)
			}
			if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "zz") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
	t.Run("mapping for the url", func(t *testing.T) {
		_, err := Parse([]byte("database:\n  url: {password: "+password+"}\n"), testFile, nil)
		if want := `parley.yaml:2: database.url: expected a string, got a mapping`; err == nil || err.Error() != want {
			t.Errorf("error = %v, want %s", err, want)
		}
	})
}
