package tools

import "encoding/json"

// CheckSchema reports whether raw is a schema the registry checks
// arguments against: nil if so, else why not (not a JSON object, or a
// keyword outside the subset it checks). A tool whose schema it refuses
// can't be registered with that schema.
func CheckSchema(raw json.RawMessage) error {
	_, err := compileSchema(raw)
	return err
}
