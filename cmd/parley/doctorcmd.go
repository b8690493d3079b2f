package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/doctor"
)

// cmdDoctor checks what parley needs, says for each what is wrong and what
// to do, and exits 1 when anything failed.
func cmdDoctor(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("doctor")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	if err := fs.parse(args, 0); err != nil {
		return err
	}
	cfg, used, err := config.LoadForCheck(*fs.config)
	var problems config.Problems
	if err != nil && !errors.As(err, &problems) {
		return err // no file to check
	}
	var configErr error
	if len(problems) > 0 {
		configErr = problems
	} else if cfg != nil {
		// The channels' and providers' checks need the secrets' values.
		configErr = resolveSecrets(ctx, cfg)
	}
	findings := doctor.Doctor(ctx, cfg, configErr)
	failed := 0
	for _, f := range findings {
		if f.Status == doctor.FindingFail {
			failed++
		}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(findings); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "parley doctor: %s\n", config.DisplayPath(used))
		for _, f := range findings {
			fmt.Fprintf(stdout, "%-5s %-18s %s\n", f.Status, f.Check, f.Detail)
			if f.Fix != "" && f.Status != doctor.FindingOK {
				fmt.Fprintf(stdout, "      %-18s → %s\n", "", f.Fix)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed", failed)
	}
	return nil
}
