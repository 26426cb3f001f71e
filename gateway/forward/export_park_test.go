package forward

// SetServedHook sets testHookServed (session.go) for the test's
// duration: the test must set it before starting a gateway and restore
// it after the gateway has stopped.
func SetServedHook(f func()) (restore func()) {
	old := testHookServed
	testHookServed = f
	return func() { testHookServed = old }
}
