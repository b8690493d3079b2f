package whatsapp

import (
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
)

func TestConfigDefaults(t *testing.T) {
	for _, snippet := range []string{"", "{}\n"} {
		a, err := New("wa", yamlDecoder(snippet), adapters.Deps{})
		if err != nil {
			t.Fatalf("%q: %v", snippet, err)
		}
		want := settings{readReceipts: true, presence: true, reconnectMin: 2 * time.Second, reconnectMax: 2 * time.Minute}
		if a.cfg != want {
			t.Fatalf("%q: defaults %+v, want %+v", snippet, a.cfg, want)
		}
		if a.MaxMessageLength() != 4096 {
			t.Fatalf("limit %d", a.MaxMessageLength())
		}
		if ok, detail := a.Health(); ok || detail != "starting" {
			t.Fatalf("health before Start: %v %q", ok, detail)
		}
	}
}

func TestConfigValues(t *testing.T) {
	tests := []struct {
		name, yaml string
		check      func(settings) bool
	}{
		{"device digits", `device: "4915123456789"`, func(s settings) bool { return s.device == "4915123456789" }},
		{"device number as typed", `device: "+49 151 2345-6789"`, func(s settings) bool { return s.device == "4915123456789" }},
		{"device JID", `device: 4915123456789@s.whatsapp.net`, func(s settings) bool { return s.device == "4915123456789" }},
		{"device JID with a device part", `device: "4915123456789:12@s.whatsapp.net"`, func(s settings) bool { return s.device == "4915123456789" }},
		{"device as a YAML number", `device: 4915123456789`, func(s settings) bool { return s.device == "4915123456789" }},
		{"no read receipts", "read_receipts: false", func(s settings) bool { return !s.readReceipts && s.presence }},
		{"no presence", "presence: false", func(s settings) bool { return !s.presence && s.readReceipts }},
		{"reconnect bounds", "reconnect: {min: 500ms, max: 10m}", func(s settings) bool {
			return s.reconnectMin == 500*time.Millisecond && s.reconnectMax == 10*time.Minute
		}},
		{"reconnect min only", "reconnect: {min: 5s}", func(s settings) bool {
			return s.reconnectMin == 5*time.Second && s.reconnectMax == DefaultReconnectMax
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New("wa", yamlDecoder(tc.yaml+"\n"), adapters.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(a.cfg) {
				t.Fatalf("settings %+v", a.cfg)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "token: abc", []string{"whatsapp settings", "token"}},
		{"misspelt key", "read_reciepts: false", []string{"read_reciepts"}},
		{"unknown reconnect key", "reconnect: {initial: 1s}", []string{"initial"}},
		{"wrong type", "presence: maybe", []string{"whatsapp settings", "maybe"}},
		{"device with letters", "device: bob", []string{`device "bob"`, "digits"}},
		{"device with a leading 0", `device: "015123456789"`, []string{"starts with 0", "country code"}},
		{"device too short", `device: "12345"`, []string{"7 to 15 digits"}},
		{"device a group", `device: 120363000000000001@g.us`, []string{"not a phone-number JID"}},
		{"bad duration", "reconnect: {min: soon}", []string{`reconnect.min "soon"`}},
		{"duration too small", "reconnect: {max: 1ms}", []string{"reconnect.max"}},
		{"max below min", "reconnect: {min: 1m, max: 10s}", []string{"reconnect.max 10s is below reconnect.min 1m0s"}},
		{"several problems", "device: x\nreconnect: {min: nope}", []string{`device "x"`, `reconnect.min "nope"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New("wa", yamlDecoder(tc.yaml+"\n"), adapters.Deps{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNewRefusesAnUnknownDialect(t *testing.T) {
	_, err := New("wa", yamlDecoder(""), adapters.Deps{Dialect: "mysql"})
	if err == nil || !strings.Contains(err.Error(), `not "mysql"`) {
		t.Fatalf("error %v", err)
	}
}

func TestRegistered(t *testing.T) {
	a, err := adapters.New("whatsapp", "wa", yamlDecoder("presence: false\n"), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(*Adapter); !ok {
		t.Fatalf("factory made a %T", a)
	}
	if _, ok := a.(adapters.Health); !ok {
		t.Fatal("no Health")
	}
	_, err = adapters.New("whatsapp", "wa", yamlDecoder("nope: 1\n"), adapters.Deps{})
	if err == nil || !strings.Contains(err.Error(), "adapter wa (whatsapp)") {
		t.Fatalf("error %v", err)
	}
}
