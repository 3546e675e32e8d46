package health

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The decisions of the failover sequence over server states, without servers. The sequence
// itself runs against real servers in failover_test.go and tests/failover_test.go.

// replica is a reachable MariaDB replica with IO thread state io ("" for a server that
// replicates from no one) that received recv.
func replica(addr, io, recv string) *member {
	m := &member{addr: addr}
	m.st.Flavor = FlavorMariaDB
	m.st.ReadOnly = true
	if io != "" {
		m.st.Replica = ReplicaStatus{Configured: true, IORunning: io, SQLRunning: true, MasterHost: "10.0.0.1", MasterPort: 3306,
			Received: MustParseGTID(FlavorMariaDB, recv), Executed: MustParseGTID(FlavorMariaDB, recv)}
	}
	return m
}

func unreachable(addr string) *member {
	return &member{addr: addr, err: errors.New("connection refused")}
}

func writable(m *member) *member { m.st.ReadOnly = false; return m }

func TestConfirmMasterDown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []*member
		want    string // "" = confirmed, else error substring
	}{
		{"all lost it", []*member{replica("a", "Connecting", "0-1-5"), replica("b", "Preparing", "0-1-5")}, ""},
		{"one lost it, one stopped by hand", []*member{replica("a", "Connecting", "0-1-5"), replica("b", "No", "0-1-5")}, ""},
		{"only stopped by hand: tells nothing", []*member{replica("a", "No", "0-1-5")}, "IO threads stopped by hand"},
		{"stopped on an error", []*member{ioError(replica("a", "No", "0-1-5"))}, ""},
		{"one unreachable", []*member{unreachable("a"), replica("b", "Connecting", "0-1-5")}, ""},
		{"one still receives", []*member{replica("a", "Connecting", "0-1-5"), replica("b", "Yes", "0-1-5")}, "IO thread of b still receives"},
		{"none reachable", []*member{unreachable("a"), unreachable("b")}, "no reachable replica"},
		{"none replicates", []*member{replica("a", "", ""), unreachable("b")}, "no reachable replica"},
		{"a standalone one is ignored", []*member{replica("a", "", ""), replica("b", "Preparing", "0-1-5")}, ""},
		{"a replica of another server tells nothing", []*member{elsewhere(replica("a", "Connecting", "0-1-5"))}, "no reachable replica"},
		{"the master by another name counts", []*member{alias(replica("a", "Connecting", "0-1-5"))}, ""},
		{"the master by another name still receiving blocks", []*member{alias(replica("a", "Yes", "0-1-5")), replica("b", "Connecting", "0-1-5")}, "IO thread of a"},
		{"a replica of another server does not block", []*member{elsewhere(replica("a", "Yes", "0-1-5")), replica("b", "Connecting", "0-1-5")}, ""},
	} {
		err := confirmMasterDown(tc.members, []string{"10.0.0.2:3306"}, false)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestConfirmMasterDownResumed(t *testing.T) {
	// A candidate that forgot its master cannot confirm; a resumed failover needs none.
	members := []*member{replica("a", "", ""), unreachable("b")}
	if err := confirmMasterDown(members, nil, true); err != nil {
		t.Errorf("resumed, nobody left to confirm: %v", err)
	}
	members = append(members, replica("c", "Yes", "0-1-5"))
	if err := confirmMasterDown(members, nil, true); err == nil {
		t.Error("resumed, but a replica still receives from the master: confirmed")
	}
}

func ioError(m *member) *member {
	m.st.Replica.LastIOErrno, m.st.Replica.LastIOError = 1236, "could not find GTID"
	return m
}

func elsewhere(m *member) *member { m.st.Replica.MasterHost = "10.0.0.2"; return m }

func alias(m *member) *member { m.st.Replica.MasterHost = "db-master.example"; return m }

func TestBinlogStateLacks(t *testing.T) {
	st, err := ParseBinlogState(FlavorMariaDB, "0-1-6,0-2-106,1-1-4")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pos, lacks string // lacks: a substring, "" for none
	}{
		{"0-1-6", ""},
		{"0-1-5", ""},
		{"0-2-100", ""},
		{"0-2-106,1-1-4", ""},
		// Received from the old master (server 1) after the promotion at 0-1-6: the new
		// master's seq 106 must not hide them.
		{"0-1-56", "0-1-56"},
		{"1-1-5", "1-1-5"},
		// A server the binary log has nothing from: the sequence numbers decide.
		{"0-3-50", ""},
		{"0-3-107", "0-3-107"},
		{"2-1-1", "2-1-1"},
	} {
		got := st.Lacks(MustParseGTID(FlavorMariaDB, tc.pos))
		if (tc.lacks == "") != (got == "") || !strings.Contains(got, tc.lacks) {
			t.Errorf("Lacks(%s) = %q, want %q", tc.pos, got, tc.lacks)
		}
	}
	// A domain the binary log never saw counts as far as replication applied it.
	withApplied := st.WithApplied(MustParseGTID(FlavorMariaDB, "0-1-6,3-1-9"))
	if got := withApplied.Lacks(MustParseGTID(FlavorMariaDB, "3-1-9")); got != "" {
		t.Errorf("a domain only in gtid_slave_pos: Lacks = %q", got)
	}
	if got := withApplied.Lacks(MustParseGTID(FlavorMariaDB, "3-1-10")); got == "" {
		t.Error("beyond gtid_slave_pos in a domain the log never saw: nothing lacking")
	}
	if got := st.Position().String(); got != "0-2-106,1-1-4" {
		t.Errorf("Position = %s", got)
	}
	if _, err := ParseBinlogState(FlavorMariaDB, "0-1"); !errors.Is(err, ErrBadGTID) {
		t.Errorf("bad state: %v", err)
	}
}

