package gateway

import (
	"encoding/json"
	"net/http"
)

// SessionsPath is where the live view is served as JSON: on the metrics
// listener with metrics.sessions, and on the admin socket.
const SessionsPath = "/debug/sessions"

// SessionsHandler serves list() as JSON (GET only).
func SessionsHandler(list func() Sessions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(list()) //nolint:errcheck // the client went away
	})
}

// ServeSessions adds /debug/sessions to the metrics listener, answering
// only while on (metrics.sessions, which a reload may flip). ms may be
// nil (metrics off).
func (ms *MetricsServer) ServeSessions(list func() Sessions, on bool) {
	if ms == nil {
		return
	}
	ms.sessionsOn.Store(on)
	h := SessionsHandler(list)
	ms.mux.Handle(SessionsPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ms.sessionsOn.Load() {
			http.Error(w, "the live view is off (metrics.sessions: false)", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}))
}
