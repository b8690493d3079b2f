//go:build unix

package mcptools

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// runAs makes cmd run as who: a user name, or uid[:gid]; "" leaves it
// as parley's user.
func runAs(cmd *exec.Cmd, who string) error {
	if who == "" {
		return nil
	}
	uid, gid, err := lookupUser(who)
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: true}}
	return nil
}

// lookupUser is who's uid and gid; a bare uid takes the user's group
// when it has one, else the same number.
func lookupUser(who string) (uint32, uint32, error) {
	if u, g, ok := strings.Cut(who, ":"); ok {
		uid, err1 := strconv.ParseUint(u, 10, 32)
		gid, err2 := strconv.ParseUint(g, 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("run_as %q: write uid:gid in numbers", who)
		}
		return uint32(uid), uint32(gid), nil
	}
	var u *user.User
	var err error
	if _, perr := strconv.ParseUint(who, 10, 32); perr == nil {
		u, err = user.LookupId(who)
		if err != nil {
			n, _ := strconv.ParseUint(who, 10, 32)
			return uint32(n), uint32(n), nil
		}
	} else if u, err = user.Lookup(who); err != nil {
		return 0, 0, fmt.Errorf("run_as %q: no such user on this host; create it or write uid:gid: %w", who, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("run_as %q: the user's ids are not numbers (%s:%s)", who, u.Uid, u.Gid)
	}
	return uint32(uid), uint32(gid), nil
}

// terminate asks p to end.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
