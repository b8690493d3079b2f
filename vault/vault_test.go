package vault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/vault"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func mustKey(t *testing.T) *vault.Key {
	t.Helper()
	k, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyParsingAndPrinting(t *testing.T) {
	k := mustKey(t)
	back, err := vault.ParseKey("  " + k.Encode() + "\n")
	if err != nil || back.ID() != k.ID() || len(k.ID()) != 16 {
		t.Fatalf("ParseKey(Encode()) = %v, %v", back, err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "empty"},
		{"not base64", "not base64!!", "not base64"},
		{"short", "c2hvcnQ=", "is 5 bytes and must be 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := vault.ParseKey(tc.text); !errors.Is(err, vault.ErrBadKey) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseKey(%q) = %v, want %q", tc.text, err, tc.want)
			}
		})
	}
	// Every way of printing the key shows its id only.
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("key", "key", k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %s %q %+v %#v", k, k, k, k, k), logs.String()} {
		if strings.Contains(s, k.Encode()) || !strings.Contains(s, k.ID()) {
			t.Errorf("printed key %q shows the key or not its id", s)
		}
	}
}

func TestLoadKey(t *testing.T) {
	k := mustKey(t)
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(k.Encode()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(n string) (string, bool) { v, ok := m[n]; return v, ok }
	}
	other := mustKey(t)
	for _, tc := range []struct {
		name    string
		file    string
		env     map[string]string
		wantID  string
		wantErr string
	}{
		{name: "none", env: map[string]string{}},
		{name: "file", file: file, env: map[string]string{}, wantID: k.ID()},
		{name: "env wins", file: file, env: map[string]string{vault.EnvKey: other.Encode()}, wantID: other.ID()},
		{name: "bad env", env: map[string]string{vault.EnvKey: "nope"}, wantErr: vault.EnvKey},
		{name: "missing file", file: file + ".gone", env: map[string]string{}, wantErr: "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := vault.LoadKey(tc.file, env(tc.env))
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.wantID == "" && got != nil, tc.wantID != "" && (got == nil || got.ID() != tc.wantID):
				t.Fatalf("key = %v, want id %q", got, tc.wantID)
			}
		})
	}
}

