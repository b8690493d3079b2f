package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameAsEncodingJSON checks decodeChunk against encoding/json on data: both
// fail, or both give the same chunk.
func sameAsEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	var want, got chunk
	wantErr := json.Unmarshal(data, &want)
	gotErr := decodeChunk(data, &got)
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("%s:\nencoding/json error %v, decodeChunk error %v", data, wantErr, gotErr)
	}
	if wantErr == nil && normal(want) != normal(got) {
		t.Fatalf("%s:\nencoding/json %+v\ndecodeChunk   %+v", data, normal(want), normal(got))
	}
}

// normal renders c with pointers followed and empty slices as nil.
func normal(c chunk) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model=%q error=%q", c.Model, c.Error)
	if c.Usage != nil {
		fmt.Fprintf(&b, " usage=%+v", *c.Usage)
	}
	for _, ch := range c.Choices {
		fmt.Fprintf(&b, " choice{index=%d finish=%q delta=%s", ch.Index, ch.FinishReason, normalDelta(ch.Delta))
		if ch.Message != nil {
			fmt.Fprintf(&b, " message=%s", normalDelta(*ch.Message))
		}
		b.WriteString("}")
	}
	return b.String()
}

func normalDelta(d delta) string {
	s := fmt.Sprintf("{content=%q refusal=%q", d.Content, d.Refusal)
	for _, tc := range d.ToolCalls {
		index := "nil"
		if tc.Index != nil {
			index = fmt.Sprint(*tc.Index)
		}
		s += fmt.Sprintf(" call{index=%s id=%q name=%q args=%q}", index, tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	return s + "}"
}

func transcriptChunks(t *testing.T) [][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*"))
	var out [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
			if strings.HasPrefix(line, "{") {
				out = append(out, []byte(line))
			}
		}
	}
	return out
}

func TestDecodeChunkMatchesEncodingJSON(t *testing.T) {
	chunks := transcriptChunks(t)
	if len(chunks) < 20 {
		t.Fatalf("only %d chunks in testdata", len(chunks))
	}
	extra := []string{
		`null`, `{}`, `[]`, `"x"`, `{"model":null,"choices":null,"usage":null,"error":null}`,
		`{"choices":[{"index":0,"delta":{"content":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00"},"finish_reason":null}]}`,
		`{"choices":[{"index":1.5}]}`, `{"choices":[{"index":"0"}]}`, `{"choices":{}}`, `{"model":1}`,
		`{"usage":{"prompt_tokens":1e3}}`, `{"usage":{"prompt_tokens":-5,"completion_tokens":99999999999}}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":null,"id":"x","function":{"name":"f","arguments":{"a":[1,2,{"b":null}]}}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"q\":\"\\\"\"}"}}]}}]}`,
		"{\"model\":\"bad \xff\xfe utf8\"}", "{\"model\":\"ctrl \x01\"}", `{"model":"x"} trailing`, `{"model":"x",}`,
		`{"unknown":{"deep":[true,false,null,"s",-1.5e+10,{}]},"model":"m"}`, `{"model":"\u12"}`, `{"model":"\q"}`,
		`  {"choices":[]}  `, `{"choices":[{"message":null}]}`, `{"choices":[{"message":{"content":"m"}}]}`,
		`{"error":"text"}`, `{"error":{"code":502}}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":tru}`,
	}
	for _, s := range extra {
		chunks = append(chunks, []byte(s))
	}
	for _, c := range chunks {
		sameAsEncodingJSON(t, c)
	}
	// Damaged chunks: cut short, or a byte replaced with JSON punctuation.
	rng := rand.New(rand.NewPCG(1, 2))
	punct := []byte(` {}[]":,\0-.e`)
	for range 20000 {
		c := bytes.Clone(chunks[rng.IntN(len(chunks))])
		if len(c) == 0 {
			continue
		}
		if rng.IntN(2) == 0 {
			c = c[:rng.IntN(len(c))]
		} else {
			c[rng.IntN(len(c))] = punct[rng.IntN(len(punct))]
		}
		sameAsEncodingJSON(t, c)
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-AXc1","object":"chat.completion.chunk","created":1732450700,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	b.Run("decodeChunk", func(b *testing.B) {
		for b.Loop() {
			var c chunk
			_ = decodeChunk(data, &c)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var c chunk
			_ = json.Unmarshal(data, &c)
		}
	})
}
