package mcptools

import "errors"

// ErrNotConnected is what a Tokens function returns for a person who has
// no token for the provider.
var ErrNotConnected = errors.New("not connected")
