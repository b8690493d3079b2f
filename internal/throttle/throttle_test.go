package throttle

import (
	"strconv"
	"testing"
	"time"
)

func TestFailuresBlockAnAddressForItsWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	f := New(3, time.Minute)
	f.Now = func() time.Time { return now }
	for i := range 2 {
		if f.Fail("a") {
			t.Fatalf("blocked after %d failures, limit 3", i+1)
		}
	}
	if blocked, _ := f.Blocked("a"); blocked {
		t.Fatal("blocked before the limit")
	}
	if !f.Fail("a") {
		t.Fatal("not blocked at the limit")
	}
	if blocked, wait := f.Blocked("a"); !blocked || wait != time.Minute {
		t.Fatalf("blocked %v for %s, want blocked for 1m", blocked, wait)
	}
	if blocked, _ := f.Blocked("b"); blocked {
		t.Fatal("another address is blocked too")
	}
	now = now.Add(time.Minute)
	if blocked, _ := f.Blocked("a"); blocked {
		t.Fatal("still blocked once the window passed")
	}
	f.Fail("c")
	f.Succeed("c")
	if _, ok := f.addrs["c"]; ok {
		t.Fatal("a success keeps the failures")
	}
}

func TestFailuresRememberBoundedAddresses(t *testing.T) {
	f := New(3, time.Hour)
	for i := range maxAddrs + 50 {
		f.Fail(strconv.Itoa(i))
	}
	if n := len(f.addrs); n > maxAddrs {
		t.Fatalf("%d addresses remembered, at most %d", n, maxAddrs)
	}
}