func TestHasMajority(t *testing.T) {
	for _, tc := range []struct {
		got, n int
		want   bool
	}{{0, 0, false}, {1, 1, true}, {1, 2, false}, {2, 2, true}, {2, 3, true}, {1, 3, false}, {2, 4, false}, {3, 4, true}} {
		if hasMajority(tc.got, tc.n) != tc.want {
			t.Errorf("hasMajority(%d, %d) = %v", tc.got, tc.n, !tc.want)
		}
	}
}

func TestChoose(t *testing.T) {
	// behind received recv and applied exec; sql says whether its SQL thread runs (errno when
	// it stopped on an error); delay is MASTER_DELAY.
	behind := func(addr, recv, exec string, sql bool, errno, delay int) *member {
		m := replica(addr, "Connecting", recv)
		m.st.Replica.Executed = MustParseGTID(FlavorMariaDB, exec)
		m.st.Replica.SQLRunning, m.st.Replica.LastSQLErrno, m.st.Replica.SQLDelay = sql, errno, delay
		return m
	}
	standalone := func(addr, pos string) *member {
		m := replica(addr, "", "")
		m.st.BinlogPos = MustParseGTID(FlavorMariaDB, pos)
		return m
	}
	for _, tc := range []struct {
		name    string
		members []*member
		order   []string // the candidates, best first
		lacking []string // the others that take part, which lack something
		skipped []string // addresses, with a reason each
	}{
		{"most received", []*member{replica("a", "Connecting", "0-1-5"), replica("b", "Connecting", "0-1-7")}, []string{"b"}, []string{"a"}, nil},
		{"tie goes to configured order", []*member{replica("a", "Connecting", "0-1-7"), replica("b", "Connecting", "0-1-7")}, []string{"a", "b"}, nil, nil},
		{"server id does not matter", []*member{replica("a", "Connecting", "0-1-7"), replica("b", "Connecting", "0-2-7")}, []string{"a", "b"}, nil, nil},
		{"unreachable skipped", []*member{unreachable("a"), replica("b", "Connecting", "0-1-3")}, []string{"b"}, nil, []string{"a"}},
		{"a stopped SQL thread does not hide what it received", []*member{
			behind("a", "0-1-9", "0-1-3", false, 0, 0), replica("b", "No", "0-1-5")}, []string{"a"}, []string{"b"}, nil},
		{"tie: applied more first", []*member{behind("a", "0-1-9", "0-1-5", true, 0, 0), behind("b", "0-1-9", "0-1-9", true, 0, 0)},
			[]string{"b", "a"}, nil, nil},
		{"tie: undelayed first", []*member{behind("a", "0-1-9", "0-1-9", true, 0, 20), behind("b", "0-1-9", "0-1-9", true, 0, 0)},
			[]string{"b", "a"}, nil, nil},
		{"delayed and behind goes last", []*member{behind("a", "0-1-9", "0-1-2", true, 0, 20), behind("b", "0-1-9", "0-1-8", false, 0, 0)},
			[]string{"b", "a"}, nil, nil},
		{"SQL error goes last", []*member{behind("a", "0-1-9", "0-1-9", false, 1062, 0), behind("b", "0-1-9", "0-1-7", true, 0, 0)},
			[]string{"b", "a"}, nil, nil},
		{"read-only standalone counts with its position", []*member{standalone("a", "0-1-9"), replica("b", "Connecting", "0-1-7")},
			[]string{"a"}, []string{"b"}, nil},
		{"diverged: nobody has everything", []*member{
			replica("a", "Connecting", "0-1-5,1-1-1"), replica("b", "Connecting", "0-1-9")}, nil, []string{"a", "b"}, nil},
		{"nobody", []*member{unreachable("a"), writable(replica("b", "", ""))}, nil, nil, []string{"a", "b"}},
	} {
		c := choose(tc.members)
		var order []string
		for _, m := range c.order {
			order = append(order, m.addr)
		}
		if !reflect.DeepEqual(order, tc.order) {
			t.Errorf("%s: order %v, want %v", tc.name, order, tc.order)
		}
		for _, set := range []struct {
			what string
			got  map[string]string
			want []string
		}{{"lacking", c.lacking, tc.lacking}, {"skipped", c.skipped, tc.skipped}} {
			if len(set.got) != len(set.want) {
				t.Errorf("%s: %s %v, want %v", tc.name, set.what, set.got, set.want)
			}
			for _, a := range set.want {
				if why := set.got[a]; why == "" {
					t.Errorf("%s: %s not %s with a reason: %v", tc.name, a, set.what, set.got)
				}
			}
		}
	}
}