func TestSealBindsToWhatItBelongsTo(t *testing.T) {
	k := mustKey(t)
	sealed := k.Seal([]byte("hunter2"), []byte("a"))
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("sealed value holds the plain text")
	}
	if plain, err := k.Open(sealed, []byte("a")); err != nil || string(plain) != "hunter2" {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	if _, err := k.Open(sealed, []byte("b")); !errors.Is(err, vault.ErrDamaged) {
		t.Errorf("Open with another aad = %v, want ErrDamaged", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := k.Open(sealed, []byte("a")); !errors.Is(err, vault.ErrDamaged) {
		t.Errorf("Open of a changed value = %v, want ErrDamaged", err)
	}
	if bytes.Equal(k.Seal([]byte("x"), nil), k.Seal([]byte("x"), nil)) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
}

func TestSecrets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		k := mustKey(t)
		now := t0
		s := vault.NewStore(db, k, vault.WithClock(func() time.Time { return now }))
		if created, err := s.Set(ctx, "github_token", "ghp_first"); err != nil || !created {
			t.Fatalf("Set = %v, %v", created, err)
		}
		now = t0.Add(time.Hour)
		if created, err := s.Set(ctx, "github_token", "ghp_second"); err != nil || created {
			t.Fatalf("second Set = %v, %v", created, err)
		}
		if _, err := s.Set(ctx, "b.key-2", "v"); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Secret(ctx, "github_token"); err != nil || v != "ghp_second" {
			t.Fatalf("Secret = %q, %v", v, err)
		}
		list, err := s.List(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "b.key-2" || list[1].Name != "github_token" ||
			!list[1].CreatedAt.Equal(t0) || !list[1].UpdatedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("List = %+v, %v", list, err)
		}
		// The raw row holds no plain text, and names the key.
		var raw []byte
		var keyID string
		if err := db.Reader().QueryRowContext(ctx, "SELECT value, key_id FROM secrets WHERE name = $1", "github_token").Scan(&raw, &keyID); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("ghp_second")) || keyID != k.ID() {
			t.Fatalf("raw row = %q under %s", raw, keyID)
		}
		if _, err := s.Secret(ctx, "nope"); !errors.Is(err, vault.ErrNotFound) || !strings.Contains(err.Error(), "parley secrets set nope") {
			t.Errorf("Secret(missing) = %v", err)
		}
		for _, bad := range []string{"", "has space", "-lead", strings.Repeat("a", 65), "a/b"} {
			if _, err := s.Set(ctx, bad, "v"); !errors.Is(err, vault.ErrInvalidName) {
				t.Errorf("Set(%q) = %v, want ErrInvalidName", bad, err)
			}
		}
		// Another key, or none, says so clearly; listing needs none.
		wrong := vault.NewStore(db, mustKey(t))
		if _, err := wrong.Secret(ctx, "github_token"); !errors.Is(err, vault.ErrWrongKey) ||
			!strings.Contains(err.Error(), "sealed with another key; set PARLEY_SECRET_KEY") {
			t.Errorf("Secret under another key = %v", err)
		}
		none := vault.NewStore(db, nil)
		if _, err := none.Secret(ctx, "github_token"); !errors.Is(err, vault.ErrNoKey) {
			t.Errorf("Secret without a key = %v", err)
		}
		if _, err := none.Set(ctx, "x", "y"); !errors.Is(err, vault.ErrNoKey) {
			t.Errorf("Set without a key = %v", err)
		}
		if l, err := none.List(ctx); err != nil || len(l) != 2 {
			t.Errorf("List without a key = %v, %v", l, err)
		}
		// A row moved under another name does not open.
		if _, err := db.Writer().ExecContext(ctx, "UPDATE secrets SET value = $1 WHERE name = $2", raw, "b.key-2"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Secret(ctx, "b.key-2"); !errors.Is(err, vault.ErrDamaged) {
			t.Errorf("Secret of a moved value = %v, want ErrDamaged", err)
		}
		if found, err := s.Delete(ctx, "github_token"); err != nil || !found {
			t.Fatalf("Delete = %v, %v", found, err)
		}
		if found, err := s.Delete(ctx, "github_token"); err != nil || found {
			t.Fatalf("second Delete = %v, %v", found, err)
		}
	})
}

func TestConnections(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s := vault.NewStore(db, mustKey(t), vault.WithClock(func() time.Time { return t0 }))
		ann, bob := vault.User{Surface: "telegram", ID: "1"}, vault.User{Surface: "discord", ID: "1"}
		if err := s.Connect(ctx, ann, "github", "ghp_ann"); err != nil {
			t.Fatal(err)
		}
		if err := s.Connect(ctx, bob, "github", "ghp_bob"); err != nil {
			t.Fatal(err)
		}
		if err := s.Connect(ctx, ann, "linear", "lin_ann"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			u    vault.User
			p    string
			want string
		}{{ann, "github", "ghp_ann"}, {bob, "github", "ghp_bob"}, {ann, "linear", "lin_ann"}} {
			if got, err := s.Token(ctx, tc.u, tc.p); err != nil || got != tc.want {
				t.Errorf("Token(%s, %s) = %q, %v", tc.u, tc.p, got, err)
			}
		}
		if _, err := s.Token(ctx, bob, "linear"); !errors.Is(err, vault.ErrNotFound) {
			t.Errorf("Token of an unconnected provider = %v", err)
		}
		list, err := s.Connections(ctx, ann)
		if err != nil || len(list) != 2 || list[0].Provider != "github" || list[1].Provider != "linear" || list[0].User != ann {
			t.Fatalf("Connections(ann) = %+v, %v", list, err)
		}
		all, err := s.Connections(ctx, vault.User{})
		if err != nil || len(all) != 3 {
			t.Fatalf("Connections() = %+v, %v", all, err)
		}
		if err := s.Connect(ctx, ann, "Git Hub", "x"); !errors.Is(err, vault.ErrInvalidName) {
			t.Errorf("Connect with a bad provider = %v", err)
		}
		if u, err := vault.ParseUser("telegram:42"); err != nil || u != (vault.User{Surface: "telegram", ID: "42"}) {
			t.Errorf("ParseUser = %v, %v", u, err)
		}
		if _, err := vault.ParseUser("nobody"); !errors.Is(err, vault.ErrInvalidName) {
			t.Errorf("ParseUser(nobody) = %v", err)
		}
		if found, err := s.Disconnect(ctx, ann, "github"); err != nil || !found {
			t.Fatalf("Disconnect = %v, %v", found, err)
		}
		if _, err := s.Token(ctx, ann, "github"); !errors.Is(err, vault.ErrNotFound) {
			t.Errorf("Token after Disconnect = %v", err)
		}
	})
}

