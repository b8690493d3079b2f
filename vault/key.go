// Package vault is parley's secrets store: named secrets (${secret:NAME}
// in the config), people's own tokens for providers (user connections)
// and other sealed values (a WhatsApp device's keys), each sealed with
// AES-256-GCM under a key that never enters the database. The key comes
// from PARLEY_SECRET_KEY or a key file; every sealed row carries the id of
// the key that sealed it, so a wrong key is reported as such.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/parleyd/parley/secret"
)

const (
	// EnvKey names the variable that holds the secrets key, in base64.
	EnvKey = "PARLEY_SECRET_KEY"
	// EnvNewKey names the variable that holds the key parley secrets
	// rotate seals under.
	EnvNewKey = "PARLEY_SECRET_NEW_KEY"
	// KeySize is the key's length in bytes: AES-256.
	KeySize = 32
)

// sealVersion starts every sealed value, so the format can change.
const sealVersion = 1

// Key is a secrets key. Printing or logging it shows its id only.
type Key struct {
	aead cipher.AEAD
	id   string
	raw  [KeySize]byte
}

// ParseKey reads a key written in base64 (standard or URL alphabet, with
// or without padding); surrounding space is ignored.
func ParseKey(text string) (*Key, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("%w: it is empty; make one with parley secrets keygen", ErrBadKey)
	}
	var raw []byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(text); err == nil {
			raw = b
			break
		}
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: it is not base64; make one with parley secrets keygen", ErrBadKey)
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%w: it is %d bytes and must be %d; make one with parley secrets keygen", ErrBadKey, len(raw), KeySize)
	}
	return newKey([KeySize]byte(raw))
}

// GenerateKey makes a new random key.
func GenerateKey() (*Key, error) {
	var raw [KeySize]byte
	_, _ = rand.Read(raw[:]) // never fails (Go 1.24+)
	return newKey(raw)
}

func newKey(raw [KeySize]byte) (*Key, error) {
	block, err := aes.NewCipher(raw[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	sum := sha256.Sum256(raw[:])
	return &Key{aead: aead, id: hex.EncodeToString(sum[:8]), raw: raw}, nil
}

// ID names the key without revealing it: the first 8 bytes of its
// SHA-256, in hex.
func (k *Key) ID() string { return k.id }

// Encode is the key in base64, as PARLEY_SECRET_KEY takes it.
func (k *Key) Encode() string { return base64.StdEncoding.EncodeToString(k.raw[:]) }

// String names the key by its id.
func (k *Key) String() string { return "key " + k.id }

// GoString keeps %#v from printing the key.
func (k *Key) GoString() string { return k.String() }

// LogValue logs the key's id only.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Format prints the key's id for every verb.
func (k *Key) Format(f fmt.State, verb rune) { secret.Format(f, verb, k.String()) }

// Seal encrypts plain, bound to aad (what the value belongs to, so a
// sealed value can't be moved to another row).
func (k *Key) Seal(plain, aad []byte) []byte {
	out := make([]byte, 1+k.aead.NonceSize(), 1+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	out[0] = sealVersion
	_, _ = rand.Read(out[1 : 1+k.aead.NonceSize()]) // never fails (Go 1.24+)
	return k.aead.Seal(out, out[1:1+k.aead.NonceSize()], plain, aad)
}

// Open decrypts what Seal sealed with this key and the same aad.
func (k *Key) Open(sealed, aad []byte) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < 1+n+k.aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrDamaged
	}
	plain, err := k.aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad)
	if err != nil {
		return nil, ErrDamaged
	}
	return plain, nil
}

// Source says where a key came from, for messages.
type Source string

// LoadKey finds the secrets key: PARLEY_SECRET_KEY when getenv has it,
// else the file keyFile names (when set). It returns nil and "" when
// neither is set: parley runs without a secrets store then.
func LoadKey(keyFile string, getenv func(string) (string, bool)) (*Key, Source, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if v, ok := getenv(EnvKey); ok && strings.TrimSpace(v) != "" {
		k, err := ParseKey(v)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", EnvKey, err)
		}
		return k, Source(EnvKey), nil
	}
	if keyFile == "" {
		return nil, "", nil
	}
	k, err := ReadKeyFile(keyFile)
	if err != nil {
		return nil, "", err
	}
	return k, Source("secrets.key_file " + keyFile), nil
}

// ReadKeyFile reads a key written in base64 in the file at path.
func ReadKeyFile(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("secrets key file %s does not exist; write a key from parley secrets keygen there (readable by parley only), or set %s", path, EnvKey)
	}
	if err != nil {
		return nil, fmt.Errorf("read the secrets key file: %w", err)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return k, nil
}
