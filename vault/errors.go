package vault

import "errors"

var (
	// ErrNoKey means no secrets key is set, so nothing can be sealed or
	// opened.
	ErrNoKey = errors.New("no secrets key is set; set " + EnvKey + " (or secrets.key_file in the config) to a key from \"parley secrets keygen\"")
	// ErrWrongKey means a value was sealed with a key other than the one
	// set.
	ErrWrongKey = errors.New("the secrets were sealed with another key; set " + EnvKey + " to the key they were written with, or run parley secrets rotate")
	// ErrBadKey means a key is not 32 bytes in base64.
	ErrBadKey = errors.New("invalid secrets key")
	// ErrDamaged means a sealed value does not open under the key that
	// sealed it: the row was changed outside parley.
	ErrDamaged = errors.New("a sealed value is damaged: it does not open under the key that sealed it")
	// ErrNotFound means there is no secret (or connection) by that name.
	ErrNotFound = errors.New("not found")
	// ErrInvalidName means a secret or provider name has characters a name
	// can't.
	ErrInvalidName = errors.New("invalid name")
)