func TestRotate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		oldKey, newKey := mustKey(t), mustKey(t)
		s := vault.NewStore(db, oldKey)
		u := vault.User{Surface: "telegram", ID: "7"}
		for i := range 3 {
			if _, err := s.Set(ctx, fmt.Sprintf("s%d", i), fmt.Sprintf("value %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Connect(ctx, u, "github", "ghp_seven"); err != nil {
			t.Fatal(err)
		}
		if err := s.PutBlob(ctx, "whatsapp-device", "49151:1@s.whatsapp.net", []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		// A value under a third key stops the rotation, and nothing changes.
		stray := vault.NewStore(db, mustKey(t))
		if _, err := stray.Set(ctx, "stray", "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Rotate(ctx, newKey); !errors.Is(err, vault.ErrWrongKey) || !strings.Contains(err.Error(), "secret stray") {
			t.Fatalf("Rotate with a stray key = %v", err)
		}
		if v, err := s.Secret(ctx, "s0"); err != nil || v != "value 0" {
			t.Fatalf("after a failed rotation the old key reads %q, %v", v, err)
		}
		if _, err := s.Delete(ctx, "stray"); err != nil {
			t.Fatal(err)
		}
		res, err := s.Rotate(ctx, newKey)
		if err != nil || res != (vault.Rotated{Secrets: 3, Connections: 1, Blobs: 1}) {
			t.Fatalf("Rotate = %+v, %v", res, err)
		}
		rotated := vault.NewStore(db, newKey)
		if v, err := rotated.Secret(ctx, "s2"); err != nil || v != "value 2" {
			t.Errorf("new key reads %q, %v", v, err)
		}
		if v, err := rotated.Token(ctx, u, "github"); err != nil || v != "ghp_seven" {
			t.Errorf("new key reads token %q, %v", v, err)
		}
		if b, err := rotated.Blob(ctx, "whatsapp-device", "49151:1@s.whatsapp.net"); err != nil || !bytes.Equal(b, []byte{1, 2, 3}) {
			t.Errorf("new key reads blob %v, %v", b, err)
		}
		if _, err := s.Secret(ctx, "s0"); !errors.Is(err, vault.ErrWrongKey) {
			t.Errorf("old key after rotation = %v, want ErrWrongKey", err)
		}
		// Running it again (old key still set) finds everything moved.
		res, err = s.Rotate(ctx, newKey)
		if err != nil || res.Total() != 0 || res.Already != 5 {
			t.Errorf("second Rotate = %+v, %v", res, err)
		}
		if _, err := vault.NewStore(db, nil).Rotate(ctx, mustKey(t)); !errors.Is(err, vault.ErrNoKey) {
			t.Errorf("Rotate without the old key = %v", err)
		}
	})
}

func TestRotateEmptyStore(t *testing.T) {
	db := dbtest.SQLite(t)
	res, err := vault.NewStore(db, nil).Rotate(context.Background(), mustKey(t))
	if err != nil || res.Total() != 0 {
		t.Fatalf("Rotate of nothing = %+v, %v", res, err)
	}
	_ = dbutil.SQLite
}
