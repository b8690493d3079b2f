package telemetry

// Span and attribute names. The model call's follow OpenTelemetry's GenAI
// semantic conventions, which LLM observability tools read; parley's own
// are under "parley.".
const (
	SpanTurn       = "turn"
	SpanQueueWait  = "queue wait"
	SpanHistory    = "history read"
	SpanCompaction = "compaction"
	SpanPermission = "permission wait"
	SpanOutboxSend = "outbox send"
	SpanCronFire   = "cron fire"
	SpanCallback   = "reply callback"

	GenAIOperation    = "gen_ai.operation.name"
	GenAIProvider     = "gen_ai.provider.name"
	GenAISystem       = "gen_ai.system"
	GenAIRequestModel = "gen_ai.request.model"
	GenAIMaxTokens    = "gen_ai.request.max_tokens"
	GenAIResponseMod  = "gen_ai.response.model"
	GenAIFinish       = "gen_ai.response.finish_reasons"
	GenAIInputTokens  = "gen_ai.usage.input_tokens"
	GenAIOutputTokens = "gen_ai.usage.output_tokens"
	// GenAITimeToFirst is seconds from the call to the first streamed
	// token, named after the conventions' gen_ai.server.time_to_first_token
	// metric; the moment is also the event GenAIFirstToken.
	GenAITimeToFirst  = "gen_ai.response.time_to_first_token"
	GenAIFirstToken   = "gen_ai.first_token"
	GenAIToolName     = "gen_ai.tool.name"
	GenAIToolCallID   = "gen_ai.tool.call.id"
	GenAIConversation = "gen_ai.conversation.id"
	GenAIAgentID      = "gen_ai.agent.id"

	AttrSession   = "parley.session.id"
	AttrChannel   = "parley.channel"
	AttrMessages  = "parley.messages"
	AttrMCPServer = "parley.mcp.server"
	AttrInput     = "parley.message.text"
	AttrOutput    = "parley.reply.text"
)
