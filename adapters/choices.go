package adapters

import "context"

// Choice is one button under a message: what it says, and the data a
// press on it sends back (at most MaxChoiceData bytes).
type Choice struct {
	Label string
	Data  string
}

// MaxChoiceData is the most bytes a Choice's Data may have: Telegram's
// limit on callback data (Discord allows 100).
const MaxChoiceData = 64

// A Chooser is a channel that can put buttons under a message (a
// question with its answers) and take them away once it is answered.
// Presses come back through the sink's PressSink.
type Chooser interface {
	// SendChoices sends out with a button for each choice.
	SendChoices(ctx context.Context, out Outbound, choices []Choice) (Sent, error)
	// CloseChoices replaces the text of a message SendChoices sent and
	// removes its buttons.
	CloseChoices(ctx context.Context, chatID, messageID, text string) error
}

// Press is a person pressing a button of a message sent by SendChoices.
type Press struct {
	Adapter     ID
	Surface     string
	ChatID      string
	UserID      string
	DisplayName string
	// MessageID is the platform's id of the message the button is under.
	MessageID string
	// Data is the pressed Choice's Data.
	Data string
	// Group says the chat has several people (its session is shared).
	Group bool
}

// CommandPrefix starts the Data of a button that runs a chat command as
// if the presser typed it: "cmd:/model openai/gpt-4o".
const CommandPrefix = "cmd:"

// A PressSink takes button presses. The sink a channel is started with
// may implement it (the daemon's does); a channel that sends choices
// hands each press to it and shows the returned note to the person who
// pressed, briefly ("Allowed once", or why the press did nothing).
type PressSink interface {
	Press(ctx context.Context, p Press) (note string)
}
