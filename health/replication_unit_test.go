package health

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDialectFor(t *testing.T) {
	for _, tc := range []struct {
		version      string
		flavor       Flavor
		replicaWords bool
	}{
		{"10.11.19-MariaDB-0+deb12u1", FlavorMariaDB, false},
		{"5.5.5-10.6.4-MariaDB-log", FlavorMariaDB, false},
		{"11.4.2-MariaDB", FlavorMariaDB, false},
		{"8.0.22", FlavorMySQL, false},
		{"8.0.23", FlavorMySQL, true},
		{"8.0.36-0ubuntu0.22.04.1", FlavorMySQL, true},
		{"8.4.0", FlavorMySQL, true},
		{"9.1.0-commercial", FlavorMySQL, true},
		{"5.7.44-log", FlavorMySQL, false},
		{"unreadable", FlavorMySQL, true},
	} {
		d := dialectFor(tc.version)
		if d.flavor != tc.flavor || d.replicaWords != tc.replicaWords {
			t.Errorf("dialectFor(%q) = %+v, want %v replicaWords=%v", tc.version, d, tc.flavor, tc.replicaWords)
		}
	}
}

// TestDialectStatements pins the statements each flavor runs; MySQL cannot run in the test
// environment, so this is where its syntax is checked.
func TestDialectStatements(t *testing.T) {
	maria, mysql8, mysql80 := dialectFor("10.11.19-MariaDB"), dialectFor("8.4.2"), dialectFor("8.0.20")
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"mariadb promote", maria.promote(), []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"}},
		{"mysql promote", mysql8.promote(), []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}},
		{"mysql 8.0.20 promote", mysql80.promote(), []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}},
		{"mariadb repoint", maria.repoint("db-2.internal", 3307), []string{"STOP SLAVE",
			"CHANGE MASTER TO MASTER_HOST = 'db-2.internal', MASTER_PORT = 3307, MASTER_USE_GTID = slave_pos", "START SLAVE"}},
		{"mysql repoint", mysql8.repoint("10.0.0.2", 3306), []string{"STOP REPLICA",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = '10.0.0.2', SOURCE_PORT = 3306, SOURCE_AUTO_POSITION = 1", "START REPLICA"}},
		{"mysql 8.0.20 repoint", mysql80.repoint("10.0.0.2", 3306), []string{"STOP SLAVE",
			"CHANGE MASTER TO MASTER_HOST = '10.0.0.2', MASTER_PORT = 3306, MASTER_AUTO_POSITION = 1", "START SLAVE"}},
		{"repoint quotes the host", maria.repoint("a'b", 1), []string{"STOP SLAVE",
			`CHANGE MASTER TO MASTER_HOST = 'a\'b', MASTER_PORT = 1, MASTER_USE_GTID = slave_pos`, "START SLAVE"}},
		{"mariadb fence", maria.fence(), []string{"SET GLOBAL read_only = ON"}},
		{"mysql fence", mysql8.fence(), []string{"SET GLOBAL super_read_only = ON"}},
		{"status", []string{maria.showReplicaStatus(), mysql8.showReplicaStatus(), mysql80.showReplicaStatus()},
			[]string{"SHOW SLAVE STATUS", "SHOW REPLICA STATUS", "SHOW SLAVE STATUS"}},
		{"variables", []string{maria.variablesQuery(), mysql8.variablesQuery()}, []string{
			"SELECT @@GLOBAL.read_only, 0, @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_slave_pos, @@GLOBAL.gtid_binlog_state",
			"SELECT @@GLOBAL.read_only, @@GLOBAL.super_read_only, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_executed"}},
		{"wait", []string{
			maria.waitExecuted("0-1-5", 500*time.Millisecond),
			mysql8.waitExecuted(uuidA+":1-5", 500*time.Millisecond),
			mysql8.waitExecuted(uuidA+":1-5", 1500*time.Millisecond),
		}, []string{
			"SELECT MASTER_GTID_WAIT('0-1-5', 0.500)",
			"SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-5', 1)",
			"SELECT WAIT_FOR_EXECUTED_GTID_SET('" + uuidA + ":1-5', 2)",
		}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestFailoverLockName(t *testing.T) {
	if got := FailoverLockName("main"); got != "sluice_failover_main" {
		t.Errorf("FailoverLockName(main) = %q", got)
	}
	long := strings.Repeat("c", 60)
	a, b := FailoverLockName(long), FailoverLockName(long+"x")
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasPrefix(a, "sluice_failover_ccc") {
		t.Errorf("long names: %q, %q", a, b)
	}
}

func TestUndoApplyRelayLog(t *testing.T) {
	maria := dialectFor("10.11.6-MariaDB")
	for _, tc := range []struct {
		name string
		rs   ReplicaStatus
		want []string
	}{
		{"nothing to undo", ReplicaStatus{Configured: true, IORunning: "Connecting", SQLRunning: true}, nil},
		{"SQL thread a DBA stopped", ReplicaStatus{Configured: true, IORunning: "Connecting"}, []string{"STOP SLAVE SQL_THREAD"}},
		{"delayed, both running", ReplicaStatus{Configured: true, IORunning: "Connecting", SQLRunning: true, SQLDelay: 20, UsingGTID: "Slave_Pos"},
			[]string{"STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 20, MASTER_USE_GTID = slave_pos", "START SLAVE"}},
		{"both stopped", ReplicaStatus{Configured: true, IORunning: "No", UsingGTID: "Current_Pos"},
			[]string{"STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 0, MASTER_USE_GTID = current_pos"}},
		{"IO stopped, SQL running: nothing changes", ReplicaStatus{Configured: true, IORunning: "No", SQLRunning: true, UsingGTID: "Slave_Pos"}, nil},
		{"IO stopped, SQL running, delayed", ReplicaStatus{Configured: true, IORunning: "No", SQLRunning: true, SQLDelay: 5, UsingGTID: "Slave_Pos"},
			[]string{"STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 5, MASTER_USE_GTID = slave_pos", "START SLAVE SQL_THREAD"}},
	} {
		if got := maria.undoApplyRelayLog(tc.rs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
