package api

// fromConfig takes what o leaves nil of Limits, KnownAgent and
// AgentModels from the running config o.Config.
func (o *Options) fromConfig() {
	running := o.Config
	if running == nil {
		return
	}
	if o.Limits == nil {
		o.Limits = func() Limits {
			h := running().HTTP
			return Limits{MaxTitleChars: h.MaxTitleChars, MaxMetadataBytes: h.MaxMetadataBytes}
		}
	}
	if o.KnownAgent == nil {
		o.KnownAgent = func(id string) bool { _, ok := running().Agent(id); return ok }
	}
	if o.AgentModels == nil {
		o.AgentModels = func(id string) ([]string, string) {
			a, ok := running().Agent(id)
			if !ok {
				return nil, ""
			}
			return a.AllowedModels(), a.ReasoningEffort
		}
	}
}
