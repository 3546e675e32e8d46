package health

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:3306", "127.0.0.1:3306", true},
		{"localhost:3306", "127.0.0.1:3306", true},
		{"[::1]:3306", "127.0.0.1:3306", true},
		{"127.0.0.1:3306", "127.0.0.1:3307", false},
		{"db1:3306", "db2:3306", false},
		{"db1:3306", "db1:3306", true},
		{"db1", "db1:3306", false},
	} {
		if got := sameServer(tc.a, tc.b); got != tc.want {
			t.Errorf("sameServer(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFollowAndUnfenceStatements(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    []string // substrings, in order
	}{
		{"10.11.6-MariaDB", []string{"STOP SLAVE", "RESET SLAVE ALL", "gtid_slave_pos = @@GLOBAL.gtid_binlog_pos",
			"MASTER_HOST = 'h', MASTER_PORT = 3307, MASTER_USER = 'u', MASTER_PASSWORD = 'p\\'w', MASTER_USE_GTID = slave_pos", "START SLAVE"}},
		{"8.0.36", []string{"STOP REPLICA", "RESET REPLICA ALL", "SOURCE_HOST = 'h', SOURCE_PORT = 3307, SOURCE_USER = 'u', SOURCE_PASSWORD = 'p\\'w', SOURCE_AUTO_POSITION = 1", "START REPLICA"}},
		{"5.7.44", []string{"STOP SLAVE", "RESET SLAVE ALL", "MASTER_AUTO_POSITION = 1", "START SLAVE"}},
	} {
		got := dialectFor(tc.version).follow("h", 3307, "u", "p'w")
		if len(got) != len(tc.want) {
			t.Fatalf("%s: follow = %q, want %d statements", tc.version, got, len(tc.want))
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: statement %d = %q, want it to contain %q", tc.version, i, got[i], w)
			}
		}
	}
	if got := dialectFor("10.11.6-MariaDB").unfence(); !slices.Equal(got, []string{"SET GLOBAL read_only = OFF"}) {
		t.Errorf("MariaDB unfence = %q", got)
	}
	if got := dialectFor("8.0.36").unfence(); !slices.Equal(got, []string{"SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}) {
		t.Errorf("MySQL unfence = %q", got)
	}
}

func TestHoldAndReleaseWrites(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1})
	before := topo.Current()
	changed := topo.Changed()
	s, err := topo.HoldWrites("main", "switchover to x")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("HoldWrites did not close Changed()")
	}
	if c := s.Cluster("main"); c.WritesHeld != "switchover to x" || s.Epoch != before.Epoch+1 || c.Master != before.Cluster("main").Master {
		t.Fatalf("held snapshot: epoch %d, WritesHeld %q, master changed %v", s.Epoch, c.WritesHeld, c.Master != before.Cluster("main").Master)
	}
	if s, err = topo.ReleaseWrites("main"); err != nil || s.Cluster("main").WritesHeld != "" {
		t.Fatalf("ReleaseWrites: %v, held %q", err, s.Cluster("main").WritesHeld)
	}
	if _, err := topo.HoldWrites("nope", "x"); err == nil {
		t.Fatal("HoldWrites of an unknown cluster: no error")
	}
	// Promote lifts a hold too.
	if _, err := topo.HoldWrites("main", "x"); err != nil {
		t.Fatal(err)
	}
	m := topo.Current().Cluster("main").Master.Address
	if s, err = topo.Promote("main", m, nil); err != nil || s.Cluster("main").WritesHeld != "" {
		t.Fatalf("Promote to the same master: %v, held %q", err, s.Cluster("main").WritesHeld)
	}
}

func TestSwitchSwapsRoles(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	before := topo.Current()
	c0 := before.Cluster("main")
	oldMaster, r0, r1 := c0.Master, c0.Replicas[0], c0.Replicas[1]
	r1.ReportFailure(errors.New("blip")) // a state the new Backend must carry over
	if _, err := topo.HoldWrites("main", "switchover"); err != nil {
		t.Fatal(err)
	}
	s, err := topo.Switch("main", r0.Address, &Result{Epoch: 9})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cluster("main")
	if s.Epoch != 9 || c.WritesHeld != "" {
		t.Fatalf("epoch %d held %q, want 9 and no hold", s.Epoch, c.WritesHeld)
	}
	if c.Master.Address != r0.Address || c.Master.Role != RoleMaster || c.Master == r0 || r0.Role != RoleReplica {
		t.Fatalf("master %+v: want a new master Backend for %s", c.Master, r0.Address)
	}
	if len(c.Replicas) != 2 || c.Replicas[0].Address != oldMaster.Address || c.Replicas[0].Role != RoleReplica || c.Replicas[1] != r1 {
		t.Fatalf("replicas %v: want the old master as a replica in the target's place, then %s", c.Replicas, r1.Address)
	}
	if len(c.Fenced) != 0 || oldMaster.State() == StateFenced {
		t.Fatal("a switchover fenced the old master")
	}
	if r1.State() != StateDown || c.Replicas[0].State() != StateUp {
		t.Fatalf("states: old master replica %s, %s %s", c.Replicas[0].State(), r1.Address, r1.State())
	}
	seen := map[string]bool{}
	for range 4 {
		if b := c.PickReplica(nil); b != nil {
			seen[b.Address] = true
		}
	}
	if !seen[oldMaster.Address] {
		t.Fatalf("reads never went to the old master (now a replica): %v", seen)
	}
	if _, err := topo.Switch("main", "10.0.0.1:1", nil); !errors.Is(err, ErrUnknownBackend) {
		t.Fatalf("Switch to a stranger: %v, want ErrUnknownBackend", err)
	}
}

func TestRecordSwitchover(t *testing.T) {
	s := FailoverState{Cluster: "main", Fenced: []string{"b:1", "c:1"}}
	r := &Result{Cluster: "main", Outcome: OutcomeSwitchover, Epoch: 4, OldMaster: "a:1", NewMaster: "b:1"}
	s.RecordSwitchover(r)
	if s.Master != "b:1" || s.Epoch != 4 || !s.LastFailover.IsZero() || len(s.History) != 1 {
		t.Fatalf("state %+v", s)
	}
	if !slices.Equal(s.Fenced, []string{"c:1"}) {
		t.Fatalf("fenced %v, want only c:1 (the new master is not fenced, the old one not added)", s.Fenced)
	}
}
