package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/util/keys"

	"github.com/parleyd/parley/vault"
)

// sealedKind is the kind a device's sealed keys are stored under in the
// secrets store, by the device's JID.
const sealedKind = "whatsapp-device"

// keySize is the length of each private key whatsmeow keeps.
const keySize = 32

// blankDeviceKeysQuery overwrites a device's private keys in whatsmeow's
// table once they are sealed elsewhere: its columns must hold 32 bytes, so
// zeros stand in for them (no real key is zero).
const blankDeviceKeysQuery = `UPDATE whatsmeow_device SET noise_key = $1, identity_key = $1, signed_pre_key = $1, adv_key = $1 WHERE jid = $2`

// devices is the WhatsApp device store: whatsmeow's sqlstore, with each
// device's private keys (noise, identity, signed pre-key, ADV secret)
// sealed in parley's secrets store when a secrets key is set. whatsmeow's
// own row then holds zeros in their place. Without a key it is sqlstore as
// it is, and a device sealed earlier is an error that names the key.
type devices struct {
	*sqlstore.Container
	db    *sql.DB
	vault *vault.Store // nil: no secrets store (the config is being checked, or tests)
}

var _ store.DeviceContainer = (*devices)(nil)

func (d *devices) sealing() bool { return d.vault != nil && d.vault.Key() != nil }

// GetAllDevices reads every device, opening its sealed keys; a device
// stored in the clear is sealed now when a key is set.
func (d *devices) GetAllDevices(ctx context.Context) ([]*store.Device, error) {
	devs, err := d.Container.GetAllDevices(ctx)
	if err != nil {
		return nil, err
	}
	for _, dev := range devs {
		if dev == nil || dev.ID == nil {
			continue
		}
		switch {
		case blank(dev):
			if d.vault == nil {
				return nil, fmt.Errorf("WhatsApp device %s: its keys are sealed in the secrets store, which is not open here", dev.ID)
			}
			b, err := d.vault.Blob(ctx, sealedKind, dev.ID.String())
			if err != nil {
				return nil, fmt.Errorf("WhatsApp device %s's keys: %w", dev.ID, err)
			}
			if err := unpackKeys(dev, b); err != nil {
				return nil, fmt.Errorf("WhatsApp device %s's keys: %w", dev.ID, err)
			}
		case d.sealing():
			if err := d.seal(ctx, dev); err != nil {
				return nil, err
			}
		}
		dev.Container = d
	}
	return devs, nil
}

// NewDevice is a new device whose Save goes through d.
func (d *devices) NewDevice() *store.Device {
	dev := d.Container.NewDevice()
	dev.Container = d
	return dev
}

// PutDevice stores the device (whatsmeow calls it through Save once a
// link completes), its keys sealed when a key is set.
func (d *devices) PutDevice(ctx context.Context, dev *store.Device) error {
	if !d.sealing() {
		return d.Container.PutDevice(ctx, dev)
	}
	if dev.ID == nil {
		return sqlstore.ErrDeviceIDMustBeSet
	}
	if err := d.vault.PutBlob(ctx, sealedKind, dev.ID.String(), packKeys(dev)); err != nil {
		return err
	}
	if !dev.Initialized {
		dev.SetAllStores(sqlstore.NewSQLStore(d.Container, *dev.ID))
		dev.LIDs = d.Container.LIDMap
		dev.Initialized = true
	}
	dev.Container = d
	stored := *dev // whatsmeow's row gets zeros for the keys
	zero := keys.KeyPair{Pub: new([keySize]byte), Priv: new([keySize]byte)}
	stored.NoiseKey, stored.IdentityKey = &zero, &zero
	stored.SignedPreKey = &keys.PreKey{KeyPair: zero, KeyID: dev.SignedPreKey.KeyID, Signature: dev.SignedPreKey.Signature}
	stored.AdvSecretKey = make([]byte, keySize)
	return d.Container.PutDevice(ctx, &stored)
}

// DeleteDevice deletes the device and its sealed keys.
func (d *devices) DeleteDevice(ctx context.Context, dev *store.Device) error {
	if err := d.Container.DeleteDevice(ctx, dev); err != nil {
		return err
	}
	if d.vault != nil && dev.ID != nil {
		if _, err := d.vault.DeleteBlob(ctx, sealedKind, dev.ID.String()); err != nil {
			return err
		}
	}
	return nil
}

// seal moves the keys of a device stored in the clear into the secrets
// store.
func (d *devices) seal(ctx context.Context, dev *store.Device) error {
	if err := d.vault.PutBlob(ctx, sealedKind, dev.ID.String(), packKeys(dev)); err != nil {
		return fmt.Errorf("seal WhatsApp device %s's keys: %w", dev.ID, err)
	}
	if _, err := d.db.ExecContext(ctx, blankDeviceKeysQuery, make([]byte, keySize), dev.ID); err != nil {
		return fmt.Errorf("seal WhatsApp device %s's keys: %w", dev.ID, err)
	}
	return nil
}

// blank says whether the device's keys are the zeros PutDevice leaves.
func blank(dev *store.Device) bool {
	return dev.NoiseKey != nil && *dev.NoiseKey.Priv == [keySize]byte{}
}

// packKeys is the device's private keys, one after the other: noise,
// identity, signed pre-key, then the ADV secret.
func packKeys(dev *store.Device) []byte {
	out := make([]byte, 0, 3*keySize+len(dev.AdvSecretKey))
	out = append(out, dev.NoiseKey.Priv[:]...)
	out = append(out, dev.IdentityKey.Priv[:]...)
	out = append(out, dev.SignedPreKey.Priv[:]...)
	return append(out, dev.AdvSecretKey...)
}

func unpackKeys(dev *store.Device, b []byte) error {
	if len(b) < 3*keySize {
		return errors.New("the sealed keys are too short")
	}
	dev.NoiseKey = keys.NewKeyPairFromPrivateKey([keySize]byte(b[:keySize]))
	dev.IdentityKey = keys.NewKeyPairFromPrivateKey([keySize]byte(b[keySize : 2*keySize]))
	sig, id := dev.SignedPreKey.Signature, dev.SignedPreKey.KeyID
	dev.SignedPreKey = &keys.PreKey{KeyPair: *keys.NewKeyPairFromPrivateKey([keySize]byte(b[2*keySize : 3*keySize])), KeyID: id, Signature: sig}
	dev.AdvSecretKey = append([]byte(nil), b[3*keySize:]...)
	return nil
}
