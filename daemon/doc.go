// Package daemon is parley's life: New builds every part from a config
// (the database and its migrations, the secrets store, the sessions store,
// the agent runner and the turn bridge over it, the gateway with its
// outbox sender, memory, cron, the channels, the HTTP server), Start brings
// them up in order (a failed start stops what started), Stop takes them
// down in the order that loses nothing (stop taking messages, drain the
// lanes, send what is queued, stop the channels), and Reload puts a new
// config in place of the running one, refusing whole a change only a
// restart applies. It keeps the order of things and the wiring between
// the parts; what each part does lives in its own package (see
// docs/architecture.md).
package daemon
