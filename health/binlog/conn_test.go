package binlog

import (
	"slices"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"go.uber.org/zap"
)

// TestConnEvents feeds a conn the events of a few transactions as the
// replication package decodes them: the tables reported, the position
// after each whole transaction, and the resets.
func TestConnEvents(t *testing.T) {
	var changes []string
	resets := 0
	tl := &Tailer{o: Options{
		OnChange: func(s, tb string, ddl bool) { changes = append(changes, s+"."+tb) },
		OnReset:  func() { resets++ },
	}, log: zap.NewNop()}
	start, _ := mysql.ParseMariadbGTIDSet("0-1-4")
	c := &conn{t: tl, resume: start.(*mysql.MariadbGTIDSet), trig: triggers{visible: true}}
	ev := func(e replication.Event) *replication.BinlogEvent {
		return &replication.BinlogEvent{Header: &replication.EventHeader{}, Event: e}
	}
	gtid := func(seq uint64, flags byte) *replication.BinlogEvent {
		return ev(&replication.MariadbGTIDEvent{GTID: mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: seq}, Flags: flags})
	}
	query := func(schema, q string) *replication.BinlogEvent {
		return ev(&replication.QueryEvent{Schema: []byte(schema), Query: []byte(q)})
	}
	rows := func(schema, table string) *replication.BinlogEvent {
		return ev(&replication.RowsEvent{Table: &replication.TableMapEvent{Schema: []byte(schema), Table: []byte(table)}})
	}
	feed := func(evs ...*replication.BinlogEvent) {
		t.Helper()
		for _, e := range evs {
			if err := c.handle(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	pos := func() string { return c.resume.String() }

	feed(gtid(5, 0), query("app", "BEGIN"), rows("app", "a"))
	if pos() != "0-1-4" {
		t.Errorf("mid-transaction position %s, want 0-1-4 (a new connection reads it again)", pos())
	}
	feed(ev(&replication.XIDEvent{}))
	if pos() != "0-1-5" {
		t.Errorf("position %s after the XID, want 0-1-5", pos())
	}
	// Statement format: text between BEGIN and COMMIT.
	feed(gtid(6, 0), query("app", "BEGIN"), query("app", "UPDATE b JOIN c ON b.id = c.id SET b.x = c.x"), query("app", "COMMIT"))
	if pos() != "0-1-6" {
		t.Errorf("position %s after COMMIT, want 0-1-6", pos())
	}
	// A group without COMMIT or XID (XA PREPARE) ends at the next GTID.
	feed(gtid(7, 0), query("app", "BEGIN"), rows("app", "d"), gtid(8, 0))
	if pos() != "0-1-7" {
		t.Errorf("position %s at the next group, want 0-1-7", pos())
	}
	// Unreadable and unknowable statements reset; the transaction still ends.
	feed(query("app", "CALL p()"), query("app", "this is not SQL"), query("app", "COMMIT"))
	if pos() != "0-1-8" || resets != 2 {
		t.Errorf("position %s, %d resets; want 0-1-8, 2", pos(), resets)
	}
	if want := []string{"app.a", "app.b", "app.d"}; !slices.Equal(changes, want) {
		t.Errorf("changes %v, want %v", changes, want)
	}
	if st := tl.Stats(); st.Events != 15 || st.Position != "0-1-8" {
		t.Errorf("Stats %+v", st)
	}
}
