package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const secretsSrc = `
providers:
  openai:
    api_key: ${secret:openai_key}
adapters:
  - id: tg
    type: telegram
    token: "${secret:tg_token}"
mcp:
  servers:
    - id: gh
      url: https://mcp.example.com/mcp
      headers: ["Authorization: Bearer ${secret:gh_pat}", "X-Plain: $$5 ${PLAIN}"]
      user_token: {provider: github, header: X-User-Token, format: "token %s"}
`

func TestSecretRefsResolve(t *testing.T) {
	c := mustParse(t, secretsSrc, map[string]string{"PLAIN": "p"})
	var refs []string
	for _, r := range c.SecretRefs() {
		refs = append(refs, r.Key+"="+r.Name)
	}
	want := "providers.openai.api_key=openai_key adapters[0].token=tg_token mcp.servers[0].headers[0]=gh_pat"
	if strings.Join(refs, " ") != want {
		t.Fatalf("SecretRefs = %q, want %q", refs, want)
	}
	// Before resolution the reference itself is the value: never a secret.
	if got := c.MCP.Servers[0].Headers[1]; got != "X-Plain: $5 p" {
		t.Errorf("plain header = %q", got)
	}
	store := map[string]string{"openai_key": "sk-one", "tg_token": "123:abc", "gh_pat": "ghp_two"}
	var asked []string
	err := c.ResolveSecrets(func(name string) (string, error) {
		asked = append(asked, name)
		return store[name], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 3 {
		t.Errorf("lookups = %q, want one per secret", asked)
	}
	var tg struct {
		Token Secret `yaml:"token"`
	}
	if err := c.Adapters[0].Decode(&tg); err != nil {
		t.Fatal(err)
	}
	if c.Providers["openai"].APIKey.Reveal() != "sk-one" || tg.Token.Reveal() != "123:abc" ||
		c.MCP.Servers[0].Headers[0] != "Authorization: Bearer ghp_two" || c.MCP.Servers[0].Headers[1] != "X-Plain: $5 p" {
		t.Errorf("resolved: key %q, token %q, headers %q", c.Providers["openai"].APIKey.Reveal(), tg.Token.Reveal(), c.MCP.Servers[0].Headers)
	}
	if len(c.SecretRefs()) != 0 {
		t.Errorf("references left after resolution: %v", c.SecretRefs())
	}
	// Printing the resolved config shows none of the secrets.
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range store {
		if strings.Contains(string(out), v) || strings.Contains(fmt.Sprintf("%+v", c), v) {
			t.Errorf("printed config shows the secret %q:\n%s", v, out)
		}
	}
	if !strings.Contains(string(out), "Authorization: [redacted]") || !strings.Contains(string(out), "provider: github") {
		t.Errorf("printed mcp section:\n%s", out)
	}
}

func TestSecretRefsUnresolved(t *testing.T) {
	c := mustParse(t, secretsSrc, map[string]string{"PLAIN": "p"})
	before := c.MCP.Servers[0].Headers[0]
	err := c.ResolveSecrets(func(name string) (string, error) {
		if name == "tg_token" {
			return "123:abc", nil
		}
		return "", fmt.Errorf("secret %s: not found; add it with: parley secrets set %s", name, name)
	})
	ps := problemsOf(t, err)
	if len(ps) != 2 || ps[0].Key != "providers.openai.api_key" || ps[0].Line != 4 ||
		!strings.Contains(ps[0].Error(), "${secret:openai_key} can't be resolved") || !strings.Contains(ps[1].Error(), "parley secrets set gh_pat") {
		t.Fatalf("problems:\n%v", err)
	}
	if c.MCP.Servers[0].Headers[0] != before {
		t.Errorf("a failed resolution changed the config")
	}
}

// An API token kept as a stored secret is checked for strength once
// resolved, not as the reference's text.
func TestStoredSecretsAreCheckedOnceResolved(t *testing.T) {
	c := mustParse(t, "http:\n  tokens: [\"${secret:api}\"]\n", nil)
	err := c.ResolveSecrets(func(string) (string, error) { return "short", nil })
	if ps := problemsOf(t, err); len(ps) != 1 || ps[0].Key != "http.tokens[0]" || !strings.Contains(ps[0].Message, "too short") {
		t.Fatalf("problems: %v", err)
	}
	c = mustParse(t, "http:\n  tokens: [\"${secret:api}\"]\n", nil)
	if err := c.ResolveSecrets(func(string) (string, error) { return strings.Repeat("k3", 20), nil }); err != nil {
		t.Fatal(err)
	}
}

func TestSecretRefProblems(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"bad name", "log: {level: '${secret:no way}'}", `"no way" is not a secret name`},
		{"unclosed", "log: {level: '${secret:x'}", `has no closing "}"`},
		{"escaped", "log: {level: '$${secret:x}'}", `would read as a reference to a stored secret`},
		{"database", "database: {url: '${secret:db}'}", "database.url: can't use ${secret:...}"},
		{"key file", "secrets: {key_file: '${secret:k}'}", "secrets.key_file: can't use ${secret:...}"},
		{"user token env on http", "mcp: {servers: [{id: a, url: 'http://x/mcp', user_token: {provider: gh, env: T}}]}", "takes the token in a header"},
		{"user token header on stdio", "mcp: {servers: [{id: a, command: x, user_token: {provider: gh, header: A}}]}", "takes the token in env"},
		{"user token no env", "mcp: {servers: [{id: a, command: x, user_token: {provider: gh}}]}", "is not an environment variable name"},
		{"user token bad format", "mcp: {servers: [{id: a, command: x, user_token: {provider: gh, env: T, format: 'Bearer'}}]}", "must hold %s once"},
		{"user token no provider", "mcp: {servers: [{id: a, command: x, user_token: {env: T}}]}", "required with env or header"},
		{"user token bad provider", "mcp: {servers: [{id: a, command: x, user_token: {provider: Git Hub, env: T}}]}", "is not a provider name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), testFile, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	c := mustParse(t, "mcp: {servers: [{id: a, command: x, user_token: {provider: gh, env: T}}]}", nil)
	if u := c.MCP.Servers[0].UserToken; u.Format != "%s" || u.Value("tok") != "tok" {
		t.Errorf("default format = %+v", u)
	}
	var ps Problems
	if err := c.ResolveSecrets(nil); errors.As(err, &ps) {
		t.Errorf("a config without references asks for none: %v", err)
	}
}
