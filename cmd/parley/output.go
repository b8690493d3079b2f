package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// printJSON writes v as indented JSON, for a command's --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable writes header, then the lines written to it, in aligned
// columns (tab-separated) when it is flushed.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// printTable prints a table of items, one line each as row writes it, or
// the line none when there are no items.
func printTable[T any](w io.Writer, none, header string, items []T, row func(T) string) error {
	if len(items) == 0 {
		fmt.Fprintln(w, none)
		return nil
	}
	tw := newTable(w, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}
