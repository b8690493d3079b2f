package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// decode reads one JSON object from r's body into v: at most MaxBody
// bytes (413 beyond), no unknown fields, nothing after it. An empty body
// decodes as {} when emptyOK.
func (s *server) decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "send the body as application/json")
		}
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return badRequest("could not read the body: " + err.Error())
	}
	if err := checkBodyText(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return err
		case errors.Is(err, io.EOF):
			if emptyOK {
				return nil
			}
			return badRequest("request body is empty; send a JSON object")
		}
		return badRequest("invalid JSON body: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return badRequest("invalid JSON body: unexpected data after the object")
	}
	return nil
}

// queryInt reads an integer query parameter, def when absent.
func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(fmt.Sprintf("%s must be an integer from %d to %d", name, lo, hi))
	}
	return n, nil
}

// queryBool reads a boolean query parameter, false when absent.
func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(name + " must be true or false")
	}
	return b, nil
}
