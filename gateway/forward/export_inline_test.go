package forward

// SetInlineHook sets testHookInline (backend_inline.go), like
// SetServedHook: f sees whether each engine write went out whole.
func SetInlineHook(f func(whole bool)) (restore func()) {
	old := testHookInline
	testHookInline = f
	return func() { testHookInline = old }
}
