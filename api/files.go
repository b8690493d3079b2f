package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"

	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessionsql"
)

// FileList answers GET /v1/sessions/{id}/files: the session's files and
// their usage against the limits.
type FileList struct {
	Files []files.File `json:"files"`
	Usage files.Usage  `json:"usage"`
}

// fileStore is the session file store the routes use, or a 503.
func (s *server) fileStore() (*files.Store, error) {
	if s.opts.Files == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the session file store is not available on this server")
	}
	return s.opts.Files, nil
}

// uploadFile is POST /v1/sessions/{id}/files: a multipart/form-data body
// with one part "file" (its filename names the file). A file over a limit
// is refused with 413 naming the limit, before it is read whole.
func (s *server) uploadFile(store *files.Store, w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if typ, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); typ != "multipart/form-data" {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, `send the file as multipart/form-data with one part named "file"`)
	}
	lim := store.Limits()
	if r.ContentLength > lim.MaxFileBytes+64<<10 {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the upload is %d bytes and the limit per file is %d bytes (sessions.files.max_file_bytes)", r.ContentLength, lim.MaxFileBytes))
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return badRequest("the body is not multipart/form-data: " + err.Error())
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return badRequest(`the body has no part named "file"; send the file as the form field "file"`)
		}
		if err != nil {
			return badRequest("the multipart body is malformed: " + err.Error())
		}
		if part.FormName() != "file" {
			continue
		}
		name := part.FileName()
		if err := files.CheckName(name); err != nil {
			return badRequest(err.Error() + ` (the "file" part's filename)`)
		}
		// Spooled to a temporary file, so a large upload is never held
		// whole in memory, and the database is written only once it is
		// all here.
		spool, err := os.CreateTemp("", "parley-upload-")
		if err != nil {
			return fmt.Errorf("a temporary file for the upload: %w", err)
		}
		defer func() { spool.Close(); os.Remove(spool.Name()) }()
		size, err := io.Copy(spool, io.LimitReader(part, lim.MaxFileBytes+1))
		if err != nil {
			return badRequest("the upload was cut short: " + err.Error())
		}
		if err := store.CheckSize(size); err != nil {
			return fileError(err)
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return err
		}
		typ := part.Header.Get("Content-Type")
		if typ == "" || typ == "application/octet-stream" {
			typ = files.TypeByName(name)
		}
		f, err := store.PutFrom(r.Context(), sess.ID, name, typ, spool, size)
		if err != nil {
			return fileError(err)
		}
		writeJSON(w, http.StatusCreated, f)
		return nil
	}
}

// listFiles is GET /v1/sessions/{id}/files.
func (s *server) listFiles(store *files.Store, w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	list, err := store.List(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	usage, err := store.Usage(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, FileList{Files: list, Usage: usage})
	return nil
}

// downloadFile is GET /v1/sessions/{id}/files/{name}: the file's bytes,
// as an attachment (never rendered in the API's origin).
func (s *server) downloadFile(store *files.Store, w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := files.CheckName(name); err != nil {
		return badRequest(err.Error())
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	f, body, err := store.Open(r.Context(), sess.ID, name)
	if err != nil {
		return fileError(err)
	}
	defer body.Close()
	w.Header().Set("Content-Type", f.MediaType)
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Name}))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	// A chunk at a time: a large file is never held whole. A read that
	// fails now can only cut the body short, which the length shows.
	_, _ = io.Copy(w, body)
	return nil
}

// deleteFile is DELETE /v1/sessions/{id}/files/{name}.
func (s *server) deleteFile(store *files.Store, w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := files.CheckName(name); err != nil {
		return badRequest(err.Error())
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	found, err := store.Delete(r.Context(), sess.ID, name)
	if err != nil {
		return fileError(err)
	}
	if !found {
		return errorf(http.StatusNotFound, CodeNotFound, "session "+string(sess.ID)+" has no file "+quote(name))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// fileError maps the file store's refusals to 4xx answers that name the
// limit.
func fileError(err error) error {
	switch {
	case errors.Is(err, files.ErrInvalidName):
		return badRequest(err.Error())
	case errors.Is(err, files.ErrNotFound):
		return errorf(http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, files.ErrNoSession):
		return errorf(http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, files.ErrFileTooLarge), errors.Is(err, files.ErrSessionFull), errors.Is(err, files.ErrStoreFull):
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, err.Error())
	}
	return err
}

// sqlSchema answers GET /v1/sessions/{id}/sql/schema: the tables, views,
// indexes and triggers of the session's own SQL database, and its size.
func (s *server) sqlSchema(w http.ResponseWriter, r *http.Request) error {
	if s.opts.SQL == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "session SQL databases are not available on this server")
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	sc, err := s.opts.SQL.Schema(r.Context(), sess.ID)
	if errors.Is(err, sessionsql.ErrNotFound) {
		return errorf(http.StatusNotFound, CodeNotFound, "no session "+quote(string(sess.ID)))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}
