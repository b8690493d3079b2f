package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
)

var _ adapters.Checker = (*Adapter)(nil)

// Check asks Discord once whether it takes the bot token, and returns the
// bot's name.
func (a *Adapter) Check(ctx context.Context) (string, error) {
	u, err := a.s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		var rest *discordgo.RESTError
		if errors.As(err, &rest) && rest.Response != nil && rest.Response.StatusCode == http.StatusUnauthorized {
			return "", errors.New("Discord refused the bot token (401); copy it again from the Developer Portal (Bot, Reset Token)")
		}
		return "", fmt.Errorf("ask Discord who the bot is: %w", redact(err, a.token))
	}
	return u.Username, nil
}
