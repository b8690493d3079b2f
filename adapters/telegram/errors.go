package telegram

import "errors"

// ErrUnauthorized means Telegram refused the bot token (401). The token
// itself is never part of the message.
var ErrUnauthorized = errors.New("Telegram refused the bot token (401 Unauthorized): check the adapter's token; @BotFather shows it, and /revoke makes a new one")
