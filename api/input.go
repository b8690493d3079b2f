package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxIDBytes is the longest id a path or query may carry; every id parley
// makes is far shorter.
const MaxIDBytes = 200

// checkText refuses what no engine stores the same: text that is not UTF-8
// or that holds a NUL byte (PostgreSQL rejects both, SQLite keeps them).
// Checked at the edge, so both engines answer a bad request alike.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return badRequest(what + " is not valid UTF-8; send UTF-8 text")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return badRequest(what + " holds a NUL byte; send UTF-8 text without NUL bytes")
	}
	return nil
}

// checkRequestText checks the request's path, its path id and its query.
func checkRequestText(pathID, path string, query map[string][]string) error {
	if err := checkText("the request path", path); err != nil {
		return err
	}
	if len(pathID) > MaxIDBytes {
		return badRequest("the id in the path is over 200 bytes; no id is that long")
	}
	for k, vs := range query {
		if err := checkText("query parameter name", k); err != nil {
			return err
		}
		for _, v := range vs {
			if err := checkText("query parameter "+quote(k), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkBodyText refuses a JSON body that is not UTF-8 or whose strings
// (keys or values, at any depth) hold a NUL, escaped as \u0000.
func checkBodyText(body []byte) error {
	if !utf8.Valid(body) {
		return badRequest("the body is not valid UTF-8; send UTF-8 JSON")
	}
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return nil // the decode that follows reports bad JSON
		}
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return badRequest("a string in the body holds a NUL byte (\\u0000); send UTF-8 text without NUL bytes")
		}
	}
}
