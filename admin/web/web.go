// Package web serves sluice's status page and its read-only REST API on
// the metrics listener. It reads the running server only through
// admin.Control and builds every answer with the admin port's SHOW
// functions, so the page, the JSON and the admin port's result sets show
// the same data. Its handlers are safe for concurrent use.
package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/sluice-proxy/sluice/admin"
)

// assets are the page, its script and its style sheet: the page loads
// nothing from other hosts, so it works where the browser has no Internet.
//
//go:embed assets
var assets embed.FS

// Register adds the status page ("/", "/assets/...") and the API
// ("/api/v1/...") to mux. Only GET and HEAD are served: the API changes
// nothing, which is why it needs no more than the listener's optional basic
// auth.
func Register(mux *http.ServeMux, ctl admin.Control) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /api/v1/clusters", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string][]Row{
			"clusters": Rows(admin.ShowClusters(ctl)),
			"backends": Rows(admin.ShowBackends(ctl)),
			"pools":    Rows(admin.ShowPools(ctl)),
		})
	})
	mux.HandleFunc("GET /api/v1/sessions", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string][]Row{"sessions": Rows(admin.ShowSessions(ctl))})
	})
	mux.HandleFunc("GET /api/v1/digests", func(w http.ResponseWriter, r *http.Request) {
		limit := -1 // all, as SHOW QUERY DIGESTS without LIMIT
		if s := r.URL.Query().Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				http.Error(w, "limit must be a number >= 0", http.StatusBadRequest)
				return
			}
			limit = n
		}
		writeJSON(w, map[string][]Row{"digests": Rows(admin.ShowDigests(ctl, limit))})
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string][]Row{"events": Rows(admin.ShowEvents(ctl))})
	})
}

// Row is one row of an admin result set as the API shows it: the column
// names are the keys, the values the text the admin port sends.
type Row map[string]string

// Rows turns t into one Row per row. It never returns nil, so an empty
// result is the JSON [] and not null.
func Rows(t *admin.Table) []Row {
	out := make([]Row, 0, len(t.Rows))
	for _, r := range t.Rows {
		row := make(Row, len(t.Columns))
		for i, c := range t.Columns {
			row[c] = r[i]
		}
		out = append(out, row)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v) // the client went away, or v is ours and encodes
}

// BasicAuth returns next behind HTTP basic auth for user and password,
// except for the paths in open (such as /healthz, which a liveness probe
// reads without credentials). Wrong or missing credentials get 401 with a
// WWW-Authenticate challenge. The comparison takes the same time whatever
// the credentials are, so its timing does not tell how much of a guess was
// right.
func BasicAuth(user, password string, next http.Handler, open ...string) http.Handler {
	wantUser, wantPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range open {
			if r.URL.Path == p {
				next.ServeHTTP(w, r)
				return
			}
		}
		u, p, ok := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		userOK := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
		passOK := subtle.ConstantTimeCompare(gotPass[:], wantPass[:])
		if !ok || userOK&passOK != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="sluice", charset="UTF-8"`)
			http.Error(w, "sluice: credentials needed (proxy.metrics_user)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
