package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const longSecret = "3f9a1c0e7b2d4a6f8e1c3b5d7f9a0c2e"

func TestWeakSecrets(t *testing.T) {
	tests := []struct {
		name, src string
		vars      map[string]string
		want      string // "" for no problem
	}{
		{"32-byte token", "http:\n  tokens: [\"" + longSecret + "\"]\n", nil, ""},
		{"token from the environment", "http:\n  tokens: [\"${PARLEY_API_TOKEN}\"]\n", map[string]string{"PARLEY_API_TOKEN": longSecret}, ""},
		{"short token", "http:\n  tokens: [\"test-token-0123456789\"]\n", nil,
			`parley.yaml:2: http.tokens[0]: is 21 bytes, too short to resist guessing; use at least 32 random bytes; make one with "openssl rand -hex 32" and set it from the environment, such as "${PARLEY_API_TOKEN}"`},
		{"empty token", "http:\n  tokens: [\"${PARLEY_API_TOKEN:-}\"]\n", nil,
			`parley.yaml:2: http.tokens[0]: is 0 bytes, too short to resist guessing`},
		{"placeholder token", "http:\n  tokens: [\"change-me-to-a-long-secret\"]\n", nil,
			`parley.yaml:2: http.tokens[0]: is the placeholder parley's docs show, which anyone can read; make one with "openssl rand -hex 32"`},
		{"no callback secret", "http:\n  callback_secret: ${PARLEY_CALLBACK_SECRET:-}\n", nil, ""},
		{"short callback secret", "http:\n  callback_secret: 0123456789abcdef\n", nil,
			`parley.yaml:2: http.callback_secret: is 16 bytes, too short to resist guessing; use at least 32 random bytes; make one with "openssl rand -hex 32" and set it from the environment, such as "${PARLEY_CALLBACK_SECRET}", or leave it empty to turn reply callbacks off`},
		{"long placeholder callback secret", "http:\n  callback_secret: changeme-changeme-changeme-changeme\n", nil,
			`parley.yaml:2: http.callback_secret: is a placeholder (it says "changeme"), which anyone can guess`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, env(tc.vars))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			ps := problemsOf(t, err)
			if len(ps) != 1 || !strings.HasPrefix(ps[0].Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant one problem starting:\n%s", err, tc.want)
			}
			for _, s := range []string{"test-token-0123456789", "0123456789abcdef\n", "changeme-changeme"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the message shows the secret: %v", err)
				}
			}
		})
	}
}

// Every unset variable is named, each at its line, in one go.
func TestUnsetVariablesAllReported(t *testing.T) {
	src := "database:\n  url: ${MY_DB_URL}\nhttp:\n  tokens: [\"${PARLEY_API_TOKEN}\"]\nproviders:\n  openai:\n    api_key: ${OPENAI_API_KEY:-}\n    base_url: ${OPENAI_BASE_URL}\n"
	_, err := Parse([]byte(src), testFile, nil)
	ps := problemsOf(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Error())
	}
	want := []string{
		"parley.yaml:2: database.url: environment variable MY_DB_URL is not set",
		"parley.yaml:4: http.tokens[0]: environment variable PARLEY_API_TOKEN is not set",
		"parley.yaml:8: providers.openai.base_url: environment variable OPENAI_BASE_URL is not set",
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}

