package config

// The providers parley ships, registered as the binary registers them, so
// model specs naming them are known to the checks.
import (
	_ "github.com/parleyd/parley/llm/anthropic"
	_ "github.com/parleyd/parley/llm/openai"
)