func TestPromotedElsewhere(t *testing.T) {
	f := &Failover{Cluster: "main", Master: "m:3306"}
	down := errors.New("refused")
	for _, tc := range []struct {
		name      string
		masterErr error
		members   []*member
		want      string
		wantErr   error
	}{
		{"nothing promoted", down, []*member{replica("a", "Connecting", "0-1-1"), replica("b", "Connecting", "0-1-1")}, "", nil},
		{"a writable replica that still replicates is not a master", down, []*member{writable(replica("a", "Connecting", "0-1-1"))}, "", nil},
		{"promoted by another instance", down, []*member{writable(replica("a", "", "")), replica("b", "Yes", "0-1-1")}, "a", nil},
		{"read-only standalone is not promoted", down, []*member{replica("a", "", "")}, "", nil},
		{"two promoted", down, []*member{writable(replica("a", "", "")), writable(replica("b", "", ""))}, "", ErrAmbiguousMaster},
		{"promoted while the master is reachable", nil, []*member{writable(replica("a", "", ""))}, "", ErrAmbiguousMaster},
	} {
		got, err := f.promotedElsewhere(tc.masterErr, tc.members)
		if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestDiscover(t *testing.T) {
	master := func(addr string) *member { return writable(replica(addr, "", "")) }
	following := func(addr, src string) *member {
		m := replica(addr, "Yes", "0-1-1")
		m.st.Replica.MasterHost, m.st.Replica.MasterPort = strings.Split(src, ":")[0], 3306
		return m
	}
	for _, tc := range []struct {
		name     string
		members  []*member
		known    string
		want     Discovery
		wantErr  error
		errNames []string
	}{
		{"plain", []*member{master("m:3306"), following("r1:3306", "m:3306")}, "",
			Discovery{Master: "m:3306"}, nil, nil},
		{"writable replica reported", []*member{master("m:3306"), writable(following("r1:3306", "m:3306"))}, "",
			Discovery{Master: "m:3306", WritableReplicas: []string{"r1:3306"}}, nil, nil},
		{"unreachable reported", []*member{unreachable("m:3306"), master("r1:3306")}, "",
			Discovery{Master: "r1:3306", Unreachable: map[string]string{"m:3306": "connection refused"}}, nil, nil},
		{"two writable, no record", []*member{master("m:3306"), master("r1:3306"), following("r2:3306", "r1:3306")}, "",
			Discovery{}, ErrAmbiguousMaster, []string{"m:3306", "r1:3306"}},
		{"two writable, the record settles it", []*member{master("m:3306"), master("r1:3306"), following("r2:3306", "r1:3306")}, "r1:3306",
			Discovery{Master: "r1:3306", Stale: []string{"m:3306"}}, nil, nil},
		{"two writable, a replica contradicts the record", []*member{master("m:3306"), master("r1:3306"), following("r2:3306", "m:3306")}, "r1:3306",
			Discovery{}, ErrAmbiguousMaster, []string{"r2:3306 replicates from m:3306"}},
		{"all read-only", []*member{replica("m:3306", "", ""), following("r1:3306", "m:3306")}, "",
			Discovery{}, ErrNoMaster, nil},
	} {
		got, err := discover("main", tc.members, tc.known)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.wantErr)
		}
		for _, n := range tc.errNames {
			if err == nil || !strings.Contains(err.Error(), n) {
				t.Errorf("%s: error %v does not name %s", tc.name, err, n)
			}
		}
		if tc.wantErr == nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestFailoverBlocked: within failover_block of the last failover Run refuses before it
// contacts any server (the addresses here do not exist).
func TestFailoverBlocked(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := &Failover{Cluster: "main", Master: "192.0.2.1:3306", Replicas: []string{"192.0.2.2:3306"},
		LastFailover: now.Add(-5 * time.Minute), Block: 10 * time.Minute, Now: func() time.Time { return now }}
	_, err := f.Run(context.Background())
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "2026-05-01T12:05:00Z") || !strings.Contains(err.Error(), "main") {
		t.Fatalf("Run within the block: %v", err)
	}
}

func TestFailoverState(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := ReadFailoverState(dir, "main"); ok || err != nil {
		t.Fatalf("no file: ok %v, %v", ok, err)
	}
	var s FailoverState
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r1 := &Result{Cluster: "main", Outcome: OutcomePromoted, Epoch: 2, OldMaster: "m:1", NewMaster: "r1:1", Flavor: "mariadb",
		Started: t0, Finished: t0.Add(time.Second), PromotedAt: "0-2-10",
		Steps: []Step{{"survey", 3 * time.Millisecond}, {"promote", 40 * time.Millisecond}}}
	s.Record(r1)
	if s.Cluster != "main" || s.Epoch != 2 || s.Master != "r1:1" || !reflect.DeepEqual(s.Fenced, []string{"m:1"}) || !s.LastFailover.Equal(r1.Finished) {
		t.Fatalf("after Record: %+v", s)
	}
	s.RecordFence(FenceResult{Addr: "m:1", Errant: "domain 0 seq 11 (last 0-1-11)"})
	if s.History[0].Errant == "" {
		t.Error("RecordFence did not reach the history")
	}
	// A second failover back to m:1 unfences it and fences r1:1.
	s.Record(&Result{Cluster: "main", Outcome: OutcomeFollowed, Epoch: 3, OldMaster: "r1:1", NewMaster: "m:1", Finished: t0.Add(time.Hour)})
	if !reflect.DeepEqual(s.Fenced, []string{"r1:1"}) || s.Master != "m:1" || s.Epoch != 3 {
		t.Fatalf("after the second Record: %+v", s)
	}
	if err := WriteFailoverState(dir, s); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadFailoverState(dir, "main")
	if err != nil || !ok {
		t.Fatalf("read back: %v %v", ok, err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, s)
	}
	if pos, err := got.History[0].PromotedPosition(); err != nil || pos.String() != "0-2-10" {
		t.Errorf("PromotedPosition = %v, %v", pos, err)
	}
	if got.History[0].Took("promote") != 40*time.Millisecond || got.History[0].Took("nope") != 0 {
		t.Errorf("Took: %v", got.History[0].Steps)
	}
	// Overwriting leaves one file and no temporaries.
	s.Unfence("r1:1")
	if err := WriteFailoverState(dir, s); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "failover-main.json" {
		t.Errorf("state dir holds %v", entries)
	}
	if got, _, _ := ReadFailoverState(dir, "main"); len(got.Fenced) != 0 {
		t.Errorf("Unfence not saved: %v", got.Fenced)
	}
	for range maxHistory + 5 {
		s.Record(&Result{Cluster: "main", OldMaster: "a", NewMaster: "b"})
	}
	if len(s.History) != maxHistory {
		t.Errorf("history holds %d", len(s.History))
	}

	if p := FailoverStatePath("/x", "a/b c"); p != "/x/failover-a_b_c.json" {
		t.Errorf("FailoverStatePath = %s", p)
	}
	if err := WriteFailoverState(filepath.Join(dir, "missing"), s); err == nil {
		t.Error("writing into a missing dir succeeded")
	}
	if err := WriteFailoverState(dir, FailoverState{}); err == nil {
		t.Error("state without a cluster was written")
	}
	if err := os.WriteFile(FailoverStatePath(dir, "bad"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFailoverState(dir, "bad"); err == nil || !strings.Contains(err.Error(), "failover-bad.json") {
		t.Errorf("bad file: %v", err)
	}
	if err := os.WriteFile(FailoverStatePath(dir, "other"), []byte(`{"cluster":"main"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFailoverState(dir, "other"); err == nil || !strings.Contains(err.Error(), `"main"`) {
		t.Errorf("file of another cluster: %v", err)
	}
}

func TestRepairStranded(t *testing.T) {
	following := func(addr, src, io string) *member {
		m := replica(addr, io, "0-1-5")
		h, p, _ := splitAddr(src)
		m.st.Replica.MasterHost, m.st.Replica.MasterPort = h, p
		return m
	}
	r := &Repair{Master: "127.0.0.1:3", From: []string{"127.0.0.1:1"}}
	noOne := &Repair{Master: "127.0.0.1:3", From: []string{"127.0.0.1:1"}, NoOne: true}
	for _, tc := range []struct {
		name string
		r    *Repair
		m    *member
		want bool
	}{
		{"follows the master", r, following("127.0.0.1:2", "127.0.0.1:3", "Yes"), false},
		{"follows the master by another loopback name", r, following("127.0.0.1:2", "localhost:3", "Connecting"), false},
		{"follows an old master", r, following("127.0.0.1:2", "127.0.0.1:1", "Yes"), true},
		{"follows an old master that is down", r, following("127.0.0.1:2", "127.0.0.1:1", "Connecting"), true},
		{"chained under another replica: left to the DBA", r, following("127.0.0.1:2", "127.0.0.1:4", "Yes"), false},
		{"from no one, not asked", r, replica("127.0.0.1:2", "", ""), false},
		{"from no one, read-only, asked", noOne, replica("127.0.0.1:2", "", ""), true},
		{"from no one, writable: a master, not a replica", noOne, writable(replica("127.0.0.1:2", "", "")), false},
		{"unreachable", noOne, unreachable("127.0.0.1:2"), false},
		{"the master itself", noOne, replica("127.0.0.1:3", "", ""), false},
	} {
		if got := tc.r.stranded(tc.m); got != tc.want {
			t.Errorf("%s: stranded = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRepointToLeavesDivergentAlone(t *testing.T) {
	pos := MustParseGTID(FlavorMariaDB, "0-2-10")
	// No connection: each case must decide before touching the server.
	ahead := replica("127.0.0.1:2", "Connecting", "0-1-12")
	got, why := repointTo(context.Background(), ahead, "127.0.0.1:3", "127.0.0.1", 3, BinlogStateOf(pos), Credentials{})
	if got != repointDivergent || !strings.Contains(why, "seq 11-12") {
		t.Errorf("a replica ahead of the master: %v %q, want repointDivergent naming what it holds", got, why)
	}
	there := replica("127.0.0.1:2", "Yes", "0-1-9")
	there.st.Replica.MasterHost, there.st.Replica.MasterPort = "127.0.0.1", 3
	if got, why := repointTo(context.Background(), there, "127.0.0.1:3", "127.0.0.1", 3, BinlogStateOf(pos), Credentials{}); got != repointDone || why != "" {
		t.Errorf("a replica already under the master: %v %q, want repointDone", got, why)
	}
	if got, why := repointTo(context.Background(), unreachable("127.0.0.1:2"), "127.0.0.1:3", "127.0.0.1", 3, BinlogStateOf(pos), Credentials{}); got != repointFailed || why == "" {
		t.Errorf("unreachable: %v %q, want repointFailed with the reason", got, why)
	}
	var res Result
	res.noteRepoint("127.0.0.1:2", repointDivergent, "0-1-12")
	if res.Divergent["127.0.0.1:2"] != "0-1-12" || !strings.Contains(res.NotRepointed["127.0.0.1:2"], "lacks: 0-1-12") || len(res.Repointed) != 0 {
		t.Errorf("noteRepoint(divergent) = %+v", res)
	}
}

func TestFencedSource(t *testing.T) {
	c := &Cluster{Fenced: []*Backend{{Address: "127.0.0.1:1"}}}
	for _, tc := range []struct {
		name string
		st   *Status
		want string
	}{
		{"follows the fenced old master", &Status{Replicating: true, MasterHost: "localhost", MasterPort: 1}, "127.0.0.1:1"},
		{"follows the master", &Status{Replicating: true, MasterHost: "127.0.0.1", MasterPort: 3}, ""},
		{"replicates from no one", &Status{}, ""},
		{"no status", nil, ""},
	} {
		if got := FencedSource(tc.st, c); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
