package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/vault"
)

func sealingAdapter(t *testing.T, db *dbutil.DB, v *vault.Store) *Adapter {
	t.Helper()
	a, _ := testAdapter(t, "", newFakeClient(), newFakeClock(true), adapters.Deps{DB: db.Writer(), Dialect: string(db.Dialect), Vault: v})
	return a
}

// rawDevice is everything whatsmeow's row of the device holds, and the
// secrets store's sealed row, as bytes.
func rawDevice(t *testing.T, db *dbutil.DB) []byte {
	t.Helper()
	var all []byte
	for _, q := range []string{
		"SELECT noise_key, identity_key, signed_pre_key, adv_key FROM whatsmeow_device",
		"SELECT value, value, value, value FROM sealed_blobs",
	} {
		rows, err := db.Reader().QueryContext(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, b, c, d []byte
			if err := rows.Scan(&a, &b, &c, &d); err != nil {
				t.Fatal(err)
			}
			all = append(append(append(append(all, a...), b...), c...), d...)
		}
		rows.Close()
	}
	return all
}

// With a secrets key, a device's private keys are sealed: the database
// holds none of their bytes, the adapter reads them back, a device stored
// in the clear before is sealed when read, and a missing or wrong key is
// named in the error.
func TestDeviceKeysAreSealed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		key, err := vault.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		v := vault.NewStore(db, key)
		a := sealingAdapter(t, db, v)
		st, err := a.openStore(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dev := putDevice(t, ctx, st, "4915100000001", 1)
		secrets := [][]byte{dev.NoiseKey.Priv[:], dev.IdentityKey.Priv[:], dev.SignedPreKey.Priv[:], dev.AdvSecretKey}
		raw := rawDevice(t, db)
		for i, k := range secrets {
			if bytes.Contains(raw, k) {
				t.Fatalf("the database holds device key %d in the clear", i)
			}
		}
		got, err := a.device(ctx, st)
		if err != nil || got == nil {
			t.Fatalf("device = %v, %v", got, err)
		}
		if *got.NoiseKey.Priv != *dev.NoiseKey.Priv || *got.IdentityKey.Priv != *dev.IdentityKey.Priv ||
			*got.SignedPreKey.Priv != *dev.SignedPreKey.Priv || *got.SignedPreKey.Pub != *dev.SignedPreKey.Pub ||
			got.SignedPreKey.KeyID != dev.SignedPreKey.KeyID || !bytes.Equal(got.AdvSecretKey, dev.AdvSecretKey) {
			t.Fatal("the device read back has other keys")
		}
		if got.Container != st {
			t.Error("a device read back saves around the sealing store")
		}
		// Saved again (whatsmeow does, on every change), the keys stay sealed.
		if err := got.Save(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range secrets {
			if bytes.Contains(rawDevice(t, db), k) {
				t.Fatal("a save put a key in the clear")
			}
		}

		// No key, or another key: the error says which.
		for _, tc := range []struct {
			name string
			v    *vault.Store
			want error
		}{
			{"no key", vault.NewStore(db, nil), vault.ErrNoKey},
			{"another key", vault.NewStore(db, mustGenerate(t)), vault.ErrWrongKey},
		} {
			b := sealingAdapter(t, db, tc.v)
			bst, err := b.openStore(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.device(ctx, bst); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}

		// A device stored in the clear is sealed once a key is set.
		plain := sealingAdapter(t, db, nil)
		pst, err := plain.openStore(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old := putDevice(t, ctx, pst, "4915100000002", 1)
		if !bytes.Contains(rawDevice(t, db), old.NoiseKey.Priv[:]) {
			t.Fatal("without a key the device is not stored as whatsmeow stores it")
		}
		all, err := st.GetAllDevices(ctx)
		if err != nil || len(all) != 2 {
			t.Fatalf("devices = %v, %v", all, err)
		}
		if bytes.Contains(rawDevice(t, db), old.NoiseKey.Priv[:]) {
			t.Fatal("the device stored in the clear was not sealed when read with a key")
		}
		for _, d := range all {
			if d.ID.User == "4915100000002" && *d.NoiseKey.Priv != *old.NoiseKey.Priv {
				t.Fatal("sealing changed the device's keys")
			}
		}

		// Rotation moves the device's keys with everything else.
		next := mustGenerate(t)
		if _, err := v.Rotate(ctx, next); err != nil {
			t.Fatal(err)
		}
		c := sealingAdapter(t, db, vault.NewStore(db, next))
		cst, err := c.openStore(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if all, err := cst.GetAllDevices(ctx); err != nil || len(all) != 2 {
			t.Fatalf("after rotation: %v, %v", all, err)
		}
		// Deleting the device deletes its sealed keys.
		if err := got.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if ids, err := v.BlobIDs(ctx, sealedKind); err != nil || len(ids) != 1 {
			t.Fatalf("sealed devices after a delete: %v, %v", ids, err)
		}
	})
}

func mustGenerate(t *testing.T) *vault.Key {
	t.Helper()
	k, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
