package forward

// SetServedHook sets testHookServed (session.go) for the test's
// duration: the test must set it before starting a gateway and restore
// it after the gateway has stopped.
func SetServedHook(f func()) (restore func()) {
	old := testHookServed
	testHookServed = f
	return func() { testHookServed = old }
}

// SetParkedHook sets testHookParked (session.go), like SetServedHook.
func SetParkedHook(f func()) (restore func()) {
	old := testHookParked
	testHookParked = f
	return func() { testHookParked = old }
}
