package turns

import (
	"errors"
	"strings"
	"testing"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/commands"
)

func TestAPIRefusalNamesEachCommandsRoute(t *testing.T) {
	for _, c := range commands.All {
		t.Run(c.Name, func(t *testing.T) {
			err := commandRefusal(c)
			if !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), "/"+c.Name+" is a chat command") {
				t.Fatalf("refusal %v", err)
			}
			routes := []string{c.Route}
			if c.Route == "" {
				routes = nil
				for _, o := range commands.All {
					if o.Route != "" {
						routes = append(routes, o.Route)
					}
				}
			}
			for _, r := range routes {
				if !strings.Contains(err.Error(), r) {
					t.Errorf("the refusal of /%s doesn't name %q: %v", c.Name, r, err)
				}
			}
		})
	}
}
