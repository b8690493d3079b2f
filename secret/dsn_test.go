package secret

import "testing"

const password = "hunter2-s3cret"

func TestDSNString(t *testing.T) {
	tests := []struct {
		name string
		dsn  string
		want string
	}{
		{"empty", "", ""},
		{"sqlite path", "data/parley.db", "data/parley.db"},
		{"url with password", "postgres://parley:" + password + "@db.example.com:5432/parley?sslmode=disable",
			"postgres://parley:[redacted]@db.example.com:5432/parley?sslmode=disable"},
		{"url with empty password", "postgres://parley:@db/parley", "postgres://parley:[redacted]@db/parley"},
		{"url without password", "postgresql://parley@db/parley", "postgresql://parley@db/parley"},
		{"url without userinfo", "postgres://db:5432/parley", "postgres://db:5432/parley"},
		{"password with @ and /", "postgres://u:" + password + "@x/y@db/parley", "postgres://u:[redacted]@db/parley"},
		{"password with ? and #", "postgres://u:a?b#" + password + "@db/parley", "postgres://u:[redacted]@db/parley"},
		{"@ in a query value", "postgres://db:5432/parley?application_name=me@home", "postgres://db:5432/parley?application_name=me@home"},
		{"password in the query", "postgres://db/parley?sslmode=require&password=" + password + "#frag",
			"postgres://db/parley?sslmode=require&password=[redacted]#frag"},
		{"escaped password key in the query", "postgres://db/parley?pass%77ord=" + password, "postgres://db/parley?pass%77ord=[redacted]"},
		{"unparseable url", "postgres://u:" + password + "@db:port/parley", "postgres://u:[redacted]@db:port/parley"},
		{"key=value", "host=db user=parley password=" + password + " dbname=parley",
			"host=db user=parley password=[redacted] dbname=parley"},
		{"key=value quoted", "host=db password='" + password + ` it\'s' dbname=parley`,
			"host=db password=[redacted] dbname=parley"},
		{"key=value spaced", "host=db PASSWORD = " + password + " dbname=parley",
			"host=db PASSWORD = [redacted] dbname=parley"},
		{"key=value unterminated quote", "password='" + password, "password=[redacted]"},
		{"sqlite query", "file:data/parley.db?_pragma=key('" + password + "')&mode=rwc",
			"file:data/parley.db?_pragma=[redacted]&mode=rwc"},
		{"sqlite other pragma", "file:data/parley.db?_pragma=busy_timeout(5000)", "file:data/parley.db?_pragma=busy_timeout(5000)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DSN(tc.dsn)
			if got := d.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if got := d.Reveal(); got != tc.dsn {
				t.Errorf("Reveal() = %q, want %q", got, tc.dsn)
			}
		})
	}
}
