// Package chat holds conversation turns and renders them into a model's prompt
// (the chat template).
package chat

// Roles used in Message.Role.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn of a conversation. Thinking holds an assistant turn's
// reasoning (the text between <think> and </think>), kept apart from Content so
// that templates can strip it from earlier turns and the UI can fold it.
type Message struct {
	Role     string
	Content  string
	Thinking string
}

// ToolMessage is a Message with OpenAI's tool fields, for PromptTools (kept
// apart so that Message stays comparable).
type ToolMessage struct {
	Message
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall
	// ToolCallID and Name say, on a "tool" turn, which call it answers.
	ToolCallID, Name string
}

// ToolCall is a function call made by an assistant turn.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // a JSON object
}
