package forward

// SetInlineHook sets testHookInline (backend_inline.go), like
// SetServedHook: f sees whether each engine write went out whole.
func SetInlineHook(f func(whole bool)) (restore func()) {
	old := testHookInline
	testHookInline = f
	return func() { testHookInline = old }
}

// SetFlushHook sets testHookFlushCalls: f runs just before the calls of
// a backend write go out, by the writer goroutine or by the engine.
func SetFlushHook(f func()) (restore func()) {
	old := testHookFlushCalls
	testHookFlushCalls = func([]*pendingCall) { f() }
	return func() { testHookFlushCalls = old }
}
