package dataplane

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

// pathFiles are the files of dataplane that docs/architecture.md names on
// the path of a routed COM_QUERY.
var pathFiles = []string{"session.go", "command.go", "stmt.go", "exchange.go", "pool.go", "poolwait.go"}

// TestRoutedQueryPathFunctions: each step docs/architecture.md names for a
// routed COM_QUERY is in the file it says.
func TestRoutedQueryPathFunctions(t *testing.T) {
	for _, step := range []struct {
		fn   any
		file string
	}{
		{(*Session).serve, "session.go"}, {(*Session).readCommand, "session.go"}, {(*Session).awake, "session.go"},
		{(*Session).admit, "session.go"},
		{(*Session).dispatch, "command.go"}, {(*Session).comQuery, "command.go"}, {(*Session).beginStatement, "command.go"},
		{(*Session).finishCommand, "command.go"}, {(*Session).afterCommand, "command.go"},
		{(*Session).route, "stmt.go"},
		{(*Session).forward, "exchange.go"}, {(*Session).exchange, "exchange.go"}, {(*Session).backendFor, "exchange.go"},
		{(*Session).replicaFor, "exchange.go"}, {(*Session).conn, "exchange.go"}, {(*Session).sync, "exchange.go"},
		{(*Session).send, "exchange.go"}, {(*Session).ran, "exchange.go"},
		{(*Pool).Get, "poolwait.go"},
	} {
		f := runtime.FuncForPC(reflect.ValueOf(step.fn).Pointer())
		file, _ := f.FileLine(f.Entry())
		if filepath.Base(file) != step.file {
			t.Errorf("%s is in %s, docs/architecture.md says %s", f.Name(), filepath.Base(file), step.file)
		}
	}
}

// TestRoutedQueryPathStack: while a replica (a scripted fake backend)
// answers a routed read, the stack of the session that sent it goes
// through no file of dataplane but those the path names.
func TestRoutedQueryPathStack(t *testing.T) {
	const query = "SELECT c FROM sbtest1 WHERE id = 7"
	var master, replica *fakebackend.Server
	for _, p := range []**fakebackend.Server{&master, &replica} {
		srv, err := fakebackend.Start(fakebackend.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		srv.OnUnmatched(fakebackend.OK(0, 0)) // the read-only set-up of a replica connection
		*p = srv
	}
	var mu sync.Mutex
	var stacks []byte
	replica.OnFunc(func(c fakebackend.Command) (fakebackend.Result, bool) {
		if c.Command != protocol.ComQuery || c.Arg != query {
			return fakebackend.Result{}, false
		}
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		mu.Lock()
		stacks = buf[:n]
		mu.Unlock()
		return fakebackend.Rows([]string{"c"}, []any{"x"}), true
	})
	cfg, err := conf.Parse(fmt.Appendf(nil, "[auth]\naddress = \"127.0.0.1:1\"\n[[cluster]]\nname = \"main\"\nuser = \"sluice\"\n"+
		"master = %q\n  [[cluster.replica]]\n  address = %q\n", master.Addr(), replica.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv(t, cfg)
	cluster := env.topo.Current().Clusters[0]
	probed(cluster)
	cnc := &benchConn{in: benchPackets(0, append([]byte{protocol.ComQuery}, query...))}
	s := newSession(env, 1, cnc)
	s.cluster = cluster
	if err := s.serve(); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if got := replica.Queries(); !slices.Contains(got, query) {
		t.Fatalf("the replica got %q, not the read", got)
	}
	mu.Lock()
	defer mu.Unlock()
	session := ""
	for _, g := range strings.Split(string(stacks), "\n\n") {
		if strings.Contains(g, "dataplane.(*Session).serve(") {
			session = g
		}
	}
	if session == "" {
		t.Fatalf("no session goroutine in the stacks taken while the replica answered:\n%s", stacks)
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`/dataplane/(\w+\.go):\d+`).FindAllStringSubmatch(session, -1) {
		if !strings.HasSuffix(m[1], "_test.go") {
			seen[m[1]] = true
		}
	}
	for f := range seen {
		if !slices.Contains(pathFiles, f) {
			t.Errorf("the routed read went through dataplane/%s, which the documented path does not name:\n%s", f, session)
		}
	}
	for _, f := range []string{"session.go", "command.go", "exchange.go"} {
		if !seen[f] {
			t.Errorf("dataplane/%s is not on the session's stack while the replica answers:\n%s", f, session)
		}
	}
}
