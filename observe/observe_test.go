package observe

import (
	"strings"
	"testing"
)

func TestDigestStore(t *testing.T) {
	ds := NewDigests()
	ds.Record("SELECT ?", 2e6, 0, false, DigestReplica)
	ds.Record("SELECT ?", 4e6, 0, true, DigestMaster)
	ds.Record("UPDATE t SET a = ?", 1e6, 3, false, DigestMaster)
	rows := ds.Snapshot(-1)
	if len(rows) != 2 {
		t.Fatalf("got %d digests, want 2", len(rows))
	}
	sel := rows[0]
	if sel.Digest != "SELECT ?" || sel.Count != 2 || sel.Total != 6e6 || sel.Max != 4e6 || sel.Errors != 1 ||
		DigestRouteNames(sel.Routes) != "master,replica" {
		t.Fatalf("SELECT ? row: %+v", sel)
	}
	if up := rows[1]; up.Rows != 3 || up.Count != 1 {
		t.Fatalf("UPDATE row: %+v", up)
	}
	if got := ds.Snapshot(1); len(got) != 1 || got[0].Digest != "SELECT ?" {
		t.Fatalf("LIMIT 1: %+v", got)
	}
}

func TestDigestStoreBounded(t *testing.T) {
	ds := NewDigests()
	for i := range MaxDigests + 10 {
		ds.Record("SELECT "+strings.Repeat("x", i%50)+string(rune('a'+i%26))+itoa(i), 1, 0, false, DigestMaster)
	}
	rows := ds.Snapshot(-1)
	if len(rows) != MaxDigests+1 {
		t.Fatalf("store holds %d digests, want %d plus the overflow row", len(rows), MaxDigests)
	}
	for _, r := range rows {
		if r.Digest == overflowDigest {
			if r.Count != 10 {
				t.Fatalf("overflow row counts %d statements, want 10", r.Count)
			}
			return
		}
	}
	t.Fatal("no overflow row")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestDigestRecordAllocs(t *testing.T) {
	ds := NewDigests()
	for _, d := range []string{"SELECT c FROM sbtest1 WHERE id = ?", ""} {
		ds.Record(d, 1, 1, false, DigestReplica)
		if n := testing.AllocsPerRun(1000, func() { ds.Record(d, 1000, 1, false, DigestReplica) }); n != 0 {
			t.Fatalf("record of known digest %q allocates %.1f times, want 0", d, n)
		}
	}
}

// TestDigestSameTextTwoStrings: two strings with one text (a plan evicted
// and classified again) count in one row.
func TestDigestSameTextTwoStrings(t *testing.T) {
	ds := NewDigests()
	a := strings.Repeat("SELECT ?", 1)
	b := strings.Clone(a)
	ds.Record(a, 1, 0, false, DigestMaster)
	ds.Record(b, 1, 0, false, DigestMaster)
	if rows := ds.Snapshot(-1); len(rows) != 1 || rows[0].Count != 2 {
		t.Fatalf("two strings of one digest: %+v", rows)
	}
}

func BenchmarkDigestRecord(b *testing.B) {
	ds := NewDigests()
	d := "SELECT c FROM sbtest1 WHERE id = ?"
	ds.Record(d, 1, 1, false, DigestReplica)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ds.Record(d, 1000, 1, false, DigestReplica)
		}
	})
}

func TestEventRing(t *testing.T) {
	var r Events
	for i := range MaxEvents + 5 {
		r.Add(Event{Kind: "backend_up", Detail: itoa(i)})
	}
	l := r.List()
	if len(l) != MaxEvents {
		t.Fatalf("ring holds %d events, want %d", len(l), MaxEvents)
	}
	if l[0].Detail != "5" || l[len(l)-1].Detail != itoa(MaxEvents+4) {
		t.Fatalf("ring order: first %s, last %s", l[0].Detail, l[len(l)-1].Detail)
	}
}
