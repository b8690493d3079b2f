package config

import (
	"github.com/parleyd/parley/secret"
)

// Redacted is what a secret prints as.
const Redacted = secret.Redacted

// Secret is a token or API key: see secret.String.
type Secret = secret.String

// DSN is a database URL or connection string that hides its password:
// see secret.DSN.
type DSN = secret.DSN
