package auth

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

const learnHash = "*D821809F681A40A6E379B50D0463EFAE20BDD122"

// lcFirst is what SHOW GRANTS prints at the login of lc, whose default
// role r1 is enabled; lcAsR2 what it prints after SET ROLE r2.
var (
	lcFirst = []string{
		"GRANT `r1` TO `lc`@`%`",
		"GRANT `r2` TO `lc`@`%`",
		"GRANT USAGE ON *.* TO `lc`@`%` IDENTIFIED BY PASSWORD '" + learnHash + "'",
		"GRANT SELECT ON `db`.* TO `lc`@`%`",
		"GRANT USAGE ON *.* TO `r1`",
		"GRANT SELECT ON `db2`.* TO `r1`",
		"SET DEFAULT ROLE `r1` FOR `lc`@`%`",
	}
	lcAsR2 = []string{
		"GRANT `r1` TO `lc`@`%`",
		"GRANT `r2` TO `lc`@`%`",
		"GRANT USAGE ON *.* TO `lc`@`%` IDENTIFIED BY PASSWORD '" + learnHash + "'",
		"GRANT SELECT ON `db`.* TO `lc`@`%`",
		"GRANT USAGE ON *.* TO `r2`",
		"GRANT INSERT ON `db`.* TO `r2`",
		"SET DEFAULT ROLE `r1` FOR `lc`@`%`",
	}
	plainFirst = []string{
		"GRANT USAGE ON *.* TO `pl`@`%` IDENTIFIED BY PASSWORD '" + learnHash + "' WITH MAX_QUERIES_PER_HOUR 10",
		"GRANT SELECT ON `db`.* TO `pl`@`%`",
	}
)

// grantsServer plays an auth server's connection after a login: it answers
// SELECT CURRENT_USER() with user, SHOW GRANTS with the lines of the
// enabled role (role "" until a SET ROLE), and records every query.
type grantsServer struct {
	user  string
	shown map[string][]string
	mu    sync.Mutex
	got   []string
}

func (g *grantsServer) queries() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got)
}

// login opens a connection to a new session of g.
func (g *grantsServer) login(t *testing.T) *protocol.Conn {
	t.Helper()
	srv, cli := net.Pipe()
	t.Cleanup(func() { srv.Close(); cli.Close() })
	_ = srv.SetDeadline(time.Now().Add(10 * time.Second))
	_ = cli.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		c := protocol.NewConn(srv)
		c.LenientSeq = true
		role := ""
		for {
			p, err := c.ReadPacket()
			if err != nil || len(p) == 0 || p[0] != protocol.ComQuery {
				return
			}
			q := string(p[1:])
			g.mu.Lock()
			g.got = append(g.got, q)
			g.mu.Unlock()
			switch {
			case q == "SELECT CURRENT_USER()":
				_, err = protocol.WriteTextColumn(c, nil, "CURRENT_USER()", 100, []string{g.user}, protocol.StatusAutocommit)
			case q == "SHOW GRANTS":
				_, err = protocol.WriteTextColumn(c, nil, "Grants", 1024, g.shown[role], protocol.StatusAutocommit)
			case strings.HasPrefix(q, "SET ROLE `"):
				role = strings.Trim(q[len("SET ROLE "):], "`")
				err = c.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit}))
			default:
				err = c.WriteErr(protocol.ERAccessDenied.New("unexpected %q", q))
			}
			if err != nil {
				return
			}
		}
	}()
	c := protocol.NewConn(cli)
	c.LenientSeq = true
	return c
}

func noHash(t *testing.T, what string, lines []string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l, learnHash[1:]) || strings.Contains(l, "IDENTIFIED") {
			t.Fatalf("%s keeps an IDENTIFIED clause: %q", what, l)
		}
	}
}

