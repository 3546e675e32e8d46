package shard

import (
	"testing"

	"github.com/sluice-proxy/sluice/conf"
)

func TestPhysicalTables(t *testing.T) {
	cfg, err := conf.Parse([]byte(`
[auth]
address = "127.0.0.1:1"
[[cluster]]
name = "a"
master = "127.0.0.1:2"
user = "s"
[[cluster]]
name = "b"
master = "127.0.0.1:3"
user = "s"
[[shard]]
schema = "pay"
table = "orders"
key = "uid"
algorithm = "mod"
clusters = ["a", "b"]
tables_per_cluster = 2
[[shard]]
schema = "pay"
table = "users"
key = "uid"
algorithm = "hash"
clusters = ["b"]
[[broadcast]]
schema = "pay"
table = "Countries"
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range r.PhysicalTables() {
		got = append(got, r.Clusters()[p.Cluster]+":"+p.Schema+"."+p.Table+"<"+p.Logical)
	}
	want := []string{
		"a:pay.orders_0<pay.orders", "a:pay.orders_1<pay.orders", "b:pay.orders_0<pay.orders", "b:pay.orders_1<pay.orders",
		"b:pay.users<pay.users",
		"a:pay.countries<pay.countries", "b:pay.countries<pay.countries",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("table %d: %s, want %s", i, got[i], want[i])
		}
	}
}
