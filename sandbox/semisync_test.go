package sandbox

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestSemiSync: with Options.SemiSync a commit on the master returns only once a replica has
// acknowledged it. The master counts the acknowledged commit (Rpl_semi_sync_master_yes_tx) and
// a replica has received it by the time the client hears OK; with every replica's IO thread
// stopped a commit waits for an acknowledgement (Rpl_semi_sync_master_wait_sessions) and
// completes once one replica reconnects.
func TestSemiSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := Start(ctx, Options{Replicas: 2, SemiSync: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topo.Stop() })
	m := topo.Master

	for name, want := range map[string]string{
		"rpl_semi_sync_master_enabled":    "ON",
		"rpl_semi_sync_master_wait_point": "AFTER_SYNC",
		"rpl_semi_sync_master_timeout":    strconv.FormatInt(SemiSyncTimeout.Milliseconds(), 10),
	} {
		if got, err := m.Variable(ctx, name); err != nil || got != want {
			t.Errorf("master %s = %q (%v), want %s", name, got, err, want)
		}
	}
	for _, r := range topo.Replicas {
		if got, err := r.Variable(ctx, "rpl_semi_sync_slave_enabled"); err != nil || got != "ON" {
			t.Errorf("%s rpl_semi_sync_slave_enabled = %q (%v)", r.Name, got, err)
		}
	}
	if got, err := m.Status(ctx, "Rpl_semi_sync_master_status"); err != nil || got != "ON" {
		t.Fatalf("Rpl_semi_sync_master_status = %q (%v)", got, err)
	}
	if got, err := m.Status(ctx, "Rpl_semi_sync_master_clients"); err != nil || got != "2" {
		t.Fatalf("Rpl_semi_sync_master_clients = %q (%v)", got, err)
	}
	if _, err := m.Status(ctx, "No_such_status"); err == nil {
		t.Error("Status of an unknown variable succeeded")
	}

	yes := func() int {
		t.Helper()
		v, err := m.Status(ctx, "Rpl_semi_sync_master_yes_tx")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// receivedByAny reports whether some replica's IO thread has received the master's
	// current GTID position (one domain, so the positions compare as strings).
	receivedByAny := func(replicas ...*Server) bool {
		t.Helper()
		pos := gtidBinlogPos(ctx, t, m)
		for _, r := range replicas {
			st, err := r.ReplicaStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st["Gtid_IO_Pos"] == pos {
				return true
			}
		}
		return false
	}

	t.Run("AcknowledgedCommit", func(t *testing.T) {
		before := yes()
		if err := m.Exec(ctx, "CREATE TABLE sluice_test.semi (id INT PRIMARY KEY)", "INSERT INTO sluice_test.semi VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if after := yes(); after < before+2 {
			t.Errorf("Rpl_semi_sync_master_yes_tx went from %d to %d over two commits", before, after)
		}
		if !receivedByAny(topo.Replicas...) {
			t.Error("no replica had received the master's position when the commit returned")
		}
	})

	t.Run("WaitsForAReplica", func(t *testing.T) {
		for _, r := range topo.Replicas {
			if err := r.Exec(ctx, "STOP SLAVE IO_THREAD"); err != nil {
				t.Fatal(err)
			}
		}
		before := yes()
		done := make(chan error, 1)
		go func() { done <- m.Exec(ctx, "INSERT INTO sluice_test.semi VALUES (2)") }()
		for {
			v, err := m.Status(ctx, "Rpl_semi_sync_master_wait_sessions")
			if err != nil {
				t.Fatal(err)
			}
			if v != "0" {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("commit returned (%v) with no replica connected", err)
			case <-ctx.Done():
				t.Fatal("the commit never waited for an acknowledgement")
			case <-time.After(10 * time.Millisecond):
			}
		}
		select {
		case err := <-done:
			t.Fatalf("commit returned (%v) while waiting for an acknowledgement", err)
		default:
		}
		r := topo.Replicas[0]
		if err := r.Exec(ctx, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if after := yes(); after <= before {
			t.Errorf("Rpl_semi_sync_master_yes_tx stayed at %d", after)
		}
		if got, err := m.Status(ctx, "Rpl_semi_sync_master_status"); err != nil || got != "ON" {
			t.Errorf("master fell back to asynchronous replication: status %q (%v)", got, err)
		}
		if !receivedByAny(r) {
			t.Errorf("%s had not received the commit when it returned", r.Name)
		}
		if err := topo.Replicas[1].Exec(ctx, "START SLAVE IO_THREAD"); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
