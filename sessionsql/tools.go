package sessionsql

import (
	"context"
	"encoding/json"

	"github.com/parleyd/parley/tools"
)

// The tools' names.
const (
	ExecToolName  = "sql_exec"
	QueryToolName = "sql_query"
)

var sqlSchema = json.RawMessage(`{
	"type": "object",
	"properties": {"sql": {"type": "string", "description": "SQLite SQL"}},
	"required": ["sql"],
	"additionalProperties": false
}`)

func init() {
	tools.RegisterBuiltin("sql", func(deps tools.Deps) []tools.Tool { return Tools(tools.Part[*Store](deps)) })
}

type sqlArgs struct {
	SQL string `json:"sql"`
}

// Tools returns sql_exec and sql_query on store. Each call works on the
// database of the session it runs in (tools.Call.SessionID): no argument
// can name another session's.
func Tools(store *Store) []tools.Tool {
	return []tools.Tool{
		{
			Name: ExecToolName,
			Description: "Change this conversation's own SQLite database: CREATE TABLE, INSERT, UPDATE, DELETE, DROP " +
				"(several statements separated by semicolons run as one; if one fails, none is kept). " +
				"It keeps data across turns. Read it with sql_query.",
			Schema: sqlSchema,
			Run: tools.Decoded(ExecToolName, `{"sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}`,
				func(ctx context.Context, call tools.Call, a sqlArgs) (string, error) {
					return store.Exec(ctx, call.SessionID, a.SQL)
				}),
		},
		{
			Name: QueryToolName,
			Description: "Read this conversation's own SQLite database with one SELECT; the rows come back as a table " +
				"(at most a page of them: use WHERE, LIMIT and OFFSET). SELECT name, sql FROM sqlite_schema lists the tables.",
			Schema: sqlSchema,
			Run: tools.Decoded(QueryToolName, `{"sql": "SELECT * FROM notes LIMIT 20"}`,
				func(ctx context.Context, call tools.Call, a sqlArgs) (string, error) {
					return store.Query(ctx, call.SessionID, a.SQL)
				}),
		},
	}
}
