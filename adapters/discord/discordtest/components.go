package discordtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Component is a message component: an action row (type 1) of buttons
// (type 2), as Discord takes and sends it.
type Component struct {
	Type       int         `json:"type"`
	Components []Component `json:"components,omitempty"`
	Style      int         `json:"style,omitempty"`
	Label      string      `json:"label,omitempty"`
	CustomID   string      `json:"custom_id,omitempty"`
}

// InteractionResponse is one answer to an interaction the fake accepted.
type InteractionResponse struct {
	InteractionID string
	Type          int // 4: a message in the channel, 6/7: an update of the message
	Content       string
	Flags         int // 64: ephemeral, shown to the presser only
}

// checkComponents says what Discord would refuse in a message's
// components: at most five action rows of one to five buttons, each with
// a label of up to 80 characters and a custom_id of 1-100.
func checkComponents(rows []Component) string {
	if len(rows) > 5 {
		return "at most 5 action rows"
	}
	for i, row := range rows {
		if row.Type != 1 {
			return fmt.Sprintf("%d: a top-level component must be an action row (type 1)", i)
		}
		if len(row.Components) == 0 || len(row.Components) > 5 {
			return fmt.Sprintf("%d.components: an action row holds 1-5 buttons", i)
		}
		for j, b := range row.Components {
			switch {
			case b.Type != 2:
				return fmt.Sprintf("%d.components.%d: not a button", i, j)
			case b.Label == "" || len([]rune(b.Label)) > 80:
				return fmt.Sprintf("%d.components.%d.label: must be 1-80 characters", i, j)
			case b.Style < 1 || b.Style > 5:
				return fmt.Sprintf("%d.components.%d.style: not a button style", i, j)
			case b.Style != 5 && (b.CustomID == "" || len(b.CustomID) > 100):
				return fmt.Sprintf("%d.components.%d.custom_id: must be 1-100 characters", i, j)
			}
		}
	}
	return ""
}

// Components returns a message's components now.
func (s *Server) Components(messageID string) []Component {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.messages[messageID]; ok {
		return slices.Clone(m.Components)
	}
	return nil
}

// Press dispatches INTERACTION_CREATE for user pressing the button with
// customID under the bot's message messageID, in a guild channel (guildID
// set) or a DM, and returns the interaction's id.
func (s *Server) Press(guildID, messageID string, user User, customID string) string {
	s.mu.Lock()
	m, ok := s.messages[messageID]
	if !ok {
		s.mu.Unlock()
		panic("discordtest: Press on a message the bot did not send: " + messageID)
	}
	msg := *m
	id := s.newIDLocked()
	token := "itoken-" + id
	s.interactions[id] = token
	s.mu.Unlock()
	if user.Discriminator == "" {
		user.Discriminator = "0"
	}
	i := map[string]any{
		"id": id, "application_id": s.opts.Bot.ID, "type": 3, "token": token, "version": 1,
		"channel_id": msg.ChannelID, "message": msg,
		"data": map[string]any{"custom_id": customID, "component_type": 2},
	}
	if guildID != "" {
		i["guild_id"] = guildID
		i["member"] = map[string]any{"user": user, "roles": []string{}, "joined_at": time.Now().UTC()}
	} else {
		i["user"] = user
	}
	s.Dispatch("INTERACTION_CREATE", i)
	return id
}

// InteractionResponses returns the interaction answers so far.
func (s *Server) InteractionResponses() []InteractionResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.responses)
}

func (s *Server) interactionCallback(w http.ResponseWriter, r *http.Request) {
	id, token := r.PathValue("id"), r.PathValue("token")
	var body struct {
		Type int `json:"type"`
		Data *struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want, ok := s.interactions[id]; !ok || want != token {
		writeError(w, http.StatusNotFound, 10062, "Unknown interaction")
		return
	}
	if body.Type != 4 && body.Type != 6 && body.Type != 7 {
		writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body: type: not a response to a component")
		return
	}
	delete(s.interactions, id) // answered once
	resp := InteractionResponse{InteractionID: id, Type: body.Type}
	if body.Data != nil {
		resp.Content, resp.Flags = body.Data.Content, body.Data.Flags
	}
	s.responses = append(s.responses, resp)
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}

// WaitInteractionResponses waits until at least n interactions were
// answered, and returns the answers.
func (s *Server) WaitInteractionResponses(ctx context.Context, n int) ([]InteractionResponse, error) {
	err := s.wait(ctx, "interaction responses", func() bool { return len(s.responses) >= n })
	return s.InteractionResponses(), err
}
