package sessionsql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyd/parley/sessions"
)

// maxCell caps a value shown in a query's table, in characters.
const maxCell = 200

// Exec runs statements (one or more, separated by semicolons) on the
// session's database and keeps what they changed; a statement that fails
// keeps nothing of the call. It says how many rows changed.
func (s *Store) Exec(ctx context.Context, id sessions.ID, text string) (string, error) {
	if err := check(text); err != nil {
		return "", err
	}
	var changed int64
	err := s.open(ctx, id, true, func(ctx context.Context, conn *sql.Conn) error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, text)
		if err != nil {
			_ = tx.Rollback()
			return err
		}
		changed, _ = res.RowsAffected()
		return tx.Commit()
	})
	if err != nil {
		return "", err
	}
	size, _ := s.Size(ctx, id)
	return fmt.Sprintf("OK: %d row(s) changed; the database holds %s of %s.", changed, bytes(size), bytes(s.Limits().MaxBytes)), nil
}

// Query runs one read-only statement and returns its rows as a table, at
// most MaxRows of them (the rest counted).
func (s *Store) Query(ctx context.Context, id sessions.ID, text string) (string, error) {
	if err := check(text); err != nil {
		return "", err
	}
	lim := s.Limits()
	var out strings.Builder
	err := s.open(ctx, id, false, func(ctx context.Context, conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, text)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		if len(cols) == 0 {
			out.WriteString("The statement returns no columns; read with SELECT, and change the database with sql_exec.")
			return nil
		}
		row := func(cells []string) {
			out.WriteString("| ")
			out.WriteString(strings.Join(cells, " | "))
			out.WriteString(" |\n")
		}
		row(cols)
		sep := make([]string, len(cols))
		for i := range sep {
			sep[i] = "---"
		}
		row(sep)
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n := 0
		for rows.Next() {
			n++
			if n > lim.MaxRows {
				continue // counted, not shown
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			cells := make([]string, len(vals))
			for i, v := range vals {
				cells[i] = cell(v)
			}
			row(cells)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		switch {
		case n > lim.MaxRows:
			fmt.Fprintf(&out, "(%d rows; the first %d shown, sessions.sql.max_rows: narrow it with WHERE or LIMIT, or page with OFFSET)", n, lim.MaxRows)
		case n == 1:
			out.WriteString("(1 row)")
		default:
			fmt.Fprintf(&out, "(%d rows)", n)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return out.String(), nil
}

// cell is a value as a table shows it: NULL, text on one line with | and
// newlines escaped, blobs by their size, cut at maxCell characters.
func cell(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		if !utf8.Valid(v) {
			return fmt.Sprintf("<%d bytes>", len(v))
		}
		s = string(v)
	default:
		s = fmt.Sprint(v)
	}
	s = strings.NewReplacer("|", `\|`, "\n", `\n`, "\r", `\r`).Replace(s)
	if utf8.RuneCountInString(s) > maxCell {
		s = string([]rune(s)[:maxCell]) + "…"
	}
	return s
}

// Object is one table, view, index or trigger of a session's database.
type Object struct {
	Type string `json:"type"`
	Name string `json:"name"`
	// Table is the table an index or trigger belongs to.
	Table string `json:"table"`
	// SQL is the statement that made it.
	SQL string `json:"sql"`
}

// Schema is what a session's database holds: its objects, and its size.
type Schema struct {
	Objects  []Object `json:"objects"`
	Bytes    int64    `json:"bytes"`
	MaxBytes int64    `json:"max_bytes"`
}

// Schema reads the session's database's schema.
func (s *Store) Schema(ctx context.Context, id sessions.ID) (Schema, error) {
	sc := Schema{Objects: []Object{}, MaxBytes: s.Limits().MaxBytes}
	err := s.open(ctx, id, false, func(ctx context.Context, conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, `SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_schema
			WHERE name NOT LIKE 'sqlite_%' ORDER BY type = 'table' DESC, name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o Object
			if err := rows.Scan(&o.Type, &o.Name, &o.Table, &o.SQL); err != nil {
				return err
			}
			sc.Objects = append(sc.Objects, o)
		}
		return rows.Err()
	})
	if err != nil {
		return Schema{}, err
	}
	sc.Bytes, err = s.Size(ctx, id)
	return sc, err
}

func bytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