func TestNotifyTargetsNameAdapters(t *testing.T) {
	src := "adapters:\n  - id: tg-main\n    type: telegram\n" +
		"cron:\n  jobs:\n    - id: r\n      schedule: \"@daily\"\n      prompt: report\n      notify: [\"tg-main:1\", \"tg-mian:1\"]\n"
	_, err := Parse([]byte(src), testFile, nil)
	ps := problemsOf(t, err)
	want := `parley.yaml:9: cron.jobs[0].notify[1]: "tg-mian:1" names adapter "tg-mian", which is not in adapters; use one of: tg-main`
	if len(ps) != 1 || ps[0].Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestLoadOrDefaultFor(t *testing.T) {
	dir := t.TempDir()
	setConfigEnv(t, nil)
	// What an operator's shell sees: the daemon's variables are not
	// exported there, and one agent's setting is broken.
	base := "http:\n  tokens: [\"${PARLEY_API_TOKEN_FOR_TEST}\"]\n" +
		"agents:\n  - id: a\n    timezone: Mars/Olympus\n" +
		"hooks:\n  - id: ci\n    auth: hmac\n    secret: ${CI_HOOK_SECRET_FOR_TEST}\n    prompt: hi\n"
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, body)
		return p
	}
	good := write("good.yaml", "database:\n  url: "+filepath.Join(dir, "x.db")+"\n"+base)

	if _, _, err := LoadOrDefault(good); err == nil {
		t.Fatal("LoadOrDefault accepted the broken config")
	}
	c, path, err := LoadOrDefaultFor(good, "database")
	if err != nil || path != good || c.Database.URL.Reveal() != filepath.Join(dir, "x.db") {
		t.Fatalf(`LoadOrDefaultFor(%q, "database") = %v, %q, %v; want the config`, good, c, path, err)
	}
	// hooks ls: the hooks and the address, not the secrets.
	c, _, err = LoadOrDefaultFor(good, "http.listen", "agents[].id", "hooks[].id", "hooks[].agent")
	if err != nil || len(c.Hooks) != 1 || c.Hooks[0].ID != "ci" {
		t.Fatalf("LoadOrDefaultFor for hooks = %v, %v", c, err)
	}

	tests := []struct {
		name, body string
		keys       []string
		want       string
	}{
		{"the database's own variable", "database:\n  url: ${MY_DB_URL_FOR_TEST}\n" + base, []string{"database"},
			"database.url: environment variable MY_DB_URL_FOR_TEST is not set"},
		{"a bad database setting", "database:\n  url: x.db\n  sqlite:\n    synchronous: sometimes\n" + base, []string{"database"},
			`database.sqlite.synchronous: "sometimes" is not allowed`},
		{"a misspelt section", "datbase:\n  url: x.db\n" + base, []string{"database"},
			`unknown key "datbase"`},
		{"a section that is not a mapping", "database: x.db\n" + base, []string{"database.url"},
			"database: expected a mapping of keys"},
		{"YAML that doesn't parse", "database: [\n", []string{"database"}, "invalid YAML"},
		{"a used key inside a list", base, []string{"agents[].timezone"}, `agents[0].timezone: unknown time zone "Mars/Olympus"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.body)
			_, _, err := LoadOrDefaultFor(p, tc.keys...)
			ps := problemsOf(t, err)
			if len(ps) != 1 || !strings.Contains(ps[0].Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant one problem containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadForCheck(t *testing.T) {
	setConfigEnv(t, nil)
	p := filepath.Join(t.TempDir(), "parley.yaml")
	writeFile(t, p, "log:\n  level: loud\nadapters:\n  - id: tg\n    type: telegram\n    token: x\n")
	c, path, err := LoadForCheck(p)
	ps := problemsOf(t, err)
	if c == nil || path != p || len(ps) != 1 || len(c.Adapters) != 1 {
		t.Fatalf("LoadForCheck = %v, %q, %v; want the config and its one problem", c, path, err)
	}
	// Checks made elsewhere point at the same file and lines.
	if got := c.Problem("adapters[0].type", "bad").Error(); got != p+":5: adapters[0].type: bad" {
		t.Errorf("Problem = %q", got)
	}
	writeFile(t, p, "log: [\n")
	if c, _, err := LoadForCheck(p); c != nil || err == nil {
		t.Errorf("LoadForCheck of broken YAML = %v, %v; want nil and the problem", c, err)
	}
	if _, _, err := LoadForCheck(filepath.Join(t.TempDir(), "none.yaml")); err == nil || errors.As(err, &ps) {
		t.Errorf("LoadForCheck of a missing file: %v", err)
	}
}

// No secret the docs show would pass: each value they give a token or a
// secret, literally or as a ${VAR:-fallback}, is refused (or empty, which
// turns the feature off).
func TestDocsShowNoUsableSecret(t *testing.T) {
	key := regexp.MustCompile(`^[#\s-]*(secret|secret_token|callback_secret|tokens|api_token):\s*(.+)$`)
	shown := 0
	docs, _ := filepath.Glob("../docs/*.md")
	for _, file := range append([]string{"../README.md", "../config.example.yaml"}, docs...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			m := key.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			raw, _, _ := strings.Cut(m[2], " #")
			raw = strings.Trim(strings.TrimSpace(raw), "[]`")
			for _, v := range strings.Split(raw, ",") {
				v = strings.Trim(strings.TrimSpace(v), `"'`)
				if v == "" || strings.HasPrefix(v, "<") || strings.Contains(v, "}") && !strings.Contains(v, ":-") {
					continue // none, a description, or a variable that must be set
				}
				got, err := expandEnv(v, env(nil))
				if err != nil || got == "" {
					continue
				}
				shown++
				t.Logf("%s:%d shows %q", file, i+1, got)
				if weakSecret(got, "X") == "" {
					t.Errorf("%s:%d shows %q, which parley would accept as a secret", file, i+1, got)
				}
			}
		}
	}
	t.Logf("%d secret values shown in the docs, all refused", shown)
}

func TestCallbackAllowEntries(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
	}{
		{"10.0.0.0/8", true}, {"127.0.0.1", true}, {"::1", true}, {"fd00::/8", true}, {"hooks.internal", true}, {"localhost", true},
		{"http://10.0.0.1", false}, {"10.0.0.1:80", false}, {"10.0.0.0/33", false}, {"-bad.example", false}, {"", false},
	} {
		_, err := Parse([]byte("http:\n  callback_allow: [\""+tc.entry+"\"]\n"), "parley.yaml", nil)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "http.callback_allow[0]")) {
			t.Errorf("%q: %v, want ok %v", tc.entry, err, tc.ok)
		}
	}
}

// http.trusted_proxies takes addresses and CIDR networks; anything else is
// a problem naming the key and the value, with the forms it takes.
func TestTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		entry string
		ok    bool
		want  string
	}{
		{"10.0.0.0/8", true, "10.0.0.0/8"}, {"127.0.0.1", true, "127.0.0.1/32"}, {"::1", true, "::1/128"},
		{"10.1.2.3/8", true, "10.0.0.0/8"}, {"::ffff:10.0.0.2", true, "10.0.0.2/32"},
		{"proxy.internal", false, ""}, {"10.0.0.1:80", false, ""}, {"10.0.0.0/33", false, ""}, {"", false, ""},
	} {
		cfg, err := Parse([]byte("http:\n  trusted_proxies: [\""+tc.entry+"\"]\n"), "parley.yaml", nil)
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "parley.yaml:2: http.trusted_proxies") || !strings.Contains(err.Error(), "CIDR network") {
				t.Errorf("%q: %v; want a problem at http.trusted_proxies saying what it takes", tc.entry, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.entry, err)
			continue
		}
		got, err := cfg.HTTP.TrustedProxyPrefixes()
		if err != nil || len(got) != 1 || got[0].String() != tc.want {
			t.Errorf("%q read as %v, %v; want %s", tc.entry, got, err, tc.want)
		}
	}
}
