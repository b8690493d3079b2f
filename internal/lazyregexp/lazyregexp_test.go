package lazyregexp

import "testing"

func TestCompiledOnFirstUse(t *testing.T) {
	bad := New(`(`) // compiling this would panic: New must not
	r := New(`^a(b+)$`)
	if !r.MatchString("abb") || r.MatchString("ac") {
		t.Fatal("MatchString")
	}
	if m := r.FindStringSubmatch("abbb"); len(m) != 2 || m[1] != "bbb" {
		t.Fatalf("FindStringSubmatch: %q", m)
	}
	if got := New(`b`).ReplaceAllString("abcb", "x"); got != "axcx" {
		t.Fatalf("ReplaceAllString: %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a bad expression did not panic on first use")
		}
	}()
	bad.MatchString("x")
}
