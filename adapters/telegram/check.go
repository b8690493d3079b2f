package telegram

import (
	"context"
	"errors"
	"fmt"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
)

var _ adapters.Checker = (*Adapter)(nil)

// Check asks getMe once whether Telegram takes the token, and returns the
// bot's @username.
func (a *Adapter) Check(ctx context.Context) (string, error) {
	var u tgbotapi.User
	if err := a.api.callInto(ctx, "getMe", nil, &u); err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return "", fmt.Errorf("Telegram refused the bot token (401); copy it again from @BotFather (/token)")
		}
		return "", fmt.Errorf("getMe: %w", err)
	}
	who := "@" + u.UserName
	if a.cfg.mode != ModeWebhook {
		return who, nil
	}
	// In webhook mode, what Telegram says of reaching the webhook.
	var info tgbotapi.WebhookInfo
	if err := a.api.callInto(ctx, "getWebhookInfo", nil, &info); err != nil {
		return "", fmt.Errorf("getWebhookInfo: %w", err)
	}
	switch {
	case info.URL == "":
		return who + "; no webhook set yet (parley run sets " + a.cfg.webhookURL + ")", nil
	case info.URL != a.cfg.webhookURL:
		return who + "; the webhook is " + info.URL + ", parley run will set " + a.cfg.webhookURL, nil
	case info.LastErrorMessage != "":
		return "", fmt.Errorf("Telegram can't deliver to the webhook %s: %s (%d updates waiting); check that the address reaches parley's http.listen over https",
			info.URL, info.LastErrorMessage, info.PendingUpdateCount)
	}
	return who + "; Telegram reaches the webhook " + info.URL, nil
}
