package config

import (
	"strings"
	"testing"
)

type fakeAdapterConfig struct {
	Token   Secret   `yaml:"token"`
	Timeout Duration `yaml:"timeout"`
	Shards  int      `yaml:"shards"`
}

func TestAdapterEntries(t *testing.T) {
	src := `adapters:
  - id: tg-main
    type: Telegram
    allow: ["42"]
    token: ${TOKEN}
    timeout: 3s
  - id: tg-two
    type: telegram
    dm_policy: open
    group_policy: always
    ack_reaction: " 👀 "
    tokn: x
    shards: lots
`
	c, err := Parse([]byte(src), "parley.yaml", func(k string) (string, bool) {
		if k == "TOKEN" {
			return "s3cret", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Adapters[0], c.Adapters[1]
	if a.ID != "tg-main" || a.Type != "telegram" || a.DMPolicy != "pairing" || a.GroupPolicy != "mention" || len(a.Allow) != 1 || a.Allow[0] != "42" {
		t.Fatalf("first entry: %+v", a)
	}
	if a.Groups.Policy != "pairing" || len(a.Groups.Allow) != 0 {
		t.Fatalf("first entry's groups: %+v, want pairing by default", a.Groups)
	}
	if b.DMPolicy != "open" || b.GroupPolicy != "always" || b.AckReaction != "👀" || a.AckReaction != "" {
		t.Fatalf("second entry: %+v", b)
	}
	var fa fakeAdapterConfig
	if err := a.Decode(&fa); err != nil {
		t.Fatal(err)
	}
	if fa.Token.Reveal() != "s3cret" || fa.Timeout.Std().String() != "3s" {
		t.Fatalf("decoded %+v", fa)
	}
	// The adapter's own keys are checked strictly, with the file's lines.
	var fb fakeAdapterConfig
	err = b.Decode(&fb)
	want := []string{
		`parley.yaml:12: unknown key "adapters[1].tokn"; did you mean "adapters[1].token"? (known keys: token, timeout, shards)`,
		`parley.yaml:13: adapters[1].shards: expected an integer, got "lots"`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("Decode = %v, want\n%s", err, strings.Join(want, "\n"))
	}
}

func TestAdapterValidation(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"no id", "adapters:\n  - type: telegram\n",
			`parley.yaml:2: adapters[0].id: required; use 1-64 characters from a-z, 0-9, "_", "-" and ".", starting with a letter or digit, such as "tg-main"`},
		{"bad id", "adapters:\n  - id: TG Main\n    type: telegram\n",
			`parley.yaml:2: adapters[0].id: "TG Main" is not a valid adapter id; use 1-64 characters from a-z, 0-9, "_", "-" and ".", starting with a letter or digit, such as "tg-main"`},
		{"no type", "adapters:\n  - id: tg\n",
			`parley.yaml:2: adapters[0].type: required; the kind of channel, such as "telegram", "discord" or "whatsapp"`},
		{"duplicate id", "adapters:\n  - id: tg\n    type: telegram\n  - id: tg\n    type: telegram\n",
			`parley.yaml:4: adapters[1].id: "tg" is used by adapters[0] too; adapter ids must be unique`},
		{"dm policy", "adapters:\n  - id: tg\n    type: telegram\n    dm_policy: friends\n",
			`parley.yaml:4: adapters[0].dm_policy: "friends" is not allowed; use "open" (anyone), "allowlist" (only the users in allow) or "pairing" (allow, plus users an operator approves)`},
		{"group policy", "adapters:\n  - id: tg\n    type: telegram\n    group_policy: sometimes\n",
			`parley.yaml:4: adapters[0].group_policy: "sometimes" is not allowed; use "mention" (answer when addressed), "always" or "never"`},
		{"groups policy", "adapters:\n  - id: tg\n    type: telegram\n    groups:\n      policy: anyone\n",
			`parley.yaml:5: adapters[0].groups.policy: "anyone" is not allowed; use "pairing" (groups.allow, plus groups an approved person pairs with /pair), "allowlist" (only groups.allow) or "open" (any group)`},
		{"groups allow empty", "adapters:\n  - id: tg\n    type: telegram\n    groups:\n      policy: allowlist\n      allow: [\"\"]\n",
			`parley.yaml:6: adapters[0].groups.allow[0]: empty; list the groups' platform chat ids, such as "-1001234567890"`},
		{"allow type", "adapters:\n  - id: tg\n    type: telegram\n    allow: 42\n",
			`parley.yaml:4: adapters[0].allow: expected a list, got "42"`},
		{"ack reaction words", "adapters:\n  - id: tg\n    type: telegram\n    ack_reaction: \"got it\"\n",
			`parley.yaml:4: adapters[0].ack_reaction: "got it" is not a reaction; give one emoji, such as "👀" (Discord also takes a server's emoji as name:id), or leave it out for none`},
		{"not a mapping", "adapters:\n  - tg\n",
			`parley.yaml:2: adapters[0]: expected a mapping of keys, got "tg"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "parley.yaml", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestHookValidation(t *testing.T) {
	ok := "hooks:\n  - id: ci\n    auth: hmac\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: \"hi {{.x}}\"\n"
	c, err := Parse([]byte(ok), "parley.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Hooks[0]; h.Agent != "default" || h.Mode != "async" || h.Template() == nil {
		t.Fatalf("defaults: %+v", h)
	}
	tests := []struct{ name, src, want string }{
		{"template", "hooks:\n  - id: ci\n    auth: hmac\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: \"{{.x\"\n",
			`parley.yaml:5: hooks[0].prompt: the template doesn't parse: ci:1: unclosed action`},
		{"auth", "hooks:\n  - id: ci\n    auth: basic\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: x\n",
			`parley.yaml:3: hooks[0].auth: "basic" is not allowed; use "hmac" (X-Parley-Signature), "github" (X-Hub-Signature-256) or "token" (Authorization: Bearer)`},
		{"no secret", "hooks:\n  - id: ci\n    auth: token\n    prompt: x\n",
			`parley.yaml:2: hooks[0].secret: required; make one with "openssl rand -hex 32" and set it from the environment, such as "${CI_HOOK_SECRET}"`},
		{"short secret", "hooks:\n  - id: ci\n    auth: token\n    secret: short\n    prompt: x\n",
			`parley.yaml:4: hooks[0].secret: is 5 bytes, too short to resist guessing; use at least 32 random bytes; make one with "openssl rand -hex 32"`},
		{"31-byte secret", "hooks:\n  - id: ci\n    auth: hmac\n    secret: 0123456789abcdef0123456789abcde\n    prompt: x\n",
			`parley.yaml:4: hooks[0].secret: is 31 bytes, too short`},
		{"the docs' placeholder", "hooks:\n  - id: ci\n    auth: hmac\n    secret: ${CI_HOOK_SECRET:-change-me-to-a-long-secret}\n    prompt: x\n",
			`parley.yaml:4: hooks[0].secret: is the placeholder parley's docs show, which anyone can read; make one with "openssl rand -hex 32"`},
		{"a long placeholder", "hooks:\n  - id: ci\n    auth: hmac\n    secret: please-CHANGE-ME-to-something-long-and-random\n    prompt: x\n",
			`parley.yaml:4: hooks[0].secret: is a placeholder (it says "change-me"), which anyone can guess`},
		{"notify names no adapter", "adapters:\n  - id: tg-main\n    type: telegram\n  - id: dc\n    type: discord\n" +
			"hooks:\n  - id: ci\n    auth: token\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: x\n    notify: [\"tg-mian:42\"]\n",
			`parley.yaml:11: hooks[0].notify[0]: "tg-mian:42" names adapter "tg-mian", which is not in adapters; use one of: tg-main, dc`},
		{"notify with no adapters", "hooks:\n  - id: ci\n    auth: token\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: x\n    notify: [\"tg-main:42\"]\n",
			`parley.yaml:6: hooks[0].notify[0]: "tg-main:42" names adapter "tg-main", but there are no adapters; add it under adapters, or remove the target`},
		{"agent", "hooks:\n  - id: ci\n    auth: token\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: x\n    agent: nobody\n",
			`parley.yaml:6: hooks[0].agent: "nobody" is not an agent in agents`},
		{"mode", "hooks:\n  - id: ci\n    auth: token\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: x\n    mode: later\n",
			`parley.yaml:6: hooks[0].mode: "later" is not allowed`},
		{"notify", "hooks:\n  - id: ci\n    auth: token\n    secret: 0123456789abcdef0123456789abcdef\n    prompt: x\n    notify: [tg-main]\n",
			`hooks[0].notify[0]: "tg-main" is not a target; use "<adapter id>:<chat id>"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "parley.yaml", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
