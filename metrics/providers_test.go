package metrics

// The providers parley ships, registered as the binary registers them, so
// the model specs these tests use are known.
import (
	_ "github.com/parleyd/parley/llm/anthropic"
	_ "github.com/parleyd/parley/llm/openai"
)