// TestLearnGrantsKnownRoles: the second login of an account holding a role
// besides its default one gets the set of the first from the cache,
// recognised by its first SHOW GRANTS answer alone (one round trip, not
// two), and does not make it count as fresh; once the set is older than
// the TTL, or the answer differs, a login reads everything again.
func TestLearnGrantsKnownRoles(t *testing.T) {
	g := &grantsServer{user: "lc@%", shown: map[string][]string{"": lcFirst, "r2": lcAsR2}}
	cache := &GrantsCache{}
	cache.Configure(time.Hour, nil)

	set1, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SELECT CURRENT_USER()", "SHOW GRANTS", "SET ROLE `r2`", "SHOW GRANTS"}
	if q := g.queries(); !slices.Equal(q, want) {
		t.Fatalf("first login asked %q, want %q", q, want)
	}
	noHash(t, "Lines", set1.Lines)
	noHash(t, "First", set1.First)
	if len(set1.First) != len(lcFirst) || set1.First[2] != "GRANT USAGE ON *.* TO `lc`@`%`" {
		t.Fatalf("First = %q", set1.First)
	}
	if !set1.KnowsRole("r2") || slices.Equal(set1.Lines, set1.First) {
		t.Fatalf("the first login did not read r2's grants: %q", set1.Lines)
	}
	e := cache.Put(set1)

	// Again: one round trip, the same set, and it is no fresher.
	const old = int64(time.Second)
	e.fetched.Store(old)
	set2, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	if q := g.queries()[len(want):]; !slices.Equal(q, want[:2]) {
		t.Fatalf("second login asked %q, want %q", q, want[:2])
	}
	if set2 != set1 {
		t.Fatal("the second login parsed the grants again")
	}
	if cache.Put(set2) != e || e.fetched.Load() != old {
		t.Fatal("a set Known lent was stored as read anew")
	}

	// Stale: the login reads r2's grants again, and that counts.
	e.fetched.Store(int64(-time.Hour))
	n := len(g.queries())
	set3, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	if q := g.queries()[n:]; !slices.Equal(q, want) {
		t.Fatalf("login with stale grants asked %q, want %q", q, want)
	}
	if set3 == set1 || !set3.Equal(set1) {
		t.Fatal("stale grants: not a new set of the same grants")
	}
	if cache.Put(set3) != e || e.fetched.Load() == int64(-time.Hour) {
		t.Fatal("grants read anew did not count as fresh")
	}

	// A different first answer: read again.
	g.shown[""] = append(slices.Clone(lcFirst), "GRANT DELETE ON `db3`.* TO `lc`@`%`")
	n = len(g.queries())
	set4, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	if q := g.queries()[n:]; !slices.Equal(q, want) || set4.Equal(set1) {
		t.Fatalf("changed grants: asked %q, new set %v", q, !set4.Equal(set1))
	}
	if cache.Put(set4); e.set.Load() != set4 {
		t.Fatal("changed grants were not stored")
	}
}

// TestPutKeepsNewerThanLent: a set stored while a login held one Known
// lent it (the grants read again by a session) stays.
func TestPutKeepsNewerThanLent(t *testing.T) {
	g := &grantsServer{user: "lc@%", shown: map[string][]string{"": lcFirst, "r2": lcAsR2}}
	cache := &GrantsCache{}
	cache.Configure(time.Hour, nil)
	set1, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	e := cache.Put(set1)
	lent := cache.Known("lc", "%", set1.First)
	if lent != set1 {
		t.Fatal("Known did not lend the set")
	}
	newer, err := learnGrants(g.login(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.store(newer)
	if cache.Put(lent); e.set.Load() != newer {
		t.Fatal("the lent set replaced a newer one")
	}
}

// TestLearnGrantsKnownPlain: an account without other roles is known by
// its one answer whatever the set's age, and its login makes it fresh.
func TestLearnGrantsKnownPlain(t *testing.T) {
	g := &grantsServer{user: "pl@%", shown: map[string][]string{"": plainFirst}}
	cache := &GrantsCache{}
	cache.Configure(time.Second, nil)
	set1, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	noHash(t, "Lines", set1.Lines)
	if !slices.Equal(set1.First, set1.Lines) {
		t.Fatalf("First %q, Lines %q", set1.First, set1.Lines)
	}
	e := cache.Put(set1)
	e.fetched.Store(int64(-time.Hour))
	set2, err := learnGrants(g.login(t), 0, cache.Known)
	if err != nil {
		t.Fatal(err)
	}
	if set2 != set1 || len(g.queries()) != 4 {
		t.Fatalf("second login: same set %v, queries %q", set2 == set1, g.queries())
	}
	if cache.Put(set2); e.fetched.Load() == int64(-time.Hour) {
		t.Fatal("the login's complete answer did not count as fresh")
	}
}

// TestPutKeepsFirst: a set stored without First (as the service account
// reads grants again) is not known by a login's answer, and the next
// login's set, of the same grants but with First, replaces it.
func TestPutKeepsFirst(t *testing.T) {
	g := &grantsServer{user: "pl@%", shown: map[string][]string{"": plainFirst}}
	cache := &GrantsCache{}
	cache.Configure(time.Hour, nil)
	set1, err := learnGrants(g.login(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := cache.Put(set1)
	read, err := learnGrants(g.login(t), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	read.First = nil // as GrantsReader.Read makes it
	e.store(read)
	if cache.Known("pl", "%", set1.First) != nil {
		t.Fatal("a set without First was known")
	}
	if cache.Put(set1); e.set.Load() != set1 {
		t.Fatal("the login's set, with First, was not stored over an equal one without")
	}
}
